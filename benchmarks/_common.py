"""Shared helpers for the benchmark scripts (run trainer launches, parse JSON lines)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainer.telemetry import parse_records

PYTHON = sys.executable
ROOT = Path(__file__).resolve().parent.parent
BARE_IMPORT = [PYTHON, "-c", "import pulumi, pulumi_aws, pulumi_kubernetes, pulumi_docker"]
"""The floor any Pulumi program of ours pays: the four SDKs imported (what the planning benchmarks divide by)."""


def env(**extra: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    environment.update(extra)
    return environment


def torchrun(nproc: int, module_or_script: list[str], max_restarts: int = 0) -> list[str]:
    return [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "--max-restarts", str(max_restarts), "--monitor-interval", "0.2", *module_or_script]


def launch(command: list[str], timeout: float = 600, **extra_env: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as workdir:
        completed = subprocess.run(command, env=env(**extra_env), cwd=workdir, capture_output=True, text=True,
                                   timeout=timeout, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    return parse_records(completed.stdout)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def timed(command: list[str], cwd: Path = ROOT, **extra_env: str) -> tuple[float, str]:
    """Wall seconds of `command` (run to completion, must succeed or exit 1 = findings), and its stderr."""
    environment = dict(os.environ, **extra_env)
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, env=environment)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return elapsed, result.stderr


def load_average() -> str:
    """The machine's load when the benchmark ran (the closing notes quote ratios with it)."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def ratio_line(name: str, values: list[float], floor: list[float], goal: str) -> str:
    return (f"{name}: median {median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)}) = "
            f"{median(values) / median(floor):.2f} x bare import (goal {goal})")
