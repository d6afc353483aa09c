"""Issue 13: the whole rendered cluster (verify/render.py) and its validation (verify/validate.py) against the
CRDs that the same cluster installs."""

from __future__ import annotations

import copy
import functools
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, plan_stack
from verify import render as cluster
from verify.plan_record import COMPUTED
from verify.render import ClusterObject, exists_after_up, render_cluster, render_operator, render_releases
from verify.validate import Report, validate_objects

KUBERNETES_STACKS = ["dev", "edge", "prod"]


@functools.cache
def rendered(stack: str) -> tuple[ClusterObject, ...]:
    return tuple(render_cluster(plan_stack(stack)))


def one(objects: Any, kind: str) -> ClusterObject:
    found = [item for item in objects if item.kind == kind]
    assert len(found) == 1, [item.describe() for item in found]
    return found[0]


def errors_of(objects: Any, version: str = "1.34") -> list[str]:
    report = Report()
    validate_objects(list(objects), version, report)
    return report.errors


# --- rendering ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", KUBERNETES_STACKS)
@pytest.mark.program
def test_cluster_render_is_deterministic(stack: str) -> None:
    first = cluster.dump(render_cluster(plan_stack(stack)))
    second = cluster.dump(render_cluster(plan_stack(stack)))
    assert first == second and first
    assert cluster.dump(cluster.load(first)) == first  # cluster.yaml reads back to the same objects and sources


@pytest.mark.parametrize("stack", KUBERNETES_STACKS)
def test_every_helm_release_and_operator_appears_with_its_source(stack: str) -> None:
    plan = plan_stack(stack)
    sources = {item.source for item in rendered(stack)}
    releases = plan.by_type(cluster.HELM_RELEASE)
    assert releases
    for release in releases:
        inputs = release.inputs
        assert f"chart {inputs['chart']} release {inputs['namespace']}/{inputs['name']}" in sources, inputs["name"]
    for config_file in plan.by_type(cluster.CONFIG_FILE):
        assert f"operator {config_file.inputs['file']}" in sources
    assert "stack" in sources
    assert len([item for item in rendered(stack) if item.source == "stack"]) == len(plan.kubernetes_objects())


HOOK_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: hooks\nversion: 0.1.0\n",
    "templates/objects.yaml": """
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: plain}
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRole
        metadata: {name: cluster-wide}
        rules: []
        ---
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: prune
          annotations: {"helm.sh/hook": post-delete,
                        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}
        spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: installed-by-hook
          annotations: {"helm.sh/hook": "post-install, post-upgrade"}
        """,
}


def write_chart(root: Path) -> None:
    for name, text in HOOK_CHART.items():
        path = root / "chart" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_chart_objects_get_the_release_namespace_and_hooks_that_never_outlive_up_are_left_out(tmp_path: Path) -> None:
    write_chart(tmp_path)
    release = {"name": "r", "chart": "chart", "namespace": "team", "createNamespace": True, "values": {}}
    objects = render_releases([release], "1.34", root=tmp_path)
    source = "chart chart release team/r"
    assert [(item.kind, item.namespace, item.name, item.source) for item in objects] == [
        ("Namespace", None, "team", source),
        ("ConfigMap", "team", "plain", source),
        ("ClusterRole", None, "cluster-wide", source),  # cluster-scoped: no namespace added
        ("ConfigMap", "team", "installed-by-hook", source),  # a post-install hook stays after `up`
    ]  # the post-delete Job is not there: it only runs on `pulumi destroy`


def test_operator_objects_without_a_namespace_get_default(tmp_path: Path) -> None:
    (tmp_path / "op.yaml").write_text("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n"
                                      "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b, namespace: ops}\n")
    assert [(item.namespace, item.source) for item in render_operator("op.yaml", root=tmp_path)] == [
        ("default", "operator op.yaml"), ("ops", "operator op.yaml")]


def hook(events: str, policy: str | None = None, kind: str = "Job") -> dict[str, Any]:
    annotations = {"helm.sh/hook": events, **({"helm.sh/hook-delete-policy": policy} if policy else {})}
    return {"kind": kind, "metadata": {"name": "h", "annotations": annotations}}


