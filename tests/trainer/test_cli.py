"""Single-process runs of the entry points: errors and exit codes, data, init weights, metrics, healthcheck."""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import urllib.request
from pathlib import Path

import pytest
import torch
from trainer_harness import PYTHON, LiveProcess, free_port, run, trainer_env

from trainer.config import TrainConfig
from trainer.models import build_model

pytestmark = pytest.mark.torchrun


TRAIN = [PYTHON, "-m", "trainer.train"]
HEALTHCHECK = [PYTHON, "-m", "trainer.healthcheck"]


def test_help_documents_flags_and_exit_codes(tmp_path):
    result = run([*TRAIN, "--help"], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 0
    assert "--async-checkpoint" in result.stdout and "143" in result.stdout


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-steps", "0"], "--max-steps must be >= 1, got 0"),
    (["--model", "resnet"], "invalid choice: 'resnet'"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
def test_bad_flags_exit_2_with_clear_text(tmp_path, flags, message):
    result = run([*TRAIN, *flags], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


def _write_idx(directory: Path, images: torch.Tensor, labels: torch.Tensor, compress: bool) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    image_bytes = struct.pack(">IIII", 0x803, images.shape[0], 28, 28) + images.to(torch.uint8).numpy().tobytes()
    label_bytes = struct.pack(">II", 0x801, labels.shape[0]) + labels.to(torch.uint8).numpy().tobytes()
    for name, payload in (("train-images-idx3-ubyte", image_bytes), ("train-labels-idx1-ubyte", label_bytes)):
        if compress:
            (directory / f"{name}.gz").write_bytes(gzip.compress(payload))
        else:
            (directory / name).write_bytes(payload)


def test_bad_data_exits_2_naming_the_path(tmp_path):
    missing = tmp_path / "nowhere"
    result = run([*TRAIN, "--data-dir", str(missing)], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 2
    assert f"--data-dir {missing} does not exist" in result.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    result = run([*TRAIN, "--data-dir", str(empty)], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 2
    assert f"{empty}: missing train-images-idx3-ubyte" in result.stderr

    broken = tmp_path / "broken"
    _write_idx(broken, torch.zeros(4, 28, 28), torch.zeros(4), compress=False)
    (broken / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, 5) + bytes(5))
    result = run([*TRAIN, "--data-dir", str(broken)], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 2
    assert "MNIST files disagree" in result.stderr and str(broken / "train-labels-idx1-ubyte") in result.stderr

    truncated = tmp_path / "truncated"
    _write_idx(truncated, torch.zeros(4, 28, 28), torch.zeros(4), compress=False)
    path = truncated / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-10])
    result = run([*TRAIN, "--data-dir", str(truncated)], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 2
    assert f"malformed MNIST file {path}" in result.stderr


def test_trains_on_gzipped_mnist_idx_files(tmp_path):
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (64,), generator=generator)
    images = (labels.view(-1, 1, 1) * 25 + torch.randint(0, 5, (64, 28, 28), generator=generator)).clamp(0, 255)
    _write_idx(tmp_path / "mnist", images, labels, compress=True)
    result = run([*TRAIN, "--data-dir", str(tmp_path / "mnist"), "--max-steps", "20", "--batch-size", "16",
                  "--lr", "0.01", "--log-every", "1"], trainer_env(), tmp_path, timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [record["loss"] for record in result.events("step")]
    assert losses[-1] < losses[0]
    assert result.records[-1]["event"] == "done"


def test_init_weights_from_pt_and_safetensors_agree(tmp_path):
    from safetensors.torch import save_file

    model = build_model(TrainConfig(seed=99))
    state = {key: value.clone() for key, value in model.state_dict().items()}
    torch.save(state, tmp_path / "init.pt")
    save_file(state, str(tmp_path / "init.safetensors"))
    flags = ["--max-steps", "3", "--batch-size", "4", "--deterministic"]
    digests = {}
    for name in ("init.pt", "init.safetensors", None):
        extra = ["--init-weights", str(tmp_path / name)] if name else []
        result = run([*TRAIN, *flags, *extra], trainer_env(), tmp_path, timeout=60)
        assert result.returncode == 0, result.stderr[-3000:]
        digests[name] = result.done()["param_digest"]
    assert digests["init.pt"] == digests["init.safetensors"] != digests[None]


def test_wrong_init_weights_exit_2(tmp_path):
    torch.save({"fc2.weight": torch.zeros(3, 3)}, tmp_path / "bad.pt")
    result = run([*TRAIN, "--init-weights", str(tmp_path / "bad.pt")], trainer_env(), tmp_path, timeout=60)
    assert result.returncode == 2
    assert f"--init-weights {tmp_path / 'bad.pt'} does not fit the model" in result.stderr


def test_metrics_endpoint_serves_step_and_checkpoint(tmp_path):
    port = free_port()
    live = LiveProcess([*TRAIN, "--max-steps", "200", "--batch-size", "4", "--metrics-port", str(port),
                        "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "5", "--log-every", "1"],
                       trainer_env(TRAINER_DEBUG_STEP_SLEEP_S="0.02"), tmp_path)
    try:
        live.wait_for(lambda record: record.get("event") == "step" and record["step"] >= 12)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        live.kill()
    assert 'trainer_step{rank="0"}' in body
    assert "trainer_step_time_seconds" in body and "trainer_samples_per_second" in body
    checkpoint_line = next(line for line in body.splitlines() if line.startswith("trainer_last_checkpoint_step{"))
    assert float(checkpoint_line.split()[-1]) >= 5


def test_logs_never_contain_a_progress_bar(tmp_path):
    result = run([*TRAIN, "--max-steps", "3", "--batch-size", "4", "--log-every", "1"], trainer_env(), tmp_path,
                 timeout=60)
    assert result.returncode == 0
    assert "\r" not in result.stdout + result.stderr
    assert all(line.startswith("{") for line in result.stdout.splitlines())


# ---- healthcheck --------------------------------------------------------------------------------------------
def _healthcheck(tmp_path: Path, *flags: str) -> tuple[int, dict]:
    completed = subprocess.run([*HEALTHCHECK, *flags], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                               env=trainer_env(), check=False)
    lines = completed.stdout.strip().splitlines()
    assert len(lines) == 1, completed.stdout + completed.stderr
    return completed.returncode, json.loads(lines[0])


def test_healthcheck_passes_on_a_cpu_node(tmp_path):
    code, report = _healthcheck(tmp_path, "--expect-gpus", "0", "--min-shm-gib", "0.001", "--shm-path",
                                str(tmp_path), "--checkpoint-dir", str(tmp_path / "ck"),
                                "--expect-torch", torch.__version__.split("+")[0])
    assert code == 0 and report["ok"] is True, report
    assert {check["name"] for check in report["checks"]} == {"gpu_count", "cuda_driver", "torch_version", "shm_size",
                                                            "checkpoint_dir_writable"}


def test_healthcheck_names_every_failed_check(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, report = _healthcheck(tmp_path, "--expect-gpus", "1", "--shm-path", str(tmp_path), "--min-shm-gib",
                                "1000000", "--checkpoint-dir", str(blocker / "ck"), "--expect-torch", "1.0.0")
    assert code == 1 and report["ok"] is False
    failed = {check["name"]: check["detail"] for check in report["checks"] if not check["ok"]}
    assert set(failed) == {"gpu_count", "cuda_driver", "torch_version", "shm_size", "checkpoint_dir_writable"}
    assert "expected 1 visible GPU(s), found 0" in failed["gpu_count"]
    assert "need >= 1000000.0 GiB" in failed["shm_size"]
    assert str(blocker / "ck") in failed["checkpoint_dir_writable"]
    assert "expected 1.0.0" in failed["torch_version"]


def test_healthcheck_reads_expected_torch_from_env(tmp_path):
    completed = subprocess.run([*HEALTHCHECK, "--shm-path", str(tmp_path), "--min-shm-gib", "0"], capture_output=True,
                               text=True, timeout=60, env=trainer_env(TRAINER_EXPECT_TORCH_VERSION="0.0.1"),
                               check=False)
    assert completed.returncode == 1
    assert json.loads(completed.stdout)["failed"] == ["torch_version"]
