"""The simulation agrees with the real run on every check both make, per stack and per object (`make cluster-test`
writes build/plan/<stack>/cluster-run.json first; marker `cluster`). A disagreement names the stack, the check and
the object (tools/cluster_test/compare.py)."""

from __future__ import annotations

import json

import pytest

from tools.cluster_test.compare import coverage, disagreements
from tools.cluster_test.run import PLAN_DIR

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_simulation_agrees_with_the_real_run(stack):
    directory = PLAN_DIR / stack
    real_path = directory / "cluster-run.json"
    assert real_path.stat().st_mtime >= (directory / "cluster.yaml").stat().st_mtime, (
        f"{real_path} is older than cluster.yaml: run `python -m tools.cluster_test run {stack}`")
    simulation = json.loads((directory / "simulation.json").read_text())
    real = json.loads(real_path.read_text())
    assert disagreements(stack, simulation, real) == []
    compared = coverage(simulation, real)["compared"]
    # what every stack's real run covers (edge has no PodDisruptionBudget; dev's queued job is a ScaledJob)
    assert {"admitted", "priority classes", "scheduled"} <= set(compared)
    assert real["checks"]["scheduled"]["total"] >= 1
