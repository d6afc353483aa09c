"""Facts derived from the whole stack config: what a workload's pods need."""

from __future__ import annotations

from stack_config.schema import StackConfig


def num_ranks(config: StackConfig) -> int:
    """Most ranks the workload can run with (pods x processes per pod)."""
    workload = config.workload
    pods = workload.elastic.max_nodes if workload.elastic else workload.num_nodes
    if config.autoscaling.mode == "scaledobject":
        pods = max(pods, config.autoscaling.max_replicas)
    return pods * gpus_per_pod(config)


def gpus_per_pod(config: StackConfig) -> int:
    workload = config.workload
    if workload.gpus_per_node is not None:
        return workload.gpus_per_node
    assert workload.node_group is not None
    return config.node_facts(workload.node_group).num_gpus
