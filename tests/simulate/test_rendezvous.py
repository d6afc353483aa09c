"""Rendezvous start-up (issue 26 finding 3): an elastic PyTorchJob's workers must wait for worker-0 as long as the
stack lets pods start apart, and its restart budget must expect restarts (verify/simulate/rendezvous.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stack_config.derived import duration_seconds, startup_bound_seconds
from tests.conftest import plan_modified, plan_stack
from verify import render as gtp_cluster
from verify.render import ClusterObject
from verify.simulate import rendezvous, simulate
from workload_kinds.pytorchjob import rendezvous_conf


def _job(conf: list[dict[str, str]] | None, backoff: int = 12, workers: int = 4) -> ClusterObject:
    policy: dict[str, Any] = {"minReplicas": 2, "maxReplicas": workers, "rdzvBackend": "c10d"}
    if conf is not None:
        policy["rdzvConf"] = conf
    return ClusterObject("stack", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                   "metadata": {"name": "gpt", "namespace": "training"},
                                   "spec": {"elasticPolicy": policy, "runPolicy": {"backoffLimit": backoff},
                                            "pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}})


def test_torchs_default_read_timeout_against_a_longer_start_up_is_a_finding() -> None:
    [result] = rendezvous.check([_job(None)], 600)
    assert (result.passed, result.total) == (1, 2)
    assert "wait 60 s for the rendezvous host gpt-worker-0" in result.findings[0].rule
    assert "read_timeout to at least 600" in result.findings[0].fix


def test_a_backoff_limit_below_one_restart_per_worker_is_a_finding() -> None:
    [result] = rendezvous.check([_job(rendezvous_conf(600), backoff=3)], 600)
    assert [f.rule.split(":")[0] for f in result.findings] == ["runPolicy.backoffLimit 3 with 4 worker(s)"]


def test_a_read_timeout_covering_the_bound_and_a_per_worker_budget_pass() -> None:
    [result] = rendezvous.check([_job(rendezvous_conf(600))], 600)
    assert (result.passed, result.total, result.findings) == (2, 2, [])
    assert rendezvous_conf(300) == [{"key": "read_timeout", "value": "300"}, {"key": "join_timeout", "value": "600"}]


def test_the_start_up_bound_is_kueues_pods_ready_timeout_or_the_gpu_gate() -> None:
    assert duration_seconds("1h30m") == 5400 and duration_seconds("45s") == 45
    assert startup_bound_seconds(plan_stack("prod").config) == duration_seconds(
        plan_stack("prod").config.kueue.wait_for_pods_ready_timeout)
    edge = plan_stack("edge").config  # no Kueue on an adopted cluster
    assert startup_bound_seconds(edge) == edge.gpu.readiness_timeout_seconds


def test_prods_elastic_job_waits_for_its_start_up_bound_with_a_per_worker_budget() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    job = next(o.obj for o in objects if o.kind == "PyTorchJob" and o.name == "gpt-pretrain")
    bound = startup_bound_seconds(plan.config)
    assert job["spec"]["elasticPolicy"]["rdzvConf"][0] == {"key": "read_timeout", "value": str(bound)}
    assert job["spec"]["runPolicy"]["backoffLimit"] == 3 * 4
    check = simulate(plan, objects)["checks"]["rendezvous start-up"]
    assert check["passed"] == check["total"] >= 3


def test_a_short_pods_ready_timeout_still_bounds_the_rendezvous(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "prod", lambda c: c["gtp:kueue"].update(waitForPodsReadyTimeout="5m"))
    job = next(r for r in plan.resources if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob")
    assert job.inputs["spec"]["elasticPolicy"]["rdzvConf"][0] == {"key": "read_timeout", "value": "300"}
