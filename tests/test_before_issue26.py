"""Issue 26 findings 1-5: edge, dev and prod as the plan produced them before the fixes (tests/fixtures/before-issue26:
their cluster.yaml without CRDs, resources.json and stack file) fail the simulation, each finding named by its class."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from verify import plan as gtp_plan
from verify import render as gtp_cluster
from verify.plan_record import Plan, Resource
from verify.simulate import findings, simulate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "before-issue26"


def simulated_before(stack: str) -> dict[str, Any]:
    directory = FIXTURES / stack
    objects = gtp_cluster.load(gzip.decompress((directory / "cluster.yaml.gz").read_bytes()).decode())
    recorded = json.loads(gzip.decompress((directory / "resources.json.gz").read_bytes()))
    # The stack file of that day, parsed by today's code (defaults that did not exist then change no object here).
    config = gtp_plan.run(stack, stack_file=directory / f"Pulumi.{stack}.yaml").config
    resources = [Resource(urn=r["urn"], type=r["type"], name=r["name"], custom=r["custom"], parent=r["parent"],
                          provider=r["provider"], depends_on=r["dependsOn"], options=r["options"], inputs=r["inputs"])
                 for r in recorded["resources"]]
    return simulate(Plan(project=recorded["project"], stack=stack, resources=resources, config=config), objects)


def _lines(report: dict[str, Any], check: str) -> list[str]:
    return [line for line in findings(report) if line.startswith(f"{check}: ")]


def test_edge_before_the_fixes_runs_its_gpu_agents_and_workers_without_the_nvidia_runtime() -> None:
    report = simulated_before("edge")
    assert not report["ok"]
    runtime = _lines(report, "runtime handlers")
    assert len(runtime) == 3 and all("the node's default runtime 'runc'" in line for line in runtime)
    assert any("DaemonSet nvidia-device-plugin/nvidia-device-plugin on node group orin" in line for line in runtime)


def test_edge_before_the_fixes_runs_dlrovers_amd64_images_on_its_arm64_nodes() -> None:
    platforms = _lines(simulated_before("edge"), "image platforms")
    assert len(platforms) == 2
    assert any("dlrover-master on node group orin (arm64)" in line and "intell-ai/dlrover:master carries linux/amd64"
               in line for line in platforms)
    assert any("easydl/elasticjob-controller:master carries linux/amd64" in line for line in platforms)


def test_dev_before_the_fixes_hides_the_mps_shm_and_kueue_can_block_every_pod() -> None:
    report = simulated_before("dev")
    mounts = _lines(report, "device mounts")
    assert mounts and all("volume 'dshm' at /dev/shm hides /dev/shm" in line for line in mounts)
    hooks = _lines(report, "admission webhooks")
    assert any("webhook mpod.kb.io" in line and "runs 1 replica" in line for line in hooks)
    assert any("Pod of DaemonSet nvidia-device-plugin/nvidia-device-plugin " in line and "does not wait for" in line
               for line in hooks)


def test_prod_before_the_fixes_lets_the_elastic_job_die_on_a_cold_start() -> None:
    report = simulated_before("prod")
    rendezvous = _lines(report, "rendezvous start-up")
    assert any("PyTorchJob training-prod/gpt-pretrain" in line and "wait 60 s for the rendezvous host "
               "gpt-pretrain-worker-0" in line for line in rendezvous)
    assert any("runPolicy.backoffLimit 3 with 4 worker(s)" in line for line in rendezvous)
    assert any("webhook vpod.kb.io" in line for line in _lines(report, "admission webhooks"))


@pytest.mark.parametrize("stack", ["edge", "dev", "prod"])
def test_the_same_stacks_today_simulate_clean(stack: str) -> None:
    from tests.conftest import plan_stack

    plan = plan_stack(stack)
    report = simulate(plan, gtp_cluster.render_cluster(plan))
    assert report["ok"], findings(report)


def test_dev_before_the_fixes_counted_its_daemonsets_capacity_in_kueues_quota() -> None:
    queued = _lines(simulated_before("dev"), "queued")
    assert any("ClusterQueue gtp-dev flavor gtp-g6: cpu nominalQuota 7840m, but node group g6 leaves training "
               "7080m" in line and "its DaemonSets take 380m per node" in line for line in queued), queued
