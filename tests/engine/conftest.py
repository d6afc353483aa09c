"""The real Docker Engine for tests/engine: one daemon per session, the CPU stand-in base, and the training image
built from the committed images/trainer/Dockerfile with the stack's own build args.

Every test here is marked `engine` (make test leaves them to make engine-test). Where dockerd is not installed and
cannot be (not root), the session skips with one line saying so; in CI (CI=true) that is a failure instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components import image_spec
from components.training_pod import (
    PodShape,
    container_env,
    container_security_context,
    volume_mounts,
)
from tools import engine_base
from tools.engine import Engine, EngineError, install, leftovers, mounts_under

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = ROOT / "images" / "trainer"
REVISION = "0123456789abcdef0123456789abcdef01234567"
SOURCE = "https://example.invalid/gtp/platform"
TIMINGS: dict[str, float] = {}
POD_HOSTNAME = "engine-test-worker-0"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.engine)


CI_GOAL_S = 600
"""What the engine tests may add to CI (issue 27: under 10 minutes, the base cached within a run)."""
_SESSION_START: list[float] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION_START.append(time.monotonic())


def pytest_terminal_summary(terminalreporter) -> None:
    """Each phase's time and the whole run against the CI goal (the benchmark line CI prints)."""
    if TIMINGS and _SESSION_START:
        report_timings(terminalreporter, "engine", TIMINGS, time.monotonic() - _SESSION_START[0], CI_GOAL_S)


def report_timings(terminalreporter, what: str, timings: dict[str, float], total: float, goal_s: int) -> None:
    """`<what> timings`: each phase, then the whole run against the CI goal."""
    width = max(28, *(len(name) for name in timings))
    terminalreporter.section(f"{what} timings")
    for name, seconds in timings.items():
        terminalreporter.write_line(f"{name:{width}} {seconds:7.1f} s")
    terminalreporter.write_line(f"{what + ' tests in all':{width}} {total:7.1f} s = {total / goal_s:.2f} x the "
                                f"{goal_s // 60}-minute CI goal")


def timed(name: str):
    """Record how long a phase took (written to <engine root>/timings.json at the end of the session)."""
    class _Timer:
        def __enter__(self):
            self.started = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[name] = round(TIMINGS.get(name, 0.0) + time.monotonic() - self.started, 1)
    return _Timer()


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    try:
        install()
        started = Engine()
        with timed("engine start"):
            started.start()
    except EngineError as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Docker Engine must run in CI: {error}")
        pytest.skip(f"no Docker Engine here ({str(error).splitlines()[0]}); run `make engine-test` as root")
    yield started
    with timed("engine stop"):
        # Keep only the base between runs (GTP_ENGINE_ROOT is reused): images, planted variants and BuildKit's cache
        # of one run would fill the disk over a few runs (measured: 23 GB after a day's runs).
        with contextlib.suppress(EngineError):
            started.prune(keep={f"{engine_base.REPOSITORY}:{engine_base.base_key(engine_base.torch_closure())}"})
        started.stop()
    (started.root / "timings.json").write_text(json.dumps(TIMINGS, indent=1))
    left = leftovers(started.root)
    assert not left, f"processes left running after the engine stopped: {left}"
    assert not mounts_under(started.root), f"mounts left: {mounts_under(started.root)}"


@pytest.fixture(scope="session")
def base(engine: Engine) -> str:
    """The CPU stand-in base's tag (built once per engine root, then cached)."""
    with timed("base"):
        return engine_base.build(engine)


@dataclass
class Built:
    tag: str
    image_id: str
    args: dict[str, str]
    base: str
    context: Path = CONTEXT


def build_args(base: str, **overrides: str) -> dict[str, str]:
    """The stack's build args (components.image_spec.build_args) on the stand-in base."""
    args = image_spec.build_args(vcs_revision=REVISION, source_url=SOURCE, base_image=base, net_variant="default")
    args.update(overrides)
    return args


@pytest.fixture(scope="session")
def trainer_image(engine: Engine, base: str) -> Built:
    """images/trainer built for real from the committed Dockerfile; only BASE_IMAGE differs from a stack's build."""
    args = build_args(base)
    with timed("image build"):
        image_id = engine.build(CONTEXT, "gtp-trainer:engine-test", args)
    return Built("gtp-trainer:engine-test", image_id, args, base)


@pytest.fixture(scope="session")
def upstream_registry(engine: Engine):
    """One local registry the session's pushes share: the 5 GB base layer is pushed (and gzipped) once, later pushes
    of images on it find the blob there already."""
    return engine.registry("upstream")


def copy_context(destination: Path) -> Path:
    """A copy of the build context to plant a defect in (the committed one is never edited)."""
    shutil.copytree(CONTEXT, destination, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return destination


def pod_shape(mount_path: str = "/mnt/shared", num_gpus: int = 0) -> PodShape:
    """A training pod as the stacks build it (the fields docker run can reproduce matter; the rest is filler)."""
    return PodShape(image="unused", namespace="training", service_account="trainer", priority_class="training",
                    gpu_resource="nvidia.com/gpu", num_gpus=num_gpus, cpu="2", memory="4Gi",
                    ephemeral_storage="10Gi", shm_size="1Gi", node_selector={}, tolerations=[],
                    termination_grace_period_seconds=300, storage_volume={"emptyDir": {}}, mount_path=mount_path,
                    trainer_args=[])


def pod_run_flags(shape: PodShape, shared: Path | None = None) -> list[str]:
    """`docker run` flags for the pod spec's container: its securityContext, env, and volumes (emptyDirs as tmpfs,
    the shared volume as a bind mount of `shared`). The image's own USER decides the uid, as in the pod, where
    runAsUser only restates it."""
    security = container_security_context()
    # No network but loopback; the pod's hostname resolves to its own address as the kubelet's /etc/hosts makes
    # it (torchrun's workers reach the agent's store by hostname), here 127.0.0.1.
    flags = ["--network", "none", "--hostname", POD_HOSTNAME, "--add-host", f"{POD_HOSTNAME}:127.0.0.1",
             "--security-opt", "no-new-privileges"]
    if security.get("readOnlyRootFilesystem"):
        flags.append("--read-only")
    for capability in security.get("capabilities", {}).get("drop", []):
        flags += ["--cap-drop", capability]
    for item in container_env(shape):
        flags += ["--env", f"{item['name']}={item['value']}"]
    for mount in volume_mounts(shape):
        if mount["mountPath"] == shape.mount_path:
            if shared is not None:
                flags += ["--volume", f"{shared}:{mount['mountPath']}"]
        else:
            size = shape.shm_size if mount["name"] == "dshm" else "1g"
            flags += ["--tmpfs", f"{mount['mountPath']}:rw,nosuid,nodev,size={size.replace('Gi', 'g')}"]
    return flags

