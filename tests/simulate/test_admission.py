"""Issue 13: admission of every expanded pod — Pod Security Standards (every baseline and restricted control, at the
cluster's version), LimitRange defaults and bounds, ResourceQuota at the largest scale."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import plan_stack
from verify import simulate
from verify.render import ClusterObject, render_cluster
from verify.simulate.admission import CONTROLS_BY_ID, admitted_resources, check, pod_security, quantity, quota_usage
from verify.simulate.model import ExpandedPod
from verify.simulate.pods import expand_pods

V134, V133 = (1, 34), (1, 33)


def restricted_container(name: str = "main") -> dict[str, Any]:
    return {"name": name, "image": "trainer:1",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}


def restricted_pod() -> dict[str, Any]:
    """A pod every level admits (the pass case of every control)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "initContainers": [restricted_container("init")], "containers": [restricted_container()],
                     "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "data",
                                                                   "persistentVolumeClaim": {"claimName": "d"}}]}}


def failed(pod: dict[str, Any], level: str, version: tuple[int, int] = V134) -> list[str]:
    return [control.id for control, _ in pod_security(pod, level, version)]


def on(path: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """`spec.containers[0].securityContext` style path → the dict there (created if missing)."""
    def locate(pod: dict[str, Any]) -> dict[str, Any]:
        node: Any = pod
        for part in path.split("."):
            if part.endswith("]"):
                key, index = part[:-1].split("[")
                node = node[key][int(index)]
            else:
                node = node.setdefault(part, {})
        return node
    return locate


POD_SC, C0_SC, INIT_SC = on("spec.securityContext"), on("spec.containers[0].securityContext"), \
    on("spec.initContainers[0].securityContext")

# (control id, level it belongs to, the edit that breaks it)
BREAKERS: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    ("windowsHostProcess", "baseline", lambda p: POD_SC(p).update(windowsOptions={"hostProcess": True})),
    ("hostNamespaces", "baseline", lambda p: p["spec"].update(hostNetwork=True)),
    ("privileged", "baseline", lambda p: INIT_SC(p).update(privileged=True)),
    ("capabilities_baseline", "baseline", lambda p: C0_SC(p)["capabilities"].update(add=["SYS_ADMIN"])),
    ("hostPathVolumes", "baseline", lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}})),
    ("hostPorts", "baseline", lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80,
                                                                                   "hostPort": 8080}])),
    ("hostProbesAndHostLifecycle", "baseline", lambda p: p["spec"]["containers"][0].update(
        livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}})),
    ("appArmorProfile", "baseline", lambda p: C0_SC(p).update(appArmorProfile={"type": "Unconfined"})),
    ("seLinuxOptions", "baseline", lambda p: POD_SC(p).update(seLinuxOptions={"user": "system_u"})),
    ("procMount", "baseline", lambda p: C0_SC(p).update(procMount="Unmasked")),
    ("seccompProfile_baseline", "baseline", lambda p: C0_SC(p).update(seccompProfile={"type": "Unconfined"})),
    ("sysctls", "baseline", lambda p: POD_SC(p).update(sysctls=[{"name": "kernel.msgmax", "value": "1"}])),
    ("restrictedVolumes", "restricted", lambda p: p["spec"]["volumes"].append({"name": "n", "nfs": {
        "server": "s", "path": "/"}})),
    ("allowPrivilegeEscalation", "restricted", lambda p: INIT_SC(p).pop("allowPrivilegeEscalation")),
    ("runAsNonRoot", "restricted", lambda p: POD_SC(p).pop("runAsNonRoot")),
    ("runAsUser", "restricted", lambda p: C0_SC(p).update(runAsUser=0)),
    ("seccompProfile_restricted", "restricted", lambda p: POD_SC(p).pop("seccompProfile")),
    ("capabilities_restricted", "restricted", lambda p: C0_SC(p).update(capabilities={"add": ["NET_BIND_SERVICE"]})),
]
# A baseline control broken at `restricted` is reported by the restricted check that overrides it.
OVERRIDDEN = {"capabilities_baseline": "capabilities_restricted", "hostPathVolumes": "restrictedVolumes",
              "seccompProfile_baseline": "seccompProfile_restricted"}


def test_every_published_control_is_implemented() -> None:
    assert {control for control, _, _ in BREAKERS} == set(CONTROLS_BY_ID)


@pytest.mark.parametrize(("control", "level", "breaker"), BREAKERS, ids=[b[0] for b in BREAKERS])
def test_each_control_passes_the_compliant_pod_and_fails_the_broken_one(control: str, level: str,
                                                                       breaker: Callable[[dict[str, Any]], None]
                                                                       ) -> None:
    pod = restricted_pod()
    assert failed(pod, "restricted") == [] and failed(pod, "baseline") == []
    breaker(pod)
    assert failed(pod, level) == [control]
    assert OVERRIDDEN.get(control, control) in failed(pod, "restricted")
    assert failed(pod, "privileged") == []
    if level == "restricted":
        assert failed(pod, "baseline") == []


