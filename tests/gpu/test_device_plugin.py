"""Pure spec functions of the device plugins: sharing configs (golden YAML), affinity, tolerations, values."""

from __future__ import annotations

import pytest
import yaml

from catalog import versions
from components.efa_device_plugin import efa_plugin_values
from components.nvidia_device_plugin import (
    SharingSpec,
    device_plugin_values,
    gpu_node_affinity,
    merge_tolerations,
    privileged_namespace_labels,
    sharing_config_map,
)
from conventions.names import DEVICE_PLUGIN_NAMESPACE
from policy.gtp_policy.rules_kubernetes import DEVICE_PLUGIN_NAMESPACE as POLICY_PRIVILEGED_NAMESPACE
from stages.gpu import efa_node_groups, plugin_node_groups, sharing_specs

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize(("spec", "golden"), [
    (SharingSpec("none", 1), "none.yaml"),
    (SharingSpec("mps", 4), "mps-4.yaml"),
    (SharingSpec("mps", 2), "mps-2.yaml"),
    (SharingSpec("time-slicing", 3), "time-slicing-3.yaml"),
    (SharingSpec("time-slicing", 2, "mixed"), "time-slicing-2-mig-mixed.yaml"),
])
def test_sharing_config_golden(spec, golden, assert_golden):
    config_map = sharing_config_map([spec])
    assert list(config_map) == [spec.name]
    assert_golden(golden, config_map[spec.name])


def test_shared_slices_are_renamed_and_single():
    document = yaml.safe_load(sharing_config_map([SharingSpec("mps", 4)])["mps-4"])
    mps = document["sharing"]["mps"]
    assert document["version"] == "v1"
    assert mps["renameByDefault"] is True
    assert mps["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert "sharing" not in yaml.safe_load(sharing_config_map([SharingSpec("none", 1)])["none"])


def test_conflicting_configs_under_one_name_are_refused():
    with pytest.raises(ValueError, match="two node groups use device-plugin config 'none' with different settings"):
        sharing_config_map([SharingSpec("none", 1, "none"), SharingSpec("none", 1, "single")])


def test_sharing_specs_always_include_the_default(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["g6"]["sharing"] = {"mode": "time-slicing", "replicas": 2}

    config = config_of("dev", edit)
    assert sorted(spec.name for spec in sharing_specs(config, ["g6"])) == ["mps-4", "time-slicing-2"]


def test_affinity_collapses_node_group_labels():
    affinity = gpu_node_affinity({"b": {"gtp.dev/node-group": "b"}, "a": {"gtp.dev/node-group": "a"}})
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gtp.dev/node-group", "operator": "In", "values": ["a", "b"]}]}]


def test_affinity_of_existing_cluster_selectors_is_one_term_per_selector():
    affinity = gpu_node_affinity({
        "orin": {"nvidia.com/gpu.present": "true"},
        "l4": {"nvidia.com/gpu.present": "true", "site/rack": "r2"},
        "same": {"nvidia.com/gpu.present": "true"},
    })
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
                              {"key": "site/rack", "operator": "In", "values": ["r2"]}]},
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]},
    ]


def test_merge_tolerations_drops_duplicates_in_order():
    other = {"key": "dedicated", "operator": "Exists"}
    assert merge_tolerations([GPU_TOLERATION], [other, GPU_TOLERATION]) == [GPU_TOLERATION, other]


def test_device_plugin_values():
    affinity = gpu_node_affinity({"g6": {"gtp.dev/node-group": "g6"}})
    values = device_plugin_values({"mps-4": "x"}, "mps-4", affinity, [GPU_TOLERATION], install_nfd=True)
    assert values["config"] == {"map": {"mps-4": "x"}, "default": "mps-4"}
    assert values["gfd"] == {"enabled": True}
    assert values["nfd"]["enabled"] is True
    assert GPU_TOLERATION in values["tolerations"]
    assert GPU_TOLERATION in values["nfd"]["worker"]["tolerations"]
    assert values["affinity"] == affinity
    assert device_plugin_values({}, "none", affinity, [], install_nfd=False)["nfd"]["enabled"] is False


def test_device_plugin_namespace_is_the_one_the_policy_allows_to_be_privileged():
    labels = privileged_namespace_labels()
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert POLICY_PRIVILEGED_NAMESPACE.search(DEVICE_PLUGIN_NAMESPACE)
    assert "nvidia-device-plugin" in versions.NVIDIA_DEVICE_PLUGIN.chart  # the policy finds the sharing config by it


def test_bottlerocket_groups_are_not_served(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["a100"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"

    served, skipped = plugin_node_groups(config_of("prod", edit))
    assert served == ["h100"]
    assert list(skipped) == ["a100"]
    assert "runs its own NVIDIA device plugin" in skipped["a100"]


def test_existing_cluster_groups_are_always_served(config_of):
    served, skipped = plugin_node_groups(config_of("edge"))
    assert (served, skipped) == (["orin"], {})


def test_efa_groups_and_values(config_of):
    assert efa_node_groups(config_of("prod")) == ["h100", "a100"]
    assert efa_node_groups(config_of("dev")) == []
    values = efa_plugin_values(["h100", "a100"], [GPU_TOLERATION])
    assert values["supportedInstanceLabels"] == {"keys": ["gtp.dev/node-group"], "values": ["a100", "h100"]}
    assert values["tolerations"] == [GPU_TOLERATION]
    assert values["resources"]["requests"] == values["resources"]["limits"]
