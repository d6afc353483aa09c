"""Config validation of GPU sharing: each rule's message names the key, the bad value and the fix."""

from __future__ import annotations

import re

import pytest

from stack_config import ConfigError


def test_checked_in_stacks_are_valid(config_of):
    assert config_of("dev").sharing_for("g6").replicas == 4
    assert config_of("prod").sharing_for("h100").mode == "none"
    assert config_of("edge").sharing_for("orin").mode == "none"


def test_whole_gpu_workload_on_a_shared_group_is_rejected(config_of):
    """A shared group's slices are renamed nvidia.com/gpu.shared: its nodes offer no whole nvidia.com/gpu."""
    def edit(raw):
        raw["workloads"]["mnist"]["gpuResource"] = "whole"

    with pytest.raises(ConfigError, match=re.escape("workloads.mnist.gpuResource: 'whole' requests nvidia.com/gpu, but "
                                                    "node group 'g6' shares its GPUs (mps)")):
        config_of("dev", edit)


def test_whole_gpu_workload_on_a_time_sliced_group_is_rejected(config_of):
    def edit(raw):
        raw["workloads"]["mnist"]["gpuResource"] = "whole"
        raw["gpu"]["sharing"] = {"mode": "time-slicing", "replicas": 2}

    with pytest.raises(ConfigError, match=r"workloads\.mnist\.gpuResource: 'whole' .* \(time-slicing\)"):
        config_of("dev", edit)


def test_edge_with_mps_and_whole_gpu_workers_is_rejected(config_of):
    def edit(raw):
        raw["gpu"]["sharing"] = {"mode": "mps", "replicas": 2}

    with pytest.raises(ConfigError, match=r"workloads\.edge-finetune\.gpuResource: 'whole' requests nvidia\.com/gpu, "
                                          r"but node group 'orin' shares its GPUs \(mps\)"):
        config_of("edge", edit)


@pytest.mark.parametrize("replicas", [1, 49, 100])
def test_mps_replicas_outside_2_to_48(config_of, replicas):
    def edit(raw):
        raw["gpu"]["sharing"]["replicas"] = replicas

    with pytest.raises(ConfigError, match=re.escape(f"gpu.sharing.replicas: {replicas} is outside 2..48 "
                                                    "(MPS clients per GPU)")):
        config_of("dev", edit)


@pytest.mark.parametrize("replicas", [2, 48])
def test_mps_replicas_bounds_are_allowed(config_of, replicas):
    def edit(raw):
        raw["gpu"]["sharing"]["replicas"] = replicas

    assert config_of("dev", edit).gpu.sharing.replicas == replicas


def test_per_group_mps_replicas_are_checked_with_their_path(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["g6"]["sharing"] = {"mode": "mps", "replicas": 64}

    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.g6\.sharing\.replicas: 64 is outside 2\.\.48"):
        config_of("dev", edit)


def test_time_slicing_needs_two_replicas(config_of):
    def edit(raw):
        raw["gpu"]["sharing"] = {"mode": "time-slicing", "replicas": 1}

    with pytest.raises(ConfigError, match=r"gpu\.sharing\.replicas: 1 must be at least 2 for time-slicing"):
        config_of("dev", edit)


def test_replicas_without_a_sharing_mode(config_of):
    def edit(raw):
        raw["gpu"]["sharing"] = {"mode": "none", "replicas": 3}

    with pytest.raises(ConfigError, match=r"gpu\.sharing\.replicas: 3 has no effect here: only applies where "
                                          r"gpu\.sharing\.mode is 'mps' or 'time-slicing' \(here gpu\.sharing\.mode is "
                                          r"'none'\)"):
        config_of("prod", edit)


def test_mps_on_mig_devices_is_rejected(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["g6"]["migStrategy"] = "single"

    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.g6\.migStrategy: 'single' with MPS sharing: MPS is not "
                                          r"supported on MIG devices; use migStrategy none or sharing time-slicing"):
        config_of("dev", edit)


def test_mig_with_time_slicing_is_allowed(config_of):
    def edit(raw):
        raw["gpu"]["sharing"] = {"mode": "time-slicing", "replicas": 2}
        raw["gpuNodeGroups"]["g6"]["migStrategy"] = "mixed"

    assert config_of("dev", edit).gpu_node_groups["g6"].mig_strategy == "mixed"


def test_groups_sharing_one_device_plugin_config_must_agree_on_mig(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["a100"]["migStrategy"] = "single"

    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.a100\.migStrategy: 'single' differs from node group "
                                          r"'h100' \('none'\), which shares device-plugin config 'none'"):
        config_of("prod", edit)


def test_shared_slices_for_a_multi_rank_workload_are_rejected(config_of):
    def edit(raw):
        raw["workloads"]["mnist"]["numNodes"] = 2

    with pytest.raises(ConfigError, match=r"workloads\.mnist\.gpuResource: 'shared' with 2 ranks: NCCL refuses two "
                                          r"ranks on one physical GPU, even under MPS"):
        config_of("dev", edit)


def test_shared_slices_need_sharing_on_the_group(config_of):
    def edit(raw):
        raw["workloads"]["gpt-pretrain"]["gpuResource"] = "shared"
        raw["workloads"]["gpt-pretrain"]["elastic"] = {"minNodes": 1, "maxNodes": 1}
        raw["workloads"]["gpt-pretrain"]["autoscaling"] = {"mode": "none"}
        raw["workloads"]["gpt-pretrain"]["gpusPerNode"] = 1

    with pytest.raises(ConfigError, match=r"workloads\.gpt-pretrain\.gpuResource: 'shared' needs GPU sharing on node "
                                          r"group 'h100' \(sharing mode is 'none'\)"):
        config_of("prod", edit)


def test_bottlerocket_with_sharing_is_rejected(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["g6"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"

    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.g6\.amiType: 'BOTTLEROCKET_x86_64_NVIDIA' runs its own "
                                          r"device plugin, so sharing 'mps' can't be configured here"):
        config_of("dev", edit)


def test_bottlerocket_without_sharing_is_allowed(config_of):
    def edit(raw):
        raw["gpuNodeGroups"]["a100"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"

    assert config_of("prod", edit).gpu_node_groups["a100"].ami_type == "BOTTLEROCKET_x86_64_NVIDIA"