def test_pod_level_settings_cover_containers_and_container_settings_win() -> None:
    pod = restricted_pod()
    assert "runAsNonRoot" not in pod["spec"]["containers"][0]["securityContext"]     # inherited from the pod
    C0_SC(pod).update(runAsNonRoot=False)                                           # a container's false wins
    assert failed(pod, "restricted") == ["runAsNonRoot"]
    pod = restricted_pod()
    POD_SC(pod).pop("seccompProfile")
    for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]:
        c["securityContext"]["seccompProfile"] = {"type": "Localhost", "localhostProfile": "p.json"}
    assert failed(pod, "restricted") == []                                          # every container sets it
    pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]    # ephemeral ones count too
    assert set(failed(pod, "restricted")) == {"allowPrivilegeEscalation", "seccompProfile_restricted",
                                               "capabilities_restricted"}


def test_controls_follow_the_clusters_minor_version() -> None:
    probe = restricted_pod()
    probe["spec"]["containers"][0]["readinessProbe"] = {"tcpSocket": {"host": "example.com", "port": 1}}
    assert failed(probe, "baseline", V134) == ["hostProbesAndHostLifecycle"]
    assert failed(probe, "baseline", V133) == []                                    # added in 1.34
    buffers = restricted_pod()
    POD_SC(buffers)["sysctls"] = [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]
    assert failed(buffers, "baseline", (1, 32)) == [] and failed(buffers, "baseline", (1, 31)) == ["sysctls"]
    engine = restricted_pod()
    POD_SC(engine)["seLinuxOptions"] = {"type": "container_engine_t"}
    assert failed(engine, "baseline", (1, 31)) == [] and failed(engine, "baseline", (1, 30)) == ["seLinuxOptions"]
    windows = restricted_pod()
    windows["spec"]["os"] = {"name": "windows"}
    INIT_SC(windows).pop("allowPrivilegeEscalation")
    assert failed(windows, "restricted", (1, 25)) == [] and failed(windows, "restricted", (1, 24)) == [
        "allowPrivilegeEscalation"]


# --- namespaces, LimitRange, ResourceQuota through check() --------------------------------------------------------


