"""Async checkpoints stage into reused host buffers and still save exactly the state of their step.

One rank (gloo over loopback) in a subprocess: two async saves of a model whose parameters and Adam moments keep
their storages, with the live tensors changed right after each save returns. The second save must refill the
first one's staging buffers (no new allocation: the same storages), and each checkpoint must hold the values of
its own step, not the later ones (the copy is done when async_save returns, trainer/checkpoint.py ReusedStager).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.torchrun


SCRIPT = textwrap.dedent("""
    import json, sys
    import torch, torch.distributed as dist
    from trainer.checkpoint import CheckpointManager, TrainingProgress, scan

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    manager = CheckpointManager(sys.argv[1], 0, 1, keep=5, use_async=True)

    def train_step():
        optimizer.zero_grad()
        model(torch.randn(4, 64)).sum().backward()
        optimizer.step()

    saved, buffers, staging = {}, [], []
    for step in (1, 2):
        train_step()
        saved[step] = {name: tensor.clone() for name, tensor in model.state_dict().items()}
        manager.save(model, optimizer, scheduler, TrainingProgress(step=step, global_sample_index=4 * step),
                     blocking=False)
        staging.append(manager.last_staging_s)
        with torch.no_grad():  # the live tensors move on at once, while the write is in flight
            for parameter in model.parameters():
                parameter.add_(100.0)
        manager.wait()
        cache = manager._stager._state_dict_stager._cached_storage_mapping
        buffers.append(sorted(storage.data_ptr() for storage in cache.values()))
    matches = {}
    for entry in scan(sys.argv[1]):
        manager.load(entry, model, optimizer, scheduler)
        matches[entry.step] = all(torch.equal(model.state_dict()[name], value)
                                  for name, value in saved[entry.step].items())
    manager.close()
    print(json.dumps({"buffers": buffers, "staging_s": staging, "matches": matches,
                      "complete": [entry.step for entry in scan(sys.argv[1]) if entry.complete]}))
    dist.destroy_process_group()
""")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_async_saves_reuse_the_staging_buffers_and_save_their_own_step(tmp_path: Path) -> None:
    trainer = Path(__file__).resolve().parents[2] / "images" / "trainer"
    env = {**os.environ, "PYTHONPATH": f"{trainer}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "ck"), str(_free_port())], env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["complete"] == [1, 2]
    assert record["matches"] == {"1": True, "2": True}, "a checkpoint holds values changed after its save returned"
    first, second = record["buffers"]
    assert first and first == second, "the second async save allocated new staging buffers instead of refilling"
    assert all(seconds > 0 for seconds in record["staging_s"]), record["staging_s"]
