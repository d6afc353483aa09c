"""Shared helpers for the benchmark scripts (run trainer launches, parse JSON lines)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from trainer.telemetry import parse_records

PYTHON = sys.executable


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
                                   timeout=timeout)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    return parse_records(completed.stdout)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
