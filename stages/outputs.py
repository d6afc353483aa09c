"""Outputs stage: what `pulumi stack output` shows (names, endpoints, the image by digest, how to watch the job)."""

from __future__ import annotations

import pulumi

from cluster_targets import Cluster
from stack_config import StackConfig
from stages.workloads import Workloads


def export_outputs(config: StackConfig, cluster: Cluster, image_ref: pulumi.Input[str], workloads: Workloads) -> None:
    for name, value in cluster.exports.items():
        pulumi.export(name, value)
    pulumi.export("gpuNodeGroups", {
        name: {"gpusPerNode": config.node_facts(name).num_gpus, "gpuModel": config.node_facts(name).gpu_model,
               "maxNodes": group.max_size, "maxGpus": config.node_facts(name).num_gpus * group.max_size}
        for name, group in config.gpu_node_groups.items()
    })
    pulumi.export("imageRef", image_ref)
    for name, value in workloads.exports.items():
        pulumi.export(name, value)
