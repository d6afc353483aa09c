"""The training image, built for real from the committed Dockerfile, and what it must show (issue 27 item 4).

Each check of tools/image_checks runs on the real image and on a copy of the context with one planted defect,
which it must catch. The planted builds reuse BuildKit's cache up to the planted line, so each costs seconds.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from components.training_pod import torchrun_args, trainer_args
from tests.engine.conftest import (
    SOURCE,
    Built,
    copy_context,
    pod_run_flags,
    pod_shape,
    timed,
)
from tools import engine_base, image_checks, image_size
from tools.engine import Engine, host_ca_bundle


def plant(tmp_path: Path, engine: Engine, built: Built, old: str, new: str, tag: str) -> str:
    """Build a copy of the context whose Dockerfile has `old` replaced by `new`; returns the image tag."""
    context = copy_context(tmp_path / "context")
    dockerfile = context / "Dockerfile"
    text = dockerfile.read_text()
    assert old in text, f"the Dockerfile no longer contains {old!r}: update the planted defect"
    dockerfile.write_text(text.replace(old, new, 1))
    engine.build(context, tag, built.args)
    return tag


# --- base contract -------------------------------------------------------------------------------------------


def test_the_stand_in_base_holds_the_contract(engine: Engine, base: str) -> None:
    assert engine_base.check_contract(engine, base) == []


def test_the_contract_check_fails_on_a_base_without_torchrun(engine: Engine, base: str, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN rm /usr/local/bin/torchrun\n")
    engine.build(tmp_path, "gtp-planted:no-torchrun", {})
    assert engine_base.check_contract(engine, "gtp-planted:no-torchrun") == ["not on PATH: torchrun"]


# --- uid, read-only root, the pod's mounts -------------------------------------------------------------------


def test_starts_as_uid_10001_read_only_with_the_pods_mounts(engine: Engine, trainer_image: Built) -> None:
    config = image_checks.inspect(engine, trainer_image.tag)["Config"]
    assert config["User"] == "10001:10001"
    assert image_checks.user_problems(engine, trainer_image.tag, pod_run_flags(pod_shape())) == []


def test_a_missing_user_line_is_caught(engine: Engine, trainer_image: Built, tmp_path: Path) -> None:
    tag = plant(tmp_path, engine, trainer_image, "USER 10001:10001\n", "", "gtp-planted:no-user")
    problems = image_checks.user_problems(engine, tag, pod_run_flags(pod_shape()))
    assert problems == ["runs as uid/gid 0/0, not 10001/10001 (the image's USER)"]


# --- health check --------------------------------------------------------------------------------------------


def _healthcheck(engine: Engine, image: str, *args: str):
    done = engine.docker("run", "--rm", *pod_run_flags(pod_shape()), "--entrypoint", "python", image,
                         "-m", "trainer.healthcheck", *args, check=False)
    return done.returncode, json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_healthcheck_passes_in_cpu_mode(engine: Engine, trainer_image: Built) -> None:
    code, report = _healthcheck(engine, trainer_image.tag, "--expect-gpus=0", "--min-shm-gib=0.9",
                                "--expect-torch=2.13.0")
    assert code == 0 and report["ok"], report


def test_healthcheck_fails_clearly_when_asked_for_a_gpu(engine: Engine, trainer_image: Built) -> None:
    code, report = _healthcheck(engine, trainer_image.tag, "--expect-gpus=1")
    assert code == 1 and not report["ok"]
    failed = {check["name"]: check["detail"] for check in report["checks"] if not check["ok"]}
    assert failed["gpu_count"] == "expected 1 visible GPU(s), found 0"


# --- torchrun, checkpoint, resume ----------------------------------------------------------------------------


def _run_training(engine: Engine, image: str, shared: Path, max_steps: int):
    shape = pod_shape()
    checkpoints = f"{shape.mount_path}/checkpoints/engine-test"
    args = trainer_args(model="cnn", max_steps=max_steps, batch_size=8, checkpoint_dir=checkpoints,
                        checkpoint_every=2, metrics=False, extra=["--num-samples=256", "--log-every=1"])
    # The image's ENTRYPOINT (torchrun) with the pod's arguments; --standalone: one pod, no operator.
    return engine.docker("run", "--rm", *pod_run_flags(shape, shared), image,
                         *torchrun_args(2, args, standalone=True), check=False, timeout=600)


def _train(engine: Engine, image: str, shared: Path, max_steps: int) -> list[dict]:
    done = _run_training(engine, image, shared, max_steps)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]


def test_torchrun_trains_checkpoints_and_resumes(engine: Engine, trainer_image: Built, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 10001, 10001)  # the EFS access point / FSx setup Job owns it for uid 10001 in a cluster
    with timed("torchrun runs"):
        first = _train(engine, trainer_image.tag, shared, max_steps=4)
        second = _train(engine, trainer_image.tag, shared, max_steps=6)
    done = [record for record in first if record.get("event") == "done"]
    assert done and done[-1]["step"] == 4 and done[-1]["world_size"] == 2, first[-3:]
    step_dirs = sorted(p.name for p in (shared / "checkpoints" / "engine-test").iterdir())
    assert "step-4" in step_dirs
    resumed = [record for record in second if record.get("event") == "resumed"]
    assert resumed and resumed[0]["step"] == 4, second[:5]
    assert [record for record in second if record.get("event") == "done"][-1]["step"] == 6


def test_an_image_without_a_package_the_trainer_needs_fails_the_run(engine: Engine, trainer_image: Built,
                                                                     tmp_path: Path) -> None:
    """The defect the first real run found (the image relied on its base for numpy), planted back: training fails."""
    tag = plant(tmp_path, engine, trainer_image, "WORKDIR /workspace\n",
                "RUN python -m pip uninstall --yes --break-system-packages numpy\nWORKDIR /workspace\n",
                "gtp-planted:no-numpy")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 10001, 10001)
    done = _run_training(engine, tag, shared, max_steps=2)
    assert done.returncode != 0
    assert "No module named 'numpy'" in done.stderr.decode(errors="replace")


# --- labels --------------------------------------------------------------------------------------------------


def test_oci_labels_match_the_build_args(engine: Engine, trainer_image: Built) -> None:
    assert image_checks.label_problems(engine, trainer_image.tag, trainer_image.args) == []
    labels = image_checks.inspect(engine, trainer_image.tag)["Config"]["Labels"]
    assert labels["org.opencontainers.image.source"] == SOURCE


def test_a_missing_label_is_caught(engine: Engine, trainer_image: Built, tmp_path: Path) -> None:
    tag = plant(tmp_path, engine, trainer_image, '      org.opencontainers.image.revision="${VCS_REVISION}" \\\n', "",
                "gtp-planted:no-revision")
    assert image_checks.label_problems(engine, tag, trainer_image.args) == [
        "label org.opencontainers.image.revision is missing"]


# --- size ----------------------------------------------------------------------------------------------------


def test_what_the_image_adds_fits_the_budget(engine: Engine, trainer_image: Built) -> None:
    added = image_checks.added_bytes(engine, trainer_image.tag, trainer_image.base)
    print(f"\nimage adds {added / 1e6:.1f} MB over its base (budget {image_size.BUDGET_MB} MB)")
    assert added > 0
    assert image_checks.size_problems(engine, trainer_image.tag, trainer_image.base, image_size.BUDGET_MB) == []


def test_a_planted_blob_over_the_budget_is_caught(engine: Engine, trainer_image: Built, tmp_path: Path) -> None:
    tag = plant(tmp_path, engine, trainer_image, "WORKDIR /workspace\n",
                "WORKDIR /workspace\nRUN head -c 320000000 /dev/urandom > /workspace/blob\n", "gtp-planted:blob")
    problems = image_checks.size_problems(engine, tag, trainer_image.base, image_size.BUDGET_MB)
    assert len(problems) == 1, problems
    match = re.fullmatch(r"the image adds (\d+\.\d) MB over its base, over the 300 MB budget", problems[0])
    assert match and float(match[1]) > 320, problems


# --- no secret, no CA bundle ---------------------------------------------------------------------------------


def _secrets(engine: Engine, base: str) -> dict[str, bytes]:
    bundle = host_ca_bundle()
    assert bundle, "the engine tests pass the host's CA bundle as the build secret; none found"
    known = engine.docker("run", "--rm", "--network", "none", "--entrypoint", "cat", base,
                          "/etc/ssl/certs/ca-certificates.crt").stdout
    secrets = image_checks.distinctive_certificates(bundle, known)
    assert secrets, "the host's bundle has no certificate the base lacks: nothing distinctive to look for"
    return secrets


def test_history_and_layers_hold_no_secret(engine: Engine, trainer_image: Built) -> None:
    secrets = _secrets(engine, trainer_image.base)
    assert image_checks.leak_problems(engine, trainer_image.tag, trainer_image.base, secrets) == []


def test_a_ca_bundle_copied_into_a_layer_is_caught(engine: Engine, trainer_image: Built, tmp_path: Path) -> None:
    bundle = host_ca_bundle()
    context = copy_context(tmp_path / "context")
    (context / "proxy-ca.pem").write_bytes(bundle.read_bytes())
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(
        "WORKDIR /workspace\n", "WORKDIR /workspace\nCOPY --from=builder /src/proxy-ca.pem /workspace/ca.pem\n", 1))
    engine.build(context, "gtp-planted:ca-in-layer", trainer_image.args)
    problems = image_checks.leak_problems(engine, "gtp-planted:ca-in-layer", trainer_image.base,
                                          _secrets(engine, trainer_image.base))
    assert problems and all(problem.endswith("is in a layer: /workspace/ca.pem") for problem in problems), problems