def namespace(name: str, level: str | None = None, **labels: str) -> ClusterObject:
    all_labels = dict(labels)
    if level:
        all_labels["pod-security.kubernetes.io/enforce"] = level
    return ClusterObject("stack", {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": name, "labels": all_labels}})


def namespaced(kind: str, spec: dict[str, Any], ns: str = "ns") -> ClusterObject:
    return ClusterObject("stack", {"apiVersion": "v1", "kind": kind,
                                   "metadata": {"name": kind.lower(), "namespace": ns}, "spec": spec})


def expanded(pod: dict[str, Any], count: int = 1, owner: str = "Deployment ns/app", ns: str = "ns") -> ExpandedPod:
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = ns
    return ExpandedPod(owner=owner, source="stack", namespace=ns, pod=pod, count=count)


def admitted(objects: list[ClusterObject], pods: list[ExpandedPod]) -> Any:
    (result,) = check(None, objects, pods, version=V134)
    return result


def test_unlabelled_namespaces_enforce_nothing_and_are_named() -> None:
    pod = restricted_pod()
    pod["spec"]["hostNetwork"] = True
    result = admitted([namespace("ns")], [expanded(pod), expanded(pod, ns="kube-system", owner="DaemonSet ks/x")])
    assert (result.passed, result.total, result.findings) == (2, 2, [])
    assert any("without a pod-security.kubernetes.io/enforce label" in d and "kube-system, ns" in d
               for d in result.details)
    rejected = admitted([namespace("ns", "baseline")], [expanded(pod)])
    assert (rejected.passed, rejected.total) == (0, 1)
    (finding,) = rejected.findings
    assert finding.subject == "Deployment ns/app" and "hostNamespaces" in finding.rule and "hostNetwork" in finding.fix


def test_an_invalid_enforce_label_rejects_the_namespace_and_evaluates_restricted() -> None:
    pod = restricted_pod()
    POD_SC(pod).pop("runAsNonRoot")
    result = admitted([namespace("ns", "strict")], [expanded(pod)])
    rules = [f.rule for f in result.findings]
    assert any("'strict' is not one of privileged, baseline, restricted" in r for r in rules)
    assert any("runAsNonRoot" in r for r in rules) and result.passed == 0


def test_limitrange_defaults_fill_missing_requests_and_limits_before_quota() -> None:
    limit_range = {"limits": [{"type": "Container", "default": {"cpu": "2", "memory": "2Gi"},
                               "defaultRequest": {"cpu": "500m"}, "max": {"cpu": "4", "ephemeral-storage": "1Gi"}}]}
    pod = restricted_pod()
    del pod["spec"]["containers"][0]["resources"]
    pod["spec"]["initContainers"][0]["resources"] = {"limits": {"cpu": "1"}}
    mutated = admitted_resources(pod, [{"spec": limit_range}])
    main, init = mutated["spec"]["containers"][0]["resources"], mutated["spec"]["initContainers"][0]["resources"]
    # default ← max (SetDefaults_LimitRangeItem), defaultRequest ← default where unset
    assert main["limits"] == {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "1Gi"}
    assert main["requests"] == {"cpu": "500m", "memory": "2Gi", "ephemeral-storage": "1Gi"}
    assert init["requests"]["cpu"] == "1"                       # a limit without a request: request = limit
    usage = quota_usage(mutated)
    assert usage["requests.cpu"] == 1 and usage["limits.cpu"] == 2   # max(sum of containers, largest init)
    quota = namespaced("ResourceQuota", {"hard": {"requests.cpu": "1", "limits.memory": "2Gi"}})
    ok = admitted([namespace("ns", "restricted"), namespaced("LimitRange", limit_range), quota], [expanded(pod)])
    assert (ok.passed, ok.findings) == (1, [])


@pytest.mark.parametrize(("item", "resources", "message"), [
    ({"type": "Container", "max": {"cpu": "2"}}, {"limits": {"cpu": "3"}},
     "maximum cpu per Container is 2, but limit is 3"),
    ({"type": "Container", "min": {"memory": "2Gi"}}, {"requests": {"memory": "1Gi"}, "limits": {"memory": "4Gi"}},
     "minimum memory per Container is 2Gi, but request is 1Gi"),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}, {"requests": {"cpu": "1"}, "limits": {"cpu": "3"}},
     "cpu max limit to request ratio per Container is 2, but provided ratio is 3"),
    ({"type": "Pod", "max": {"memory": "3Gi"}}, {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}},
     "maximum memory per Pod is 3Gi, but limit is 4Gi"),
])
def test_limitrange_bounds(item: dict[str, Any], resources: dict[str, Any], message: str) -> None:
    pod = restricted_pod()
    for c in pod["spec"]["containers"]:
        c["resources"] = copy.deepcopy(resources)
    pod["spec"]["containers"].append({**copy.deepcopy(pod["spec"]["containers"][0]), "name": "side"})
    pod["spec"]["initContainers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "2Gi"},
                                                     "limits": {"cpu": "2", "memory": "2Gi"}}
    result = admitted([namespace("ns", "restricted"), namespaced("LimitRange", {"limits": [item]})], [expanded(pod)])
    assert result.passed == 0 and any(message in f.rule for f in result.findings), result.findings
    wide = {**item, **{k: {r: "1000Gi" if r == "memory" else "1000" for r in v}
                       for k, v in item.items() if k in ("max", "maxLimitRequestRatio")}}
    if "min" in item:
        wide["min"] = dict.fromkeys(item["min"], "1Mi")
    fits = admitted([namespace("ns", "restricted"), namespaced("LimitRange", {"limits": [wide]})], [expanded(pod)])
    assert (fits.passed, fits.findings) == (1, [])


def test_quota_sums_every_pod_at_its_largest_count() -> None:
    pod = restricted_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1",
                                                              "ephemeral-storage": "10Gi"},
                                                 "limits": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1",
                                                            "ephemeral-storage": "10Gi"}}
    hard = {"requests.cpu": "8", "limits.memory": "32Gi", "requests.nvidia.com/gpu": "4", "pods": "4",
            "count/pods": "4", "requests.ephemeral-storage": "40Gi"}
    fits = admitted([namespace("ns", "restricted"), namespaced("ResourceQuota", {"hard": hard})],
                    [expanded(pod, count=4, owner="PyTorchJob ns/j Worker")])
    assert (fits.passed, fits.findings) == (1, [])
    assert any("requests.nvidia.com/gpu 4/4" in d and "limits.memory 32Gi/32Gi" in d for d in fits.details)
    over = admitted([namespace("ns", "restricted"), namespaced("ResourceQuota", {"hard": hard})],
                    [expanded(pod, count=4, owner="PyTorchJob ns/j Worker"),
                     expanded(pod, count=1, owner="PyTorchJob ns/j Master")])
    assert (over.passed, over.total) == (1, 2)
    (finding,) = over.findings
    assert finding.subject == "PyTorchJob ns/j Master"
    assert "requests.nvidia.com/gpu: 1 pod(s) × 1 on top of 4 used exceeds hard 4" in finding.rule
    assert "requests.cpu" in finding.rule and "pods" in finding.rule and "raise" in finding.fix


