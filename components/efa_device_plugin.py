"""EfaDevicePlugin: advertises EFA interfaces (`vpc.amazonaws.com/efa`) on EFA node groups (p4d/p5).

Upstream chart: `catalog.versions.EFA_DEVICE_PLUGIN` (aws/eks-charts `aws-efa-k8s-device-plugin`). The plugin
needs hostNetwork and hostPath (`/var/lib/kubelet/device-plugins`, `/dev/infiniband`), so it is installed
into the privileged device-plugin namespace created by `NvidiaDevicePlugin`.
Docs: https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from catalog import versions
from components.helm import pinned_release
from conventions.names import NODE_GROUP_LABEL

RELEASE_NAME = "aws-efa-k8s-device-plugin"


def efa_plugin_values(groups: list[str], node_tolerations: list[Mapping[str, str]]) -> dict[str, Any]:
    """Helm values of the aws-efa-k8s-device-plugin chart.

    The chart builds its required node affinity from `supportedInstanceLabels` (by default: a list of EFA
    instance types). Selecting our node-group label instead pins the plugin to exactly the EFA groups, and new
    instance types need no chart update.
    """
    return {
        "supportedInstanceLabels": {"keys": [NODE_GROUP_LABEL], "values": sorted(groups)},
        "tolerations": [dict(t) for t in node_tolerations],
        # requests == limits (Guaranteed QoS) for a system-node-critical DaemonSet.
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"cpu": "10m", "memory": "20Mi"}},
    }


@dataclass
class EfaDevicePluginArgs:
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    namespace: pulumi.Input[str]
    """The privileged device-plugin namespace (its name output, so the release waits for it)."""
    node_groups: list[str]
    """EFA node groups, selected by the `gtp.dev/node-group` label."""
    tolerations: list[dict[str, str]] = field(default_factory=list)
    """Tolerations for those groups' taints (the GPU taint)."""


class EfaDevicePlugin(pulumi.ComponentResource):
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:gpu:EfaDevicePlugin", name, None, opts)
        chart = versions.EFA_DEVICE_PLUGIN
        self.release = pinned_release(
            f"{name}-release", chart, release_name=RELEASE_NAME, namespace=args.namespace,
            values=efa_plugin_values(args.node_groups, args.tolerations),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.register_outputs({})
