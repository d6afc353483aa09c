"""ClusterAccess: the Kubernetes provider every in-cluster resource uses, for EKS or an existing cluster."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s


@dataclass
class ClusterAccessArgs:
    kubeconfig: pulumi.Input[str] | None = None
    """Kubeconfig contents (a secret). None with `context` uses the deployer's own kubeconfig."""
    context: str | None = None
    """Context name within the kubeconfig."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The cluster, its node groups and the deployer's access entry: every in-cluster resource is then
    created after them and deleted before them, while the API and the deployer's permissions still exist."""


class ClusterAccess(pulumi.ComponentResource):
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:ClusterAccess", name, None, opts)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.kubeconfig,
            context=args.context,
            # Server-side apply: field ownership is explicit, and conflicts with controllers surface as errors.
            enable_server_side_apply=True,
            # `deleteUnreachable` is deliberately left unset (false by default): the provider lets an explicit
            # provider input override the PULUMI_K8S_DELETE_UNREACHABLE environment variable (pulumi-kubernetes
            # provider/pkg/provider/provider.go, kubeProvider.Configure: `deleteUnreachable := func()` reads
            # vars["kubernetes:config:deleteUnreachable"] first; read at the upstream default branch of 2026-07, not
            # at the v4.34.2 tag), so setting it false here would take away
            # `python -m tools.destroy --delete-unreachable`, the way to finish destroying a stack whose cluster is
            # already gone. It only changes what a destroy does with an unreachable cluster.
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.register_outputs({})