def test_quota_on_cpu_requires_every_container_to_state_it() -> None:
    pod = restricted_pod()
    del pod["spec"]["initContainers"][0]["resources"]
    result = admitted([namespace("ns"), namespaced("ResourceQuota", {"hard": {"limits.cpu": "10"}})], [expanded(pod)])
    (finding,) = result.findings
    assert "must specify limits.cpu" in finding.rule and result.passed == 0
    scoped = namespaced("ResourceQuota", {"hard": {"limits.cpu": "10"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}})
    assert admitted([namespace("ns"), scoped], [expanded(pod)]).passed == 1   # out of the quota's scope
    best_effort = namespaced("ResourceQuota", {"hard": {"pods": "0"}, "scopes": ["BestEffort"]})
    assert admitted([namespace("ns"), best_effort], [expanded(pod)]).passed == 1     # it requests cpu/memory
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        c.pop("resources", None)
    assert admitted([namespace("ns"), best_effort], [expanded(pod)]).passed == 0


def test_quantities_are_exact() -> None:
    assert quantity("500m") * 2 == 1 and quantity("1Gi") == 2**30 and quantity("1e3") == 1000
    assert quantity(0.5) == quantity("500m") and quantity("1.5G") == 1_500_000_000
    with pytest.raises(ValueError, match="'12 cores' is not a Kubernetes quantity"):
        quantity("12 cores")


# --- old failure #2 and the stacks ------------------------------------------------------------------------------


def pytorchjob(replica_types: tuple[str, ...]) -> ClusterObject:
    worker = {"metadata": {}, "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{**restricted_container("pytorch"),
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    return ClusterObject("stack", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                   "metadata": {"name": "bench", "namespace": "training"},
                                   "spec": {"pytorchReplicaSpecs": {t: {"replicas": 1 if t == "Master" else 2,
                                                                        "template": worker}
                                                                    for t in replica_types}}})


def test_old_failure_2_master_and_workers_under_restricted_are_rejected_for_init_pytorch() -> None:
    objects = [namespace("training", "restricted"), pytorchjob(("Master", "Worker"))]
    result = admitted(objects, expand_pods(objects))
    assert (result.passed, result.total) == (1, 2)                 # the Master is admitted, the Workers are not
    assert {f.subject for f in result.findings} == {"PyTorchJob training/bench Worker"}
    rules = " ".join(f.rule for f in result.findings)
    for control in ("allowPrivilegeEscalation", "capabilities_restricted"):
        assert control in rules and '"init-pytorch"' in rules
    workers_only = [namespace("training", "restricted"), pytorchjob(("Worker",))]
    fixed = admitted(workers_only, expand_pods(workers_only))
    assert (fixed.passed, fixed.total, fixed.findings) == (1, 1, [])


@pytest.mark.parametrize("stack", ["dev", "edge", "prod"])
def test_the_stacks_admit_every_pod(stack: str) -> None:
    plan = plan_stack(stack)
    report = simulate.simulate(plan, render_cluster(plan))
    admitted_check = report["checks"]["admitted"]
    assert admitted_check["findings"] == [] and admitted_check["passed"] == admitted_check["total"] > 10
    training = {"dev": "training-dev=restricted", "edge": "training-edge=baseline", "prod": "training-prod=restricted"}
    assert training[stack] in admitted_check["details"][0]
    assert any(d.startswith(f"ResourceQuota training-{stack}/training") for d in admitted_check["details"])


def test_the_edge_elasticjob_master_needs_its_baseline_namespace() -> None:
    """DLRover's master pod has no securityContext: the edge namespace must stay `baseline` (restricted rejects it)."""
    objects = render_cluster(plan_stack("edge"))
    strict = [ClusterObject(o.source, {**o.obj, "metadata": {**o.obj["metadata"], "labels": {
        **o.obj["metadata"]["labels"], "pod-security.kubernetes.io/enforce": "restricted"}}})
              if o.kind == "Namespace" and o.name == "training-edge" else o for o in objects]
    (result,) = check(plan_stack("edge"), strict, expand_pods(strict))
    assert {f.subject for f in result.findings} == {"ElasticJob training-edge/edge-finetune dlrover-master"}


def test_a_bad_quantity_names_its_key_path_and_value() -> None:
    pod = restricted_pod()
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "8 GB"
    quota = namespaced("ResourceQuota", {"hard": {"requests.cpu": "eight"}})
    result = admitted([namespace("ns"), quota], [expanded(pod)])
    rules = {f.subject: f.rule for f in result.findings}
    assert "spec.containers[0].resources.limits.memory: '8 GB' is not a Kubernetes quantity" in rules[
        "Deployment ns/app"]
    assert "spec.hard.requests.cpu: 'eight' is not a Kubernetes quantity" in rules["ResourceQuota ns/resourcequota"]
    assert result.passed == 0
