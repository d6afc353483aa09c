"""kwok Nodes from the stack's node groups, derived by the simulator's own code (verify/simulate/nodes.py
`node_groups`: labels incl. NFD/GFD's, taints, allocatable per instance type from catalog/, the device plugins'
extended resources under the stack's sharing config, EFA interfaces) so that there is one source for what a node is.

Rules (each a stand-in for something kwok does not run):
- the device plugins' resources (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, `vpc.amazonaws.com/efa`) are written on
  the Node directly, as the kubelet would after the plugins registered (no device plugin runs under kwok);
- GFD's and NFD's labels are on the Node from the start (their DaemonSets' pods run under kwok but do nothing);
- every group has its `maxSize` nodes from the start: they stand for the cluster-autoscaler's scale-up, which is not
  run here (the `scale-from-zero` check stays the simulator's). At min size the real scheduler packs differently:
  on dev, one system node cannot hold both Kueue replicas besides the other system pods (the autoscaler's job);
- an adopted cluster's groups (`cluster.mode: existing`) have unknown CPU/memory/disk/pods: they get `UNBOUNDED`;
- a label whose value is the catalog's `<unknown>` (e.g. the EKS node group's name) is left off (not a valid value),
  except the EC2 network-topology labels (`topology.k8s.aws/network-node-layer-*`, catalog/node_labels.py), whose
  values only EC2 knows: every node of a group gets `<group>-l<n>`, one domain per layer per group, which stands
  for the AWS cloud provider's DescribeInstanceTopology answer and is the simulator's assumption (a gang placed in
  one domain at its largest size: verify/simulate/gangs.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

from catalog import node_labels as nl
from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from verify.simulate.nodes import NodeGroup

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
UNBOUNDED = {"cpu": 256.0, "memory": float(2**40), "ephemeral-storage": float(2**42), "pods": 250.0}
"""An adopted cluster's unknown capacity (the simulator's `inf`)."""
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def quantity(name: str, value: float) -> str:
    if name == "cpu":
        return f"{round(value * 1000)}m"
    return str(int(value))


def node_count(group: NodeGroup) -> int:
    return max(group.max_size, group.min_size, 1)


def node_objects(groups: list[NodeGroup]) -> list[dict[str, Any]]:
    """One kwok Node per node (`node_count` per group), named `<group>-<i>`."""
    nodes = []
    for group in groups:
        allocatable = {name: (UNBOUNDED.get(name, 0.0) if math.isinf(value) else value)
                       for name, value in group.allocatable.items()}
        capacity = dict(allocatable)
        facts = GPU_INSTANCE_TYPES.get(group.instance_types[0]) if group.instance_types else None
        facts = facts or (CPU_INSTANCE_TYPES.get(group.instance_types[0]) if group.instance_types else None)
        if facts is not None:
            # capacity is the machine; allocatable is what nodeadm's reservations leave (catalog/node_allocatable.py)
            capacity["cpu"] = float(facts.vcpus)
            capacity["memory"] = float(facts.memory_gib * 2**30)
        for index in range(node_count(group)):
            name = f"{group.name}-{index}"
            labels = {key: value for key, value in group.labels.items()
                      if value != nl.UNKNOWN and _VALUE.match(str(value)) and len(str(value)) <= 63}
            labels.update(topology_values(group))
            labels["kubernetes.io/hostname"] = name
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": [dict(t) for t in group.taints]},
                "status": {"capacity": {k: quantity(k, v) for k, v in sorted(capacity.items()) if v >= 0},
                           "allocatable": {k: quantity(k, v) for k, v in sorted(allocatable.items()) if v >= 0}}})
    return nodes


def topology_values(group: NodeGroup) -> dict[str, str]:
    """The EC2 network-topology labels of the group's nodes with a stand-in value (module docstring)."""
    return {key: f"{group.name}-l{key.removeprefix(nl.NETWORK_NODE_LAYER_PREFIX)}"[:63]
            for key in group.labels if key.startswith(nl.NETWORK_NODE_LAYER_PREFIX)}


def group_of(node: dict[str, Any]) -> str:
    return str(node["metadata"]["name"]).rsplit("-", 1)[0]
