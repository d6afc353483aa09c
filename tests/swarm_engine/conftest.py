"""The real multi-node Swarm of `make swarm-test` (issue 28): the trainer image built on the engine harness, three
dockerd nodes seeded with it (tools.swarm_harness), the test stack planned from edge-swarm and applied for real
(tools.swarm_apply). Marked `engine`: `make test` leaves it out; where it can't run (not root), it skips with one
line, and in CI (CI=true) that is a failure instead."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from cluster_targets.swarm import SWARM_NODE_GROUP_LABEL
from tests.engine.conftest import CONTEXT, build_args, report_timings
from tools import engine_base, swarm_apply, swarm_harness
from tools.engine import Engine, EngineError, install, leftovers
from verify import plan as plan_tool
from verify import simulate

IMAGE = "gtp-trainer:swarm-test"
TIMINGS: dict[str, float] = {}
_START: list[float] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.engine)


def pytest_sessionstart(session: pytest.Session) -> None:
    _START.append(time.monotonic())


def pytest_terminal_summary(terminalreporter) -> None:
    """Each phase's time (harness, image, training, each fault's recovery) and the whole run against the goal."""
    if TIMINGS and _START:
        report_timings(terminalreporter, "swarm", TIMINGS, time.monotonic() - _START[0], swarm_harness.CI_GOAL_S)


@pytest.fixture(scope="session")
def template() -> Path:
    """The engine root's data root, holding the trainer image built from the committed Dockerfile on the CPU
    stand-in base (cached there across runs); the engine is stopped again so the nodes can share its layers."""
    try:
        install()
        engine = Engine()
        if leftovers(engine.root):
            raise EngineError(f"a daemon already runs on {engine.root}: wait for it or run `python -m tools.engine "
                              "cleanup`")
        started = time.monotonic()
        engine.start()
    except EngineError as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Docker Engine must run in CI: {error}")
        pytest.skip(f"no Docker Engine here ({str(error).splitlines()[0]}); run `make swarm-test` as root")
    try:
        base = engine_base.build(engine)
        engine.build(CONTEXT, IMAGE, build_args(base))
    finally:
        engine.stop()
    TIMINGS["image build (engine harness)"] = round(time.monotonic() - started, 1)
    return engine.root / "data"


def plan_test_stack(tmp: Path, host_path: Path, *, misses: list[str] | None = None,
                    **changes: Any) -> list[dict[str, Any]]:
    """Plan the CPU test stack derived from edge-swarm (tools.swarm_harness.cpu_stack) with the real program
    under mocks, as `make plan` does; returns the planned resources. The plan must pass, unless `misses` is given:
    then the simulation's findings are put in it (a planted defect's plan is still written and applied)."""
    edge = yaml.safe_load(swarm_harness.EDGE_SWARM.read_text())
    stack_file = tmp / "Pulumi.swarm-test.yaml"
    stack_file.write_text(yaml.safe_dump(swarm_harness.cpu_stack(edge, host_path=str(host_path), **changes)))
    code = plan_tool.plan_one("swarm-test", stack_file=stack_file, out=tmp / "plan", quiet=True)
    if misses is None:
        assert code == 0
    else:
        report = json.loads((tmp / "plan" / "swarm-test" / "simulation.json").read_text())
        misses += simulate.findings(report)
    return swarm_apply.load_resources(tmp / "plan" / "swarm-test" / "resources.json")


def resolved_for(resources: list[dict[str, Any]]) -> dict[str, Any]:
    """What only a real `pulumi up` would know, supplied by the test: the image it built (the plan's image is the
    computed digest of its build) and no registry login (the nodes hold the image)."""
    resolved: dict[str, Any] = {}
    for resource in swarm_apply.planned(resources, swarm_apply.SERVICE_TYPE):
        resolved[f"{resource['name']}:taskSpec.containerSpec.image"] = IMAGE
        resolved[f"{resource['name']}:auth"] = None
    return resolved


@pytest.fixture(scope="session")
def swarm(template: Path) -> Iterator[swarm_harness.SwarmHarness]:
    """Three nodes with the image, labelled as docs/swarm.md tells a site; torn down and checked empty afterwards."""
    harness = swarm_harness.SwarmHarness(gpus_per_node=1, labels={SWARM_NODE_GROUP_LABEL: "gpu"})
    try:
        harness.start(seed_from=template)
        TIMINGS.update({f"harness: {name}": seconds for name, seconds in harness.timings.items()})
        yield harness
    finally:
        stopped = time.monotonic()
        left = harness.stop()
        TIMINGS["harness: teardown"] = round(time.monotonic() - stopped, 1)
    assert not left, f"the Swarm harness left {left}"
    print(f"\nswarm harness: teardown left nothing (no daemon, namespace, link or mount under {harness.root})")


def client_for(node: swarm_harness.Node) -> docker.APIClient:
    return docker.APIClient(base_url=node.url, version="1.41", timeout=60)
