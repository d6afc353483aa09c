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


def test_day_two_a_new_image_does_to_each_running_job_what_its_kind_declares():
    """Day two on the real control plane: prod's two gangs, one per Kueue-admitted kind, each really stopped and
    admitted again after a new image (tools/cluster_test/day_two.py), as `template_update` (plan-diff) says."""
    from tools.cluster_test.compare import day_two_disagreements

    real = json.loads((PLAN_DIR / "prod" / "cluster-run.json").read_text())
    jobs = real["day_two"]["new image"]
    assert set(jobs) == {"PyTorchJob training-prod/gpt-pretrain", "TrainJob training-prod/gpt-finetune"}
    assert {entry["observed"] for entry in jobs.values()} == {"requeued"}
    assert all(entry["admitted_again_after_s"] is not None for entry in jobs.values())
    assert day_two_disagreements("prod", real) == []


def test_day_two_one_pod_fewer_requeues_prods_running_pytorchjob():
    """A replica change of a running admitted PyTorchJob: Kueue compares pod counts (kueue v0.19.2
    pkg/util/equality/podset.go:55-57), so it stops and requeues the job, as plan-diff says ("pod count")."""
    real = json.loads((PLAN_DIR / "prod" / "cluster-run.json").read_text())
    jobs = real["day_two"]["pod count"]
    assert set(jobs) == {"PyTorchJob training-prod/gpt-pretrain"}
    assert [entry["observed"] for entry in jobs.values()] == ["requeued"]


def test_prods_image_policy_refuses_a_pod_of_an_unlisted_image_on_the_real_api_server():
    """The production image rule is enforced in the cluster (components/image_admission_policy.py), not only by
    `tools.submit`: the real kube-apiserver compiled its CEL and refused a training pod of an unlisted image."""
    from tools.cluster_test.compare import image_policy_disagreements

    real = json.loads((PLAN_DIR / "prod" / "cluster-run.json").read_text())
    [(policy, answer)] = real["image_policy"].items()
    assert policy.startswith("ValidatingAdmissionPolicy ") and answer.startswith("refused: "), answer
    assert "ValidatingAdmissionPolicy" in answer and "denied request" in answer, answer
    assert image_policy_disagreements("prod", real) == []
    assert image_policy_disagreements("prod", {"image_policy": {policy: "accepted"}})  # a policy that let it in
