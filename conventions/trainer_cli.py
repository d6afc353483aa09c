"""The command line of our trainer (`python -m trainer.train`) as the platform writes it, and the trainer's own
torch-free modules loaded by file path so the config step can read a stack's values with the trainer's grammar.

`PLATFORM_OWNED` is the one list of flags the platform decides itself: `platform_flags` writes them
(components/training_pod.py `trainer_args`), and stack_config/consumers.py refuses them in `extraArgs`.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

TRAINER_PACKAGE = Path(__file__).resolve().parents[1] / "images" / "trainer" / "trainer"
"""The trainer package's sources (the image's build context)."""

WATCHDOG_DEST = "watchdog_timeout"
PLATFORM_OWNED: dict[str, str | None] = {
    # argparse dest → the workload key that sets it (`None`: nothing in the stack does; the platform's own wiring)
    "model": "model",
    "max_steps": "maxSteps",
    "batch_size": "batchSize",
    "checkpoint_dir": None,  # <storage.mountPath>/checkpoints/<workload>, shared by every pod of the job
    "checkpoint_every": "checkpointEvery",
    "metrics_port": None,  # the port the pod declares and Prometheus scrapes (components/training_pod.py)
    # Not written, but relied on: the trainer's default 600 s ends a hung rank so the gang restarts from its last
    # checkpoint (docs/operations.md, "Hung ranks"); the TrainingStepStalled alert (components/alert_rules.py)
    # says "that restart is not happening" when it fires.
    WATCHDOG_DEST: None,
}
"""Trainer flags (by argparse dest) the platform owns: a stack's `extraArgs` may not set them."""


def flag(dest: str) -> str:
    """The flag of an argparse dest, as the trainer spells it (images/trainer/trainer/config.py `_flag`)."""
    return "--" + dest.replace("_", "-")


def platform_flags(*, model: str, max_steps: int, batch_size: int, checkpoint_dir: str, checkpoint_every: int,
                   metrics_port: int | None) -> list[str]:
    """The flags the platform passes to `python -m trainer.train` ahead of a workload's `extraArgs`."""
    values: dict[str, object] = {"model": model, "max_steps": max_steps, "batch_size": batch_size,
                                 "checkpoint_dir": checkpoint_dir, "checkpoint_every": checkpoint_every}
    if metrics_port is not None:
        values["metrics_port"] = metrics_port
    assert set(values) <= set(PLATFORM_OWNED), "a flag the platform passes must be in PLATFORM_OWNED"
    return [f"{flag(dest)}={value}" for dest, value in values.items()]


def checkpoint_dir(mount_path: str, job_name: str) -> str:
    """A job's checkpoint directory on the shared volume (`--checkpoint-dir`)."""
    return f"{mount_path.rstrip('/')}/checkpoints/{job_name}"


@cache
def trainer_module(name: str) -> ModuleType:
    """`trainer.<name>` of images/trainer loaded from its file, without the package (whose other modules import
    torch, which the platform doesn't need). Only stdlib-only modules can be loaded so: `config`."""
    module_name = f"_gtp_trainer_{name}"
    spec = importlib.util.spec_from_file_location(module_name, TRAINER_PACKAGE / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses resolve the module's string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@cache
def trainer_function(module: str, name: str) -> Callable[..., Any]:
    """The self-contained top-level function `name` of `trainer.<module>`, compiled from the module's own source
    without running the rest of it: `trainer.bench` imports torch at the top, and moving its helpers to a torch-free
    module would change the image's build context (and so every stack's image tag) for no change in behaviour. A
    function that reads anything outside itself fails here with NameError when called, which a test exercises."""
    source = (TRAINER_PACKAGE / f"{module}.py").read_text()
    tree = ast.parse(source)
    found: list[ast.stmt] = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    assert len(found) == 1, (module, name)
    namespace: dict[str, Any] = {"__builtins__": __builtins__}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(TRAINER_PACKAGE / f"{module}.py"), "exec"), namespace)
    return namespace[name]
