"""The Swarm checks of simulation.json (verify/simulate/swarm.py) on the edge-swarm plan, and one planted defect each
(the defects of issue 28: a head without dnsrr, a worker off the overlay, more GPUs than a server has, ...)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import plan_stack
from verify.simulate import swarm

HEAD, WORKER = "job-swarm-finetune-head", "job-swarm-finetune-worker"


def checked(plant: Callable[[dict[str, dict[str, Any]]], None] | None = None) -> dict[str, list[str]]:
    plan = copy.deepcopy(plan_stack("edge-swarm"))
    if plant is not None:
        plant({resource.name: resource.inputs for resource in plan.resources})
    return {result.name: [finding.line() for finding in result.findings] for result in swarm.check(plan)}


def test_the_edge_swarm_plan_passes_every_swarm_check() -> None:
    results = {result.name: (result.passed, result.total) for result in swarm.check(plan_stack("edge-swarm"))}
    assert results == {"swarm placement": (4, 4), "swarm gpus": (2, 2), "swarm one task per server": (2, 2),
                       "swarm rendezvous": (7, 7), "swarm restart": (4, 4)}


def test_a_head_in_vip_mode_is_no_finding() -> None:
    """The real Swarm formed the rendezvous with the head in `vip` mode (tests/swarm_engine): not a defect."""
    assert not any(checked(lambda i: i[HEAD]["endpointSpec"].update(mode="vip")).values())


def _task(inputs: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return inputs[name]["taskSpec"]


@pytest.mark.parametrize(("plant", "check", "expected"), [
    (lambda i: _task(i, HEAD)["containerSpec"]["commands"].__setitem__(
        2, _task(i, HEAD)["containerSpec"]["commands"][2].replace("is_host=true", "is_host=false")),
     "swarm rendezvous", "service swarm-finetune-head: head: hostname 'swarm-finetune-head', 'is_host=false': no task "
                         "would host the c10d store"),
    (lambda i: _task(i, WORKER)["containerSpec"]["commands"].__setitem__(
        2, _task(i, WORKER)["containerSpec"]["commands"][2].replace("is_host=false", "is_host=true")),
     "swarm rendezvous", "service swarm-finetune-worker: worker: 'is_host=true': a worker would host a second store"),
    (lambda i: _task(i, WORKER).update(networksAdvanceds=[{"name": "ingress"}]), "swarm rendezvous",
     "service swarm-finetune-worker: is on ['ingress'], not on the job's overlay ['swarm-finetune-net']"),
    (lambda i: _task(i, WORKER)["resources"]["reservation"]["genericResources"].update(
        discreteResourcesSpecs=["NVIDIA-GPU=8"]), "swarm gpus",
     "service swarm-finetune-worker: reserves ['NVIDIA-GPU=8'], but a 'gpu' server advertises 4 NVIDIA-GPU"),
    (lambda i: _task(i, HEAD)["placement"].update(constraints=["node.labels.gtp.dev/node-group==gpu",
                                                              "node.platform.arch==x86_64"]),
     "swarm placement", "service swarm-finetune-head: constraint 'node.labels.gtp.dev/node-group==gpu' needs a node "
                        "label sites are told to set"),
    (lambda i: _task(i, HEAD)["placement"].update(constraints=["node.labels.gtp.dev.node-group==gpu",
                                                              "node.platform.arch==aarch64"]),
     "swarm placement", "service swarm-finetune-head: constraint 'node.platform.arch==aarch64' but group 'gpu' is "
                        "amd64"),
    (lambda i: _task(i, WORKER)["placement"].pop("maxReplicas"), "swarm one task per server",
     "service swarm-finetune-worker: may run two tasks on one server"),
    (lambda i: _task(i, HEAD)["restartPolicy"].update(condition="none"), "swarm restart",
     "service swarm-finetune-head: restart policy"),
    (lambda i: _task(i, HEAD)["restartPolicy"].update(delay="11m"), "swarm rendezvous",
     "service swarm-finetune-head: restarts after 660 s, past the workers' 600 s join timeout"),
    (lambda i: _task(i, WORKER)["containerSpec"]["commands"].__setitem__(
        2, _task(i, WORKER)["containerSpec"]["commands"][2].replace("--max-restarts=10", "--max-restarts=1")),
     "swarm restart", "service swarm-finetune-worker: torchrun --max-restarts=1, but elastic.maxRestarts is 10"),
    (lambda i: _task(i, WORKER)["containerSpec"]["commands"].__setitem__(
        2, _task(i, WORKER)["containerSpec"]["commands"][2].replace("swarm-finetune-head:29400", "head:29400")),
     "swarm rendezvous", "service swarm-finetune-worker: --rdzv-endpoint=head:29400 names no head service"),
])
def test_a_planted_defect_is_a_finding(plant, check: str, expected: str) -> None:
    found = checked(plant)
    assert any(line.startswith(expected) for line in found[check]), found[check]
    assert all(not lines for name, lines in found.items() if name != check), found
