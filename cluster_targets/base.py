"""The protocol every cluster target implements, and the `Cluster` it hands to the later stages."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pulumi
import pulumi_aws as aws
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.training_identity import TrainingIdentity
from conventions.names import Platform
from stack_config import Problem, StackConfig
from stack_config.rules import Rule
from stack_config.targets import TargetTraits


@dataclass
class AwsNetwork:
    """What an AWS-hosted cluster offers to things created next to it (file systems, queues)."""

    cluster_name: pulumi.Output[str]
    """The EKS cluster's name output (depending on it orders creation after the cluster)."""
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    private_subnet_keys: list[str]
    """What identifies each private subnet (its zone, or an adopted subnet's id), in order."""
    cluster_security_group_id: pulumi.Output[str]
    system_node_group: aws.eks.NodeGroup
    """Add-ons that run pods (CSI drivers) wait for it."""
    training_identity: TrainingIdentity
    """The artifacts bucket and the training pods' Pod Identity role."""


@dataclass
class Cluster:
    """A provisioned (or adopted) cluster, as the image, GPU and workload stages see it."""

    target: ClusterTarget
    provider: k8s.Provider | None
    """The Kubernetes provider of every in-cluster resource (None on a Swarm)."""
    aws_opts: pulumi.ResourceOptions
    """Options carrying the stack's AWS provider (empty when the stack creates nothing in AWS)."""
    system_node_selector: dict[str, str] | None = None
    """Labels of the nodes controllers and operators run on; None when the cluster has no such group."""
    aws: AwsNetwork | None = None
    """Set for a cluster in AWS."""
    exports: dict[str, Any] = field(default_factory=dict)
    """Stack outputs about the cluster (name, endpoint, kubeconfig...)."""
    docker_provider: docker.Provider | None = None
    """The Docker provider of a Swarm's manager (None on Kubernetes)."""
    platform_priority: pulumi.Resource | None = None
    """The `gtp-platform` PriorityClass (stages/cluster.py); what every release naming it depends on. None on a
    Swarm."""
    provisioning_crd: pulumi.Resource | None = None
    """The ProvisioningRequest CRD (components/cluster_autoscaler.py) where `kueue.atomicProvisioning` chose a
    flavor: Kueue's manager must start after it. None elsewhere."""

    @property
    def kubernetes(self) -> k8s.Provider:
        """The Kubernetes provider; only Kubernetes platforms have one (stages check `target.platform`)."""
        if self.provider is None:
            raise TypeError(f"cluster mode {self.target.mode!r} runs on {self.target.platform}, not Kubernetes")
        return self.provider


class ClusterTarget(ABC):
    """Where the stack's Kubernetes cluster comes from (`cluster.mode`)."""

    mode: ClassVar[str]
    """The value of `cluster.mode` that selects this target."""
    traits: ClassVar[TargetTraits]
    """What the config rules may ask of this target (stack_config/targets.py): registered under `mode` by the
    registry, so no rule below the targets compares a mode's name."""
    rules: ClassVar[tuple[Rule, ...]] = ()
    """Config rules only this target's stacks have, each with the top-level keys it reads (it runs only when they
    parsed, stack_config/rules.py `check_rules`); the registry runs them on this target's stacks alone."""

    @property
    def platform(self) -> Platform:
        """What runs the workloads; workload kinds declare the platform they run on."""
        return self.traits.platform

    @property
    def provisions_in_aws(self) -> bool:
        """Whether the target creates AWS resources (then the stack has an AWS provider)."""
        return self.traits.provisions_in_aws

    def check(self, config: StackConfig) -> Iterator[Problem]:
        """Config problems specific to this target (run with every other rule, before anything is registered)."""
        return iter(())

    def preflight(self, config: StackConfig) -> None:
        """Ask the cloud account what the stack file can't say (zone offerings, quotas), synchronously, before
        anything is registered; every problem in one `ConfigError`. Nothing to ask by default."""
        return None

    @abstractmethod
    def provision(self, config: StackConfig, aws_opts: pulumi.ResourceOptions) -> Cluster:
        """Register the cluster (or what adopting one needs) and return it."""

    @abstractmethod
    def node_selector(self, config: StackConfig, group: str) -> dict[str, str]:
        """Labels that select the nodes of GPU node group `group`."""

    @abstractmethod
    def tolerations(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        """Tolerations a pod needs to run on the nodes of `group`."""

    def node_taints(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        """The taints (key, value, Kubernetes effect) the target puts on the nodes of `group`, as a Kueue
        ResourceFlavor lists them; none unless the target creates the nodes."""
        return []

    def task_secrets(self, config: StackConfig) -> dict[str, str]:
        """Secret name → value the target hands to every training task (Swarm secrets); none on Kubernetes."""
        return {}
