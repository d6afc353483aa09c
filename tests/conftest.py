"""Shared fixtures: whole-program plans under Pulumi mocks, cached per test process."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from verify import plan as gtp_plan

ROOT = Path(__file__).resolve().parents[1]
_CACHE: dict[str, gtp_plan.Plan] = {}
# Every plan a test runs (verify.plan in a subprocess included) is planned, never restored from the plan cache
# (verify/plan_cache.py): a test's plan stands alone. tests/test_plan_cache.py points the cache at its own folder.
os.environ["GTP_PLAN_CACHE"] = "off"


def clone_working_tree(dest: Path) -> None:
    """A git clone of the repository whose HEAD is the working tree as it is (uncommitted and new files too)."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for path in filter(None, listed):
        source, target = ROOT / path, dest / path
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.exists():
            target.unlink()  # deleted in the working tree
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "--quiet", "--allow-empty", "-m",
                    "base"], cwd=dest, check=True)


def plan_stack(stack: str) -> gtp_plan.Plan:
    """The offline plan of a checked-in stack (the real program under mocks); cached, plans are deterministic."""
    if stack not in _CACHE:
        _CACHE[stack] = gtp_plan.run(stack)
    return _CACHE[stack]


def _keda_scaled(config: dict[str, Any]) -> None:
    """prod's pre-training scaled by a KEDA ScaledObject on GPU utilization, alone (Kueue is then off)."""
    config["gtp:workloads"]["gpt-pretrain"]["autoscaling"] = {"mode": "scaledobject", "minReplicas": 2,
                                                               "maxReplicas": 4, "gpuUtilizationThreshold": 85}
    del config["gtp:workloads"]["gpt-finetune"]


VARIANTS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {"prod-keda": ("prod", _keda_scaled)}
"""Stack variants tests share (name → base stack, edit of its config), planned once per test process."""


def plan_variant(name: str) -> gtp_plan.Plan:
    """The plan of a shared variant of a checked-in stack (`VARIANTS`); cached like `plan_stack`."""
    if name not in _CACHE:
        import tempfile

        stack, edit = VARIANTS[name]
        _CACHE[name] = plan_modified(Path(tempfile.mkdtemp(prefix=f"gtp-{name}-")), stack, edit)
    return _CACHE[name]


def plan_modified(tmp_path: Path, stack: str, edit: Callable[[dict[str, Any]], None]) -> gtp_plan.Plan:
    """Plan a copy of a stack file after `edit(config_dict)` changed it (keys like 'gtp:cluster')."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    edit(document["config"])
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return gtp_plan.run(stack, stack_file=path)


@pytest.fixture
def plans() -> Callable[[str], gtp_plan.Plan]:
    return plan_stack
