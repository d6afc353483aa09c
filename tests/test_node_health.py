"""Node health on EKS: the node monitoring agent add-on beside node repair, refused while unpinned, and training
pods kept off the nodes repair cordons (issue 31 item 1)."""

from __future__ import annotations

import copy

import pytest

from catalog import versions
from tests.conftest import plan_stack
from verify import render as gtp_cluster
from verify.simulate import nodes
from verify.simulate.pods import expand_pods
from verify.simulate.scheduling import placement_misses

AGENT = "eks-node-monitoring-agent"
TRAINING_KINDS = ("PyTorchJob", "TrainJob", "ElasticJob", "ScaledJob", "Job")
CORDONED = {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}
"""The taint a cordon puts on a node (kubernetes pkg/controller/nodelifecycle: TaintNodesByCondition maps
`spec.unschedulable` to it). EKS node repair cordons a node whose health check fails ("If a health check fails, the
node is automatically cordoned so that no new Pods are scheduled on the node", EKS user guide, node-health.html)."""


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_eks_plans_install_the_agent_after_the_nodes(stack: str) -> None:
    plan = plan_stack(stack)
    addons = [r for r in plan.by_type("aws:eks/addon:Addon") if r.inputs.get("addonName") == AGENT]
    assert len(addons) == 1
    assert any("nodeGroup:NodeGroup" in urn for urn in addons[0].depends_on)  # the system nodes run its pods
    repaired = [r for r in plan.by_type("aws:eks/nodeGroup:NodeGroup") if (r.inputs.get("nodeRepairConfig") or {})
                .get("enabled")]
    assert repaired


def test_an_unpinned_agent_is_refused_before_anything_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    import stages.config
    from stack_config import ConfigError
    from verify import plan as gtp_plan

    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)
    monkeypatch.setattr(stages.config, "find_placeholders", lambda config: iter(()))
    partial = gtp_plan.Plan(project="gtp", stack="prod")
    with pytest.raises(ConfigError, match=r"kubernetesVersion: unpinned — '1\.34': the node groups enable EKS node "
                                          r"repair, which sees GPU faults only through the eks-node-monitoring-agent "
                                          r"add-on, and catalog/versions\.py EKS_NODE_MONITORING_AGENT pins no build"):
        gtp_plan.run("prod", into=partial)
    assert partial.resources == []
    # Once a build is recorded: no refusal, and the add-on is pinned to it.
    monkeypatch.setattr(versions, "EKS_NODE_MONITORING_AGENT", {"1.34": "v9.9.9-eksbuild.9"})
    plan = gtp_plan.run("prod")
    assert stages.config.unpinned_build_inputs(plan.config) == []
    addon = next(r for r in plan.by_type("aws:eks/addon:Addon") if r.inputs.get("addonName") == AGENT)
    assert addon.inputs["addonVersion"] == "v9.9.9-eksbuild.9"


def test_no_agent_build_is_invented() -> None:
    """No AWS page found lists its builds per Kubernetes version (catalog/versions.py says where to get them)."""
    assert set(versions.EKS_NODE_MONITORING_AGENT) == set(versions.SUPPORTED_KUBERNETES_VERSIONS)
    assert all(build is None or (build.startswith("v") and "-eksbuild." in build)
               for build in versions.EKS_NODE_MONITORING_AGENT.values())


def _training_pods(stack: str):
    plan = plan_stack(stack)
    objects = gtp_cluster.render_cluster(plan)
    pods = [p for p in expand_pods(objects, plan) if p.owner.split()[0] in TRAINING_KINDS
            and p.namespace.startswith("training-")]
    groups = [g for g in nodes.eks_groups(plan) if g.role == "gpu"]
    return pods, groups


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_training_pods_stay_off_a_node_repair_cordoned(stack: str) -> None:
    pods, groups = _training_pods(stack)
    assert pods and groups
    for group in groups:
        cordoned = copy.deepcopy(group)
        cordoned.taints = [*group.taints, CORDONED]
        for pod in pods:
            if not placement_misses(pod, group):  # it may land on the healthy group's nodes...
                assert placement_misses(pod, cordoned) == [
                    "taint node.kubernetes.io/unschedulable=:NoSchedule not tolerated"], pod.owner  # ...not there
    # A pod tolerating every taint would land on the cordoned node: the check can fail.
    lenient = copy.deepcopy(pods[0])
    lenient.pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    cordoned = copy.deepcopy(groups[0])
    cordoned.taints = [*groups[0].taints, CORDONED]
    assert not [m for m in placement_misses(lenient, cordoned) if m.startswith("taint")]