@pytest.mark.parametrize(("obj", "exists"), [
    ({"kind": "Job", "metadata": {"name": "plain", "annotations": {"other": "x"}}}, True),
    (hook("post-install"), True),  # default policy before-hook-creation: stays until the next run
    (hook("pre-install,pre-upgrade", "before-hook-creation"), True),
    (hook("post-install", "hook-failed"), True),  # deleted only when the hook fails
    (hook(" Post-Upgrade ", "hook-succeeded"), False),  # helm trims and lower-cases; deleted after success
    (hook("pre-install", "before-hook-creation, hook-succeeded"), False),
    (hook("pre-install", "hook-succeeded", kind="CustomResourceDefinition"), True),  # helm never deletes CRDs
    (hook("post-delete"), False),
    (hook("pre-delete,post-delete"), False),
    (hook("test"), False),
    (hook("test-success"), False),
    (hook("pre-rollback,post-rollback"), False),
    (hook("post-install,crd-install"), False),  # an unknown event: helm skips the whole object
])
def test_exists_after_up_follows_helm_hook_handling(obj: dict[str, Any], exists: bool) -> None:
    assert exists_after_up(obj) is exists


@pytest.mark.parametrize("stack", KUBERNETES_STACKS)
def test_no_stack_cluster_holds_a_hook_that_does_not_exist_after_up(stack: str) -> None:
    hooks = [item.describe() for item in rendered(stack)
             if "helm.sh/hook" in ((item.obj.get("metadata") or {}).get("annotations") or {})]
    assert all(exists_after_up(item.obj) for item in rendered(stack)), hooks
    # The device plugin chart's NFD prune hook (post-delete) is rendered by helm but never exists after up.
    assert not [name for name in hooks if "node-feature-discovery-prune" in name]


# --- validation against the installed CRDs ------------------------------------------------------------------------

@pytest.mark.parametrize("stack", KUBERNETES_STACKS)
def test_the_stacks_clusters_validate_clean(stack: str) -> None:
    objects = rendered(stack)
    report = Report()
    validate_objects(list(objects), plan_stack(stack).config.kubernetes_version, report)
    assert report.errors == []
    custom = [item for item in objects if item.kind in ("PyTorchJob", "ElasticJob", "ScaledJob", "ScaledObject",
                                                        "TrainJob", "ClusterTrainingRuntime",
                                                        "ClusterQueue", "LocalQueue", "ResourceFlavor",
                                                        # issue 32: the atomic check and the network Topology
                                                        "AdmissionCheck", "ProvisioningRequestConfig", "Topology")]
    assert custom and report.checked["installed CRD schemas"] == len(custom)
    assert report.checked[f"kubernetes-validate {plan_stack(stack).config.kubernetes_version}"] == \
        len(objects) - len(custom)


def test_a_custom_resource_field_its_installed_crd_lacks_fails() -> None:
    objects = list(rendered("prod"))
    job = one(objects, "PyTorchJob")
    bad = copy.deepcopy(job.obj)
    bad["spec"]["runPolicyy"] = {}
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    errors = errors_of([item for item in objects if item is not job] + [ClusterObject("stack", bad)])
    name = f"PyTorchJob {job.namespace}/{job.name} (stack)"
    assert errors == [
        f"{name}: spec: Additional properties are not allowed ('runPolicyy' was unexpected)",
        f"{name}: spec.pytorchReplicaSpecs.Worker.replicas: 'two' is not of type 'integer'",
    ]


