"""Day two's comparison and the harness's image swap (tools/cluster_test/day_two.py, compare.py), on synthetic runs:
what the real run must show against what each kind declares. The real run itself is `make cluster-test`."""

from __future__ import annotations

import pytest

from tools.cluster_test import day_two
from tools.cluster_test.compare import day_two_disagreements
from workload_kinds import KINDS


def _run(declared: str, observed: str) -> dict:
    return {"day_two": {"new image": {"PyTorchJob training-prod/p": {"declared": declared, "observed": observed}}}}


@pytest.mark.parametrize(("declared", "observed", "disagrees"), [
    ("restart", "requeued", False),
    ("restart", "kept running", True),  # what a runtime-only image change did to a TrainJob before
    ("keeps running", "kept running", False),
    ("keeps running", "requeued", True),
    ("restart", "refused: TrainJob t: spec.trainer: field is immutable", True),
    ("unknown", "requeued", False),  # nothing declared: recorded, not held
])
def test_a_declaration_the_real_run_contradicts_is_a_disagreement(declared, observed, disagrees):
    found = day_two_disagreements("prod", _run(declared, observed))
    assert bool(found) is disagrees
    if disagrees:
        assert found == [f"prod: day two, new image: PyTorchJob training-prod/p: its kind declares {declared!r} (what "
                         f"plan-diff says); the real run: {observed}"]


def test_the_new_image_reaches_every_container_a_kind_names_and_nothing_else():
    template = {"spec": {"containers": [{"name": "pytorch", "image": "old"}, {"name": "side", "image": "other"}],
                         "initContainers": [{"name": "init", "image": "old"}]}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"template": template}}}}
    changed = day_two.with_new_image(job, {"old"})
    containers = changed["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert [c["image"] for c in containers["containers"]] == [day_two.NEW_IMAGE, "other"]
    assert containers["initContainers"][0]["image"] == day_two.NEW_IMAGE
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"] == "old"
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
                "spec": {"trainer": {"image": "old", "numNodes": 2}}}
    assert day_two.with_new_image(trainjob, {"old"})["spec"]["trainer"]["image"] == day_two.NEW_IMAGE
    assert day_two.with_new_image(trainjob, {"unrelated"}) is None


def test_each_kind_declares_what_a_new_image_does():
    """Every Kubernetes kind whose jobs Kueue admits says what a changed template does to a running one (plan-diff
    and the real run read it); no kind is silently harmless."""
    from workload_kinds import KubernetesWorkloadKind

    for kind in KINDS.values():
        if isinstance(kind, KubernetesWorkloadKind) and kind.kueue_integration is not None:
            assert kind.template_update is not None, kind.name
            assert day_two.declared(kind) in ("restart", "keeps running")


def immutable_paths(schema: dict, path: str = "") -> list[str]:
    """Every object property path of a CRD schema whose value the API server refuses to change (a `self ==
    oldSelf` rule), through nested objects (not lists)."""
    found = []
    for name, child in (schema.get("properties") or {}).items():
        here = f"{path}.{name}" if path else name
        if any(rule.get("rule", "").replace(" ", "") == "self==oldSelf"
               for rule in child.get("x-kubernetes-validations") or []):
            found.append(here)
        elif child.get("type") == "object":
            found += immutable_paths(child, here)
    return found


def _set(body: dict, path: str) -> bool:
    node = body
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_every_immutable_field_a_stack_sets_on_a_job_is_replaced_on_change(stack):
    """Issue 42/41 class: a job field its CRD makes immutable, changed by a later `up`, is refused by the API server
    (the TrainJob's whole `spec.trainer`, image included, in Trainer v2.3.0) and fails the update; the kind must
    replace the job on it instead. Read from the CRDs each stack installs."""
    from tests.conftest import plan_stack
    from verify import render
    from verify.validate import installed_crds
    from workload_kinds import kind_of_resource

    objects = render.render_cluster(plan_stack(stack))
    crds = installed_crds(objects)
    checked = 0
    for item in objects:
        kind = kind_of_resource(item.obj)
        installed = crds.get((item.obj.get("apiVersion"), item.kind))
        if kind is None or item.kind != kind.resource_kind or installed is None:
            continue
        checked += 1
        for path in immutable_paths(installed.schema):
            if _set(item.obj, path):
                assert any(path == p or path.startswith(p + ".") for p in kind.immutable_paths), (
                    f"{item.describe()} sets {path}, which its CRD makes immutable; add it to "
                    f"{type(kind).__name__}.immutable_paths")
    assert checked or stack == "edge"  # edge's ElasticJob is DLRover's: its CRD has no such rule to find


def test_the_scan_finds_trainjobs_immutable_trainer_block():
    schema = {"properties": {"spec": {"type": "object", "properties": {
        "trainer": {"type": "object", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
        "suspend": {"type": "boolean"},
        "nested": {"type": "object", "properties": {"id": {"type": "string",
                                                          "x-kubernetes-validations": [{"rule": "self==oldSelf"}]}}},
    }}}}
    assert immutable_paths(schema) == ["spec.trainer", "spec.nested.id"]


def test_one_pod_fewer_shrinks_the_largest_role_and_leaves_single_pods_alone():
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {}},
                                            "Worker": {"replicas": 4, "template": {}}}}}
    changed = day_two.with_one_pod_fewer(job)
    assert changed is not None and job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4  # a copy
    assert {role: spec["replicas"] for role, spec in changed["spec"]["pytorchReplicaSpecs"].items()} == {
        "Master": 1, "Worker": 3}
    single = {**job, "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {}}}}}
    assert day_two.with_one_pod_fewer(single) is None
    assert day_two.with_one_pod_fewer({"kind": "ConfigMap"}) is None


def test_an_image_policy_that_lets_an_unlisted_image_in_is_a_disagreement():
    from tools.cluster_test.compare import image_policy_disagreements

    refused = "refused: admission webhook ... ValidatingAdmissionPolicy 'p' with binding 'p' denied request: no"
    assert image_policy_disagreements("prod", {"image_policy": {"ValidatingAdmissionPolicy p": refused}}) == []
    assert image_policy_disagreements("prod", {"image_policy": {"ValidatingAdmissionPolicy p": "accepted"}})
    assert image_policy_disagreements("prod", {"image_policy": {"ValidatingAdmissionPolicy p": "refused: quota"}})
    assert image_policy_disagreements("dev", {}) == []
