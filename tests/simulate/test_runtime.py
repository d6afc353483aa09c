"""Container runtime handlers (issue 26 finding 1): k3s keeps runc as containerd's default, so the device plugin,
GFD, the MPS daemon and every GPU pod need RuntimeClass `nvidia` (verify/simulate/runtime.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components import gpu_readiness_check
from stack_config import ConfigError
from tests.conftest import plan_modified, plan_stack
from verify import render as gtp_cluster
from verify.simulate import nodes, runtime, simulate
from verify.simulate.model import ExpandedPod
from verify.simulate.nodes import NodeGroup


def _pod(command: str = "app", requests: dict[str, str] | None = None, runtime_class: str | None = None,
         owner: str = "Deployment ns/p") -> ExpandedPod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "command": [command],
                                            "resources": {"requests": dict(requests or {})}}]}
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    return ExpandedPod(owner=owner, source="stack", namespace="ns", pod={"spec": spec})


def _group(default_runtime: str) -> NodeGroup:
    return NodeGroup(name="orin", role="gpu", labels={}, taints=[], allocatable={}, default_runtime=default_runtime)


def _check(pod: ExpandedPod, default_runtime: str, classes: dict[str, str]) -> runtime.CheckResult:
    return runtime.check([pod], [_group(default_runtime)], classes, lambda p, g: True)


def test_a_gpu_pod_on_runc_nodes_without_a_runtime_class_is_a_finding() -> None:
    result = _check(_pod(requests={"nvidia.com/gpu": "1"}), "runc", {"nvidia": "nvidia"})
    assert result.passed == 0 and result.total == 1
    assert "requests nvidia.com/gpu but runs without the NVIDIA runtime" in result.findings[0].rule
    assert "the node's default runtime 'runc'" in result.findings[0].rule


def test_the_nvidia_runtime_class_on_runc_nodes_passes() -> None:
    result = _check(_pod(command="nvidia-device-plugin", runtime_class="nvidia"), "runc", {"nvidia": "nvidia"})
    assert (result.passed, result.total, result.findings) == (1, 1, [])


def test_a_runtime_class_that_does_not_exist_is_a_finding() -> None:
    result = _check(_pod(command="gpu-feature-discovery", runtime_class="nvidia"), "runc", {})
    assert "RuntimeClass 'nvidia' does not exist" in result.findings[0].rule


def test_nodes_that_default_to_nvidia_need_no_class_and_cpu_pods_are_not_checked() -> None:
    assert _check(_pod(requests={"nvidia.com/gpu.shared": "1"}), "nvidia", {}).findings == []
    assert _check(_pod(command="nfd-worker"), "runc", {}).total == 0


def test_edge_runs_the_plugin_gfd_and_workers_under_runtime_class_nvidia() -> None:
    plan = plan_stack("edge")
    objects = gtp_cluster.render_cluster(plan)
    check = simulate(plan, objects)["checks"]["runtime handlers"]
    assert (check["passed"], check["total"]) == (3, 3)
    specs = {o.name: o.obj["spec"]["template"]["spec"] for o in objects if o.kind == "DaemonSet"}
    gpu_agents = {name for name, spec in specs.items()
                  if runtime.needs_nvidia({"spec": spec})}
    assert len(gpu_agents) == 3  # the plugin, GFD and the MPS daemon (rendered; it lands only on MPS nodes)
    assert all(specs[name]["runtimeClassName"] == "nvidia" for name in gpu_agents)
    assert all("runtimeClassName" not in spec for name, spec in specs.items() if name not in gpu_agents)


def _without_runtime_class(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_runtime_class(v) for k, v in node.items() if k != "runtimeClassName"}
    if isinstance(node, list):
        return [_without_runtime_class(v) for v in node]
    return node


def test_pods_rendered_without_the_runtime_class_fail_the_plan_naming_the_cause() -> None:
    """The config refuses `gpu.runtimeClassName: ""` on k3s before anything renders (stack_config/rules.py
    `_check_gpu_runtime`, tests/test_config_readers.py); this check is the second line, for a component that would
    drop the class the config asked for: edge's pods rendered without it."""
    plan = plan_stack("edge")
    objects = [replace(o, obj=_without_runtime_class(o.obj)) for o in gtp_cluster.render_cluster(plan)]
    report = simulate(plan, objects)
    check = report["checks"]["runtime handlers"]
    assert check["passed"] == 0 and len(check["findings"]) == 3
    assert any("nvidia-device-plugin" in f["subject"] for f in check["findings"])
    # and the consequence: the plugin registers nothing, so the worker can't be scheduled
    assert report["checks"]["scheduled"]["findings"]
    assert not report["ok"]


def test_sites_whose_nodes_default_to_nvidia_get_no_runtime_class(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "edge", lambda c: c["gtp:cluster"].update(nodeDefaultRuntime="nvidia"))
    objects = gtp_cluster.render_cluster(plan)
    assert not any("runtimeClassName" in (o.obj.get("spec") or {}).get("template", {}).get("spec", {})
                   for o in objects if o.kind == "DaemonSet")
    assert simulate(plan, objects)["ok"]


def test_create_runtime_class_adds_the_object_and_the_release_waits_for_it(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "edge", lambda c: c["gtp:gpu"].update(createRuntimeClass=True))
    classes = [r for r in plan.resources if r.type == "kubernetes:node.k8s.io/v1:RuntimeClass"]
    assert [(r.inputs["metadata"]["name"], r.inputs["handler"]) for r in classes] == [("nvidia", "nvidia")]
    release = next(r for r in plan.resources if r.type == "kubernetes:helm.sh/v3:Release"
                   and r.name.startswith("nvidia-"))
    assert classes[0].urn in release.depends_on


def test_runtime_class_config_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"(?s)cluster\.nodeDefaultRuntime: 'runc' has no effect here: "
                                          r"only applies where cluster\.mode is 'existing'.*"
                                          r"gpu\.runtimeClassName.*'NVIDIA' is not a RuntimeClass name"):
        plan_modified(tmp_path, "dev", lambda c: (c["gtp:cluster"].update(nodeDefaultRuntime="runc"),
                                                  c["gtp:gpu"].update(runtimeClassName="NVIDIA")))
    with pytest.raises(ConfigError, match=r"gpu\.createRuntimeClass.*needs a RuntimeClass name"):
        plan_modified(tmp_path, "dev", lambda c: c["gtp:gpu"].update(createRuntimeClass=True))


def test_the_readiness_gate_names_the_runtime_when_ready_nodes_advertise_no_gpu() -> None:
    plan = plan_stack("edge")
    from stages.gpu import readiness_expectations

    expectations = readiness_expectations(plan.config)
    node = {"metadata": {"labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "0"}}}
    cause = gpu_readiness_check.likely_cause([node], expectations)
    assert "node group 'orin' has 1 Ready node(s) and no GPU advertised" in cause
    assert "RuntimeClass 'nvidia'" in cause and "grep nvidia /var/lib/rancher/k3s" in cause
    node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    assert gpu_readiness_check.likely_cause([node], expectations) == ""


def test_eks_gpu_groups_default_to_the_nvidia_runtime() -> None:
    plan = plan_stack("dev")
    objects = gtp_cluster.render_cluster(plan)
    groups = nodes.node_groups(plan, objects, [])
    assert {g.name: g.default_runtime for g in groups} == {"g6": "nvidia", "system": "runc"}
