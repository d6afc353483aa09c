"""The simulation's checks are one registry (`verify.simulate.CHECKS`) over one `World`: every module with a `check`
is in it, and a new check is a module and one line there."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import verify.simulate
from tests.conftest import plan_stack
from verify import render as cluster
from verify import simulate
from verify.simulate.model import CheckResult, Finding


def test_every_module_with_a_check_is_registered() -> None:
    with_check = {info.name for info in pkgutil.iter_modules(verify.simulate.__path__)
                  if callable(getattr(importlib.import_module(f"verify.simulate.{info.name}"), "check", None))}
    registered = [check.module for check in simulate.CHECKS]
    assert sorted(registered) == sorted(set(registered)), "a module registered twice"
    assert with_check == set(registered)


def test_a_new_check_is_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A throwaway check that counts the world's pods, added as one SimulationCheck: it runs over the same world,
    its result lands in simulation.json, and a finding fails the report."""
    def pods_named(world: simulate.World) -> list[CheckResult]:
        result = CheckResult("pods counted")
        for pod in world.pods:
            result.record(bool(pod.pod["metadata"].get("name") or pod.owner), Finding(pod.owner, "unnamed", "name it"))
        result.findings.append(Finding("the throwaway check", "always finds this", "nothing"))
        return [result]

    monkeypatch.setattr(simulate, "CHECKS", (*simulate.CHECKS, simulate.SimulationCheck("throwaway", pods_named)))
    plan = plan_stack("dev")
    report = simulate.simulate(plan, cluster.render_cluster(plan))
    counted = report["checks"]["pods counted"]
    assert counted["total"] == len(simulate.build_world(plan, cluster.render_cluster(plan)).pods) > 0
    assert not report["ok"]
