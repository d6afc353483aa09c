"""Helpers for trainer tests: run the trainer the way the workloads do (torchrun, plain PyTorchJob processes).

A plainly named module (not conftest) so test files import it without clashing with other conftest modules."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# The trainer package of THIS checkout, ahead of whatever the shared venv installed (an editable install may point
# at another worktree): the tests import it, and the subprocesses get it through PYTHONPATH (trainer_env).
TRAINER_ROOT = str(Path(__file__).resolve().parents[2] / "images" / "trainer")
if sys.path[:1] != [TRAINER_ROOT]:
    sys.path.insert(0, TRAINER_ROOT)
for _name in [name for name in sys.modules if name == "trainer" or name.startswith("trainer.")]:
    del sys.modules[_name]

from trainer.checkpoint import scan  # noqa: E402
from trainer.telemetry import parse_records  # noqa: E402 (re-exported for the tests)

PYTHON = sys.executable
"""The venv's interpreter: torchrun and the workers must import the same torch as the tests."""

# Small, fast, deterministic: 24 steps of 2 x 8 samples, a checkpoint every 4 steps.
BASE_FLAGS = ["--model", "cnn", "--max-steps", "24", "--batch-size", "8", "--num-samples", "512",
              "--checkpoint-every", "4", "--deterministic", "--log-every", "1", "--lr", "0.003"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def trainer_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TRAINER_FAULT_INJECT",
                "TRAINER_DEBUG_SAMPLE_LOG", "TRAINER_DEBUG_STEP_SLEEP_S", "TORCHELASTIC_RUN_ID"):
        env.pop(key, None)
    # pytorch#135712: restarts hang on the shared rendezvous store; the workloads set this too.
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    # One thread per rank, as torchrun sets it, so plain-process and torchrun runs compute identically.
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([TRAINER_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def torchrun_command(nproc: int, args: list[str], max_restarts: int = 0, module: str = "trainer.train",
                     launcher_args: list[str] | None = None) -> list[str]:
    launcher = launcher_args if launcher_args is not None else ["--standalone"]
    return [PYTHON, "-m", "torch.distributed.run", *launcher, "--nproc-per-node", str(nproc),
            "--max-restarts", str(max_restarts), "--monitor-interval", "0.2", "-m", module, *args]




@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    records: list[dict] = field(default_factory=list)

    def done(self) -> dict:
        """Rank 0's last line, which must be the done event."""
        rank0 = [record for record in self.records if record.get("rank") == 0 or record.get("event") == "done"]
        assert rank0, f"no rank-0 output\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"
        last = rank0[-1]
        assert last.get("event") == "done", f"rank 0's last line is not done: {last}\nstderr:\n{self.stderr[-3000:]}"
        return last

    def events(self, name: str, rank: int | None = None) -> list[dict]:
        return [record for record in self.records
                if record.get("event") == name and (rank is None or record.get("rank") == rank)]


def run(command: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> Result:
    completed = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                               check=False)
    return Result(completed.returncode, completed.stdout, completed.stderr, parse_records(completed.stdout))


class LiveProcess:
    """A launched process whose stdout is parsed line by line while it runs (to kill it at a chosen moment)."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, start_new_session=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr), daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, predicate, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            for record in parse_records(line):
                if predicate(record):
                    return record
        self.kill()
        raise AssertionError(f"condition not seen in time\nstdout:\n{''.join(self.lines)[-3000:]}\n"
                             f"stderr:\n{''.join(self._stderr)[-3000:]}")

    def finish(self, timeout: float = 120) -> Result:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        while True:
            try:
                line = self._queue.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        time.sleep(0.1)
        stdout = "".join(self.lines)
        return Result(self.process.returncode, stdout, "".join(self._stderr), parse_records(stdout))

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


def complete_steps(directory: Path) -> list[int]:
    """Steps resume could pick: those whose completion marker exists."""
    return [entry.step for entry in scan(directory) if entry.complete]