def test_computed_values_do_not_fail_the_crd_schema() -> None:
    objects = list(rendered("prod"))
    job = one(objects, "PyTorchJob")
    computed = copy.deepcopy(job.obj)
    computed["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = COMPUTED
    assert errors_of([item for item in objects if item is not job] + [ClusterObject("stack", computed)]) == []


def test_elasticjob_replica_template_labels_are_accepted_by_the_installed_derived_crd() -> None:
    objects = list(rendered("edge"))
    job = one(objects, "ElasticJob")
    crd = next(item for item in objects if item.name == "elasticjobs.elastic.iml.github.io")
    # edge is offline: its DLRover manifest is the derived file with images moved to the site registry
    assert crd.source.startswith("operator build/offline/edge/dlrover-v0.6.1-")
    assert crd.obj == next(item.obj for item in render_operator("vendor/derived/dlrover-v0.6.1.yaml")
                           if item.name == crd.name)
    labels = job.obj["spec"]["replicaSpecs"]["worker"]["template"]["metadata"]["labels"]
    assert labels and errors_of([crd, job], "1.33") == []
    # The derived CRD does check template metadata: a non-string label value fails.
    bad = copy.deepcopy(job.obj)
    bad["spec"]["replicaSpecs"]["worker"]["template"]["metadata"]["labels"]["n"] = 1
    assert errors_of([crd, ClusterObject("stack", bad)], "1.33") == [
        f"ElasticJob {job.namespace}/{job.name} (stack): "
        "spec.replicaSpecs.worker.template.metadata.labels.n: 1 is not of type 'string'"]


def test_a_custom_resource_whose_operator_is_not_installed_fails() -> None:
    job = one(rendered("prod"), "TrainJob")  # dev installs KEDA and training-operator, but no Trainer
    errors = errors_of([*rendered("dev"), job])
    assert errors == [
        f"TrainJob {job.namespace}/{job.name} (stack): custom resource trainer.kubeflow.org/v1alpha1 TrainJob has no "
        "CustomResourceDefinition installed in this cluster (installed for trainer.kubeflow.org: none); install its "
        "operator or chart in the same stack"]


def test_an_unknown_group_is_named_with_what_the_cluster_does_install() -> None:
    scaled = one(rendered("dev"), "ScaledJob")
    wrong = copy.deepcopy(scaled.obj)
    wrong["apiVersion"] = "keda.sh/v1"
    errors = errors_of([*(item for item in rendered("dev") if item is not scaled), ClusterObject("stack", wrong)])
    assert len(errors) == 1
    assert "custom resource keda.sh/v1 ScaledJob has no CustomResourceDefinition installed" in errors[0]
    assert "keda.sh/v1alpha1 ScaledJob" in errors[0]


def test_a_crd_version_that_is_not_served_is_an_error() -> None:
    objects = [copy.deepcopy(item.obj) for item in rendered("dev")]
    crd = next(obj for obj in objects
               if obj["kind"] == "CustomResourceDefinition" and obj["spec"]["names"]["kind"] == "ScaledJob")
    crd["spec"]["versions"][0]["served"] = False
    errors = errors_of([ClusterObject("chart keda", obj) for obj in objects])
    assert len(errors) == 1 and "ScaledJob" in errors[0] and "is not a served version of CustomResourceDefinition " \
        "scaledjobs.keda.sh (chart keda)" in errors[0]


def test_errors_in_chart_objects_name_the_chart() -> None:
    objects = list(rendered("dev"))
    deployment = next(item for item in objects if item.kind == "Deployment" and item.source.startswith("chart "))
    broken = copy.deepcopy(deployment.obj)
    broken["spec"]["replicaz"] = 1
    errors = errors_of([ClusterObject(deployment.source, broken)])
    assert len(errors) == 1 and errors[0].startswith(f"{deployment.describe()}: spec: ") and "replicaz" in errors[0]


def test_the_new_kueue_objects_are_checked_against_their_installed_crds() -> None:
    """A wrong field in the AdmissionCheck, the ProvisioningRequestConfig or the Topology fails validation: the
    offline plan holds them to the vendored Kueue CRDs like `make cluster-test` would."""
    objects = list(rendered("prod"))
    for kind, field, value, expected in (
            ("AdmissionCheck", "controllerNam", "x", "Additional properties are not allowed"),
            ("ProvisioningRequestConfig", "provisioningClassName", "Not_A_Class", "does not match"),
            ("Topology", "levels", [], "should be non-empty")):
        item = one(objects, kind)
        bad = copy.deepcopy(item.obj)
        bad["spec"][field] = value
        errors = errors_of([o for o in objects if o is not item] + [ClusterObject("stack", bad)])
        assert len(errors) == 1 and expected in errors[0], (kind, errors)


# --- a chart's crds/ and a ConfigFile's objects (found by `make up-test`) ------------------------------------------


def _crd_names(objects: Any) -> set[str]:
    return {item.obj["metadata"]["name"] for item in objects if item.kind == "CustomResourceDefinition"}


def _crds_folder_files(chart: Path) -> list[Path]:
    """Helm's crds/ files of a chart and its subcharts (a `crds` folder beside a Chart.yaml; not templates/crds)."""
    return sorted(path for path in chart.rglob("crds/*.yaml") if (path.parent.parent / "Chart.yaml").exists())


def _crds_helm_would_keep(plan: Any, objects: Any) -> list[str]:
    """Problems of a plan's charts' crds/: a release that lets helm install them (helm never deletes them, so `pulumi
    destroy` would leave them behind), a CRD of them the stack does not apply itself, a crds/ file whose ConfigFile
    the release does not wait for (components/helm.py `pinned_release`)."""
    problems = []
    applied = _crd_names(objects)
    config_files = {resource.urn: resource.inputs["file"] for resource in plan.by_type(cluster.CONFIG_FILE)}
    for release in plan.by_type(cluster.HELM_RELEASE):
        chart = ROOT / release.inputs["chart"]
        if not _crds_folder_files(chart):
            continue
        name = release.inputs["name"]
        if release.inputs.get("skipCrds") is not True:
            problems.append(f"{name}: its chart has crds/ and helm would keep them")
        with_crds = render_releases([{**release.inputs, "skipCrds": False}], plan.config.kubernetes_version)
        without = render_releases([{**release.inputs, "skipCrds": True}], plan.config.kubernetes_version)
        from_crds_folder = _crd_names(with_crds) - _crd_names(without)
        if not from_crds_folder <= applied:
            problems.append(f"{name}: {sorted(from_crds_folder - applied)} would not be installed")
        waited = {config_files[urn] for urn in release.depends_on if urn in config_files}
        needed = {f"{release.inputs['chart']}/{path.relative_to(chart)}" for path in _crds_folder_files(chart)
                  if _crd_names(render_operator(str(path.relative_to(ROOT)))) & from_crds_folder}
        if not needed <= waited:
            problems.append(f"{name}: does not wait for {sorted(needed - waited)}")
    return problems


@pytest.mark.parametrize("stack", KUBERNETES_STACKS)
def test_every_crd_a_release_would_install_is_applied_by_the_stack(stack: str) -> None:
    assert _crds_helm_would_keep(plan_stack(stack), rendered(stack)) == []


def test_a_release_that_lets_helm_keep_its_crds_is_found() -> None:
    plan = copy.deepcopy(plan_stack("edge"))
    release = next(r for r in plan.by_type(cluster.HELM_RELEASE) if "nvidia-device-plugin" in r.inputs["chart"])
    crds = next(r for r in plan.by_type(cluster.CONFIG_FILE) if "/crds/" in r.inputs["file"])
    release.inputs.pop("skipCrds")
    release.depends_on = [urn for urn in release.depends_on if urn != crds.urn]
    plan.resources.remove(crds)
    objects = [item for item in rendered("edge")
               if not (item.kind == "CustomResourceDefinition" and item.source == f"operator {crds.inputs['file']}")]
    problems = _crds_helm_would_keep(plan, objects)
    assert len(problems) == 3, problems
    assert problems[0] == "nvidia-device-plugin: its chart has crds/ and helm would keep them"
    assert "would not be installed" in problems[1] and "does not wait for" in problems[2]


def test_a_config_file_registers_each_object_as_the_provider_names_it(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(textwrap.dedent("""
        apiVersion: v1
        kind: Namespace
        metadata: {name: ops}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: ctl}
        spec: {}
        ---
        apiVersion: v1
        kind: Secret
        metadata: {name: token, namespace: ops}
        data: {key: c2VjcmV0}
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRole
        metadata: {name: reader}
        """))
    parent = "urn:pulumi:s::gtp::gtp:workload:Ops$kubernetes:yaml/v2:ConfigFile::ops-manifest"
    record = {"urn": parent, "type": cluster.CONFIG_FILE, "provider": "urn:pulumi:s::gtp::pulumi:providers:k::p",
              "inputs": {"file": "m.yaml"}}
    children = cluster.config_file_children(record, tmp_path)
    prefix = "urn:pulumi:s::gtp::gtp:workload:Ops$kubernetes:yaml/v2:ConfigFile$"
    assert [child["urn"] for child in children] == [
        f"{prefix}kubernetes:core/v1:Namespace::ops-manifest:ops",
        f"{prefix}kubernetes:apps/v1:Deployment::ops-manifest:default/ctl",
        f"{prefix}kubernetes:core/v1:Secret::ops-manifest:ops/token",
        f"{prefix}kubernetes:rbac.authorization.k8s.io/v1:ClusterRole::ops-manifest:reader"]
    assert {child["parent"] for child in children} == {parent}
    assert {child["provider"] for child in children} == {record["provider"]}
    assert children[2]["inputs"]["data"] == "[secret]"
    assert children[1]["inputs"]["metadata"]["namespace"] == "default"
    skipping = cluster.config_file_children({**record, "inputs": {"file": "m.yaml", "skipAwait": True,
                                                                   "resourcePrefix": "p"}}, tmp_path)
    assert skipping[0]["urn"].endswith("::p:ops")
    assert {child["inputs"]["metadata"]["annotations"]["pulumi.com/skipAwait"] for child in skipping} == {"true"}
