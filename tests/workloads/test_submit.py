"""`tools.submit` against what the deployed stack runs: kinds, operators, CRDs and Kueue integrations it lacks are
refused; sizes default from the target node group; the documented example runs as documented (issue 44 item 1)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.kueue import QUEUE_LABEL
from conventions.names import SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from tests.conftest import ROOT, plan_stack
from tools import submit as gtp_submit

DOC = ROOT / "docs" / "workloads.md"
TEAM_IMAGE = "registry.example.com/team/train@sha256:" + "1" * 64


def documented(stack: str) -> tuple[list[str], str, dict[str, Any]]:
    """The doc's submit example for `stack`: the command's arguments, the workload file's text, and what the doc
    says to add to the stack file first (`{}`: nothing). Blocks follow a `<!-- submit-example: <stack> <what> -->`
    marker."""
    text = DOC.read_text()
    blocks: dict[str, str] = {}
    for what, body in re.findall(rf"<!-- submit-example: {stack} (\S+) -->\n```\w*\n(.*?)```", text, re.S):
        blocks[what] = body
    assert {"workload", "command"} <= set(blocks), f"{DOC} has no submit example for {stack}: {sorted(blocks)}"
    (line,) = [line for line in blocks["command"].splitlines() if "tools.submit" in line]
    words = shlex.split(line.split("|")[0])
    assert words[:3] == ["python", "-m", "tools.submit"], words
    return words[3:], blocks["workload"], yaml.safe_load(blocks.get("stack", "")) or {}


def run_documented(stack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    argv, workload, stack_addition = documented(stack)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text(workload)
    if stack_addition:  # a step the doc asks for on this stack (e.g. a signed digest), before submitting
        document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
        for key, value in stack_addition.items():
            section = document["config"].setdefault(key, {})
            for inner, item in value.items():
                section[inner] = [*section.get(inner, []), *item] if isinstance(item, list) else item
        stacks = tmp_path / "stacks"
        stacks.mkdir()
        (stacks / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        monkeypatch.setattr(gtp_submit, "STACKS", stacks)
    code = gtp_submit.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- 1. what the deployed stack lacks is refused, nothing printed -------------------------------------------------
@pytest.mark.program
def test_a_kind_whose_operator_crd_and_kueue_integration_the_stack_lacks_exits_2_naming_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    # Before: dev printed a TrainJob (and its runtime) and exited 0, though dev runs no Trainer: `kubectl create`
    # then failed on a kind the API server doesn't serve.
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"ft": {"kind": "trainjob", "nodeGroup": "g6", "gpuResource": "shared",
                                          "gpusPerNode": 1, "cpu": "900m", "memory": "3Gi", "shmSize": "1Gi",
                                          "image": TEAM_IMAGE, "command": ["-m", "team.train"]}}))
    assert gtp_submit.main(["--stack", "dev", "--workload", str(job)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    fix = ("; add a trainjob workload to the stack's workloads or 'trainjob' to kueue.submitKinds (pulumi up), or "
           "submit kind pytorchjob, which dev runs")
    assert problems == [
        "  - stack 'dev' installs no trainer (kubeflow-trainer-v2.3.0.yaml), which kind 'trainjob' needs" + fix,
        "  - stack 'dev' serves no ClusterTrainingRuntime: its ClusterTrainingRuntime CRD "
        "(clustertrainingruntimes.trainer.kubeflow.org) is absent" + fix,
        "  - stack 'dev' serves no TrainJob: its TrainJob CRD (trainjobs.trainer.kubeflow.org) is absent" + fix,
        "  - stack 'dev' serves no TrainingRuntime: its TrainingRuntime CRD (trainingruntimes.trainer.kubeflow.org) "
        "is absent" + fix,
        "  - stack 'dev' has a Kueue that admits no trainer.kubeflow.org/trainjob (enabled: batch/job, "
        "kubeflow.org/pytorchjob)" + fix,
    ], err
    assert err.startswith("submit: stack 'dev' as deployed can't run kind 'trainjob': 5 problem(s):\n"), err


@pytest.mark.program
def test_a_pytorchjob_on_dev_as_deployed_before_submit_kinds_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    # The case of the issue: dev without `kueue.submitKinds` (as it was deployed) runs no training-operator.
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"].get("gtp:kueue", {}).pop("submitKinds", None)
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    monkeypatch.setattr(gtp_submit, "STACKS", stacks)
    entry = {"lr-sweep-3": {"kind": "pytorchjob", "nodeGroup": "g6", "image": TEAM_IMAGE,
                            "command": ["-m", "team.train", "--lr", "3e-4"]}}
    with pytest.raises(gtp_submit.SubmitError, match=r"stack 'dev' installs no training-operator \(training-operator"
                                                      r"-v1\.9\.4\.yaml\), which kind 'pytorchjob' needs; add a "
                                                      r"pytorchjob workload to the stack's workloads or 'pytorchjob' "
                                                      r"to kueue\.submitKinds \(pulumi up\), or run it elsewhere: "
                                                      r"dev runs no kind a submit can use\n"):
        gtp_submit.render("dev", entry)


# --- 2. sizes default from the target group -------------------------------------------------------------------------
def test_defaults_are_a_share_of_the_groups_node_within_its_allocatable() -> None:
    from stack_config.derived import submit_defaults

    dev = plan_stack("dev").config
    # g6.xlarge: 3920m / 14162Mi allocatable, less the GPU node DaemonSets' 500m / 1Gi, split over 4 MPS slices.
    assert submit_defaults(dev, {"nodeGroup": "g6"}) == {
        "gpuResource": "shared", "gpusPerNode": 1, "cpu": "855m", "memory": "3284Mi", "shmSize": "821Mi"}
    # a multi-rank job can't share a GPU (NCCL): whole GPUs, and the config rules then say the group shares them
    assert "gpuResource" not in submit_defaults(dev, {"nodeGroup": "g6", "numNodes": 2})
    prod = plan_stack("prod").config
    whole = submit_defaults(prod, {"nodeGroup": "a100"})
    assert "gpuResource" not in whole and "gpusPerNode" not in whole  # the whole node's 8 GPUs
    half = submit_defaults(prod, {"nodeGroup": "a100", "gpusPerNode": 4})
    assert int(half["cpu"].removesuffix("m")) * 2 <= int(whole["cpu"].removesuffix("m"))
    # what the entry sets is kept
    assert submit_defaults(dev, {"nodeGroup": "g6", "cpu": "1"}).get("cpu") is None


# --- the documented example, verbatim, on dev and prod --------------------------------------------------------------
@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_documented_submit_example_runs_as_documented(stack: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_documented(stack, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    documents = list(yaml.safe_load_all(out))
    (job,) = [d for d in documents if d["kind"] == "PyTorchJob"]
    assert sorted(d["kind"] for d in documents) == ["NetworkPolicy", "PyTorchJob"]
    assert job["metadata"]["labels"][QUEUE_LABEL] == "training"
    (spec,) = job["spec"]["pytorchReplicaSpecs"].values()
    (container,) = spec["template"]["spec"]["containers"]
    _, workload, _ = documented(stack)
    assert container["image"] == next(iter(yaml.safe_load(workload).values()))["image"]
    limits = container["resources"]["limits"]
    assert (SHARED_GPU_RESOURCE if stack == "dev" else WHOLE_GPU_RESOURCE) in limits
    assert "derived from node group" in err  # the user sees what was chosen for them


# --- 3. the signed-image rule, enforced by the cluster ---------------------------------------------------------------
def test_prod_creates_a_protected_image_admission_policy_for_its_training_namespace() -> None:
    plan = plan_stack("prod")
    kinds = {obj["kind"]: obj for obj in plan.kubernetes_objects()}
    policy, binding = kinds["ValidatingAdmissionPolicy"], kinds["ValidatingAdmissionPolicyBinding"]
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"][0] == "pods" and set(rule["operations"]) == {"CREATE", "UPDATE"}
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "training-prod"}}
    assert policy["spec"]["failurePolicy"] == "Fail"
    for resource in plan.resources:
        if resource.type.endswith(("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")):
            assert resource.options.get("protect") is True, resource.name
    assert not any(obj["kind"] == "ValidatingAdmissionPolicy" for obj in plan_stack("dev").kubernetes_objects())


def test_submit_kinds_are_kinds_kueue_admits_on_a_stack_with_kueue() -> None:
    from tests.test_config import BASE, problems_of, with_

    assert problems_of(with_(BASE, "kueue.submitKinds", ["elasticjob"])) == [
        "kueue.submitKinds[0]: 'elasticjob' is not a kind Kueue admits; use pytorchjob or trainjob"]
    assert problems_of(with_(with_(BASE, "kueue.submitKinds", ["trainjob"]), "kueue.enabled", False)) == [
        "kueue.submitKinds: set, but Kueue is off (kueue.enabled): only Kueue admits a submitted job; remove it or "
        "turn Kueue on"]
