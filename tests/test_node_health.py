"""Node health on EKS: the node monitoring agent add-on beside node repair, at EKS's default build unless the stack
pins one, and training pods kept off the nodes repair cordons (issue 31 item 1, issue 41 blocker 1)."""

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


def test_the_agent_deploys_unpinned_with_eks_default_build(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path) -> None:
    """Issue 41 blocker 1: the add-on's builds are on record only in DescribeAddonVersions, so a stack deploys it at
    EKS's default build for its Kubernetes version, looked up at `up` (it was refused before anything was registered,
    with no way forward but editing the catalog)."""
    import stages.config
    from verify import plan as gtp_plan

    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)  # the real engine's refusal gates
    monkeypatch.setattr(stages.config, "find_placeholders", lambda config: iter(()))
    calls: list[dict] = []
    answer = gtp_plan._addon_version_answer
    monkeypatch.setattr(gtp_plan, "_addon_version_answer",
                        lambda arguments: calls.append(arguments) or answer(arguments))
    plan = gtp_plan.run("dev")
    addon = next(r for r in plan.by_type("aws:eks/addon:Addon") if r.inputs.get("addonName") == AGENT)
    assert addon.inputs["addonVersion"] == "eks-default-build-for-1.34"
    # EKS's default, not the newest build: the lookup is asked without `mostRecent` (terraform-provider-aws
    # addon_version_data_source.go findAddonVersionByTwoPartKey: DefaultVersion unless most_recent).
    assert [(c["addonName"], c["kubernetesVersion"], c.get("mostRecent")) for c in calls] == [(AGENT, "1.34", None)]
    # Every other add-on keeps the catalog's build.
    others = [r for r in plan.by_type("aws:eks/addon:Addon") if r.inputs.get("addonName") != AGENT]
    assert others and all(r.inputs["addonVersion"].startswith("v") and "-eksbuild." in r.inputs["addonVersion"]
                          for r in others)


def test_a_stack_pins_an_addon_build(tmp_path) -> None:
    from tests.conftest import plan_modified

    def pin(config):
        config["gtp:cluster"]["addonVersions"] = {AGENT: "v1.4.0-eksbuild.2", "coredns": "v1.12.1-eksbuild.2"}

    plan = plan_modified(tmp_path, "dev", pin)
    built = {r.inputs["addonName"]: r.inputs["addonVersion"] for r in plan.by_type("aws:eks/addon:Addon")}
    assert built[AGENT] == "v1.4.0-eksbuild.2"
    assert built["coredns"] == "v1.12.1-eksbuild.2"  # over the catalog's
    assert built["vpc-cni"] == versions.EKS_ADDONS["vpc-cni"]


@pytest.mark.parametrize(("pins", "message"), [
    ({"eks-node-monitor-agent": "v1.4.0-eksbuild.2"},
     r"cluster\.addonVersions\.eks-node-monitor-agent: 'eks-node-monitor-agent' is not an EKS add-on this platform "
     r"installs \(did you mean 'eks-node-monitoring-agent'\?\)"),
    ({AGENT: "1.4.0"}, r"cluster\.addonVersions\.eks-node-monitoring-agent: '1\.4\.0' is not an add-on build; "
                       r"allowed: one `aws eks describe-addon-versions --addon-name eks-node-monitoring-agent "
                       r"--kubernetes-version 1\.34` lists"),
])
def test_a_wrong_addon_pin_is_refused(tmp_path, pins: dict, message: str) -> None:
    from stack_config import ConfigError
    from tests.conftest import plan_modified

    with pytest.raises(ConfigError, match=message):
        plan_modified(tmp_path, "dev", lambda config: config["gtp:cluster"].__setitem__("addonVersions", pins))


def test_addon_pins_are_refused_where_no_eks_add_on_is_installed(tmp_path) -> None:
    from stack_config import ConfigError
    from tests.conftest import plan_modified

    with pytest.raises(ConfigError, match=r"cluster\.addonVersions"):
        plan_modified(tmp_path, "edge", lambda config: config["gtp:cluster"].__setitem__(
            "addonVersions", {AGENT: "v1.4.0-eksbuild.2"}))


def test_the_catalog_invents_no_agent_build() -> None:
    """No AWS page lists the agent's builds per Kubernetes version: the catalog leaves it to EKS's default."""
    assert AGENT in versions.EKS_DEFAULT_BUILD_ADDONS
    assert all(versions.eks_addon_version(AGENT, minor) is None for minor in versions.SUPPORTED_KUBERNETES_VERSIONS)


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
