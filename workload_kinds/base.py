"""The protocol every workload kind implements, and what the workloads stage hands it.

A workload kind is one way to run the stack's training: a Kubeflow PyTorchJob, a DLRover ElasticJob, Jobs that
KEDA starts from a queue... Each says which operators it needs, what its controller adds to the training
namespace (a pod label, a job-master pod, a Pod Security level), its own config checks, how it deploys from
the shared pod shape, how to find the pod templates in its custom resource (for Checkov and the simulation),
and how a user watches it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from components.training_operators import TrainingOperators
from components.training_pod import PodShape
from conventions.kubernetes import PodSecurityLevel
from conventions.names import Platform
from stack_config import Problem, StackConfig, WorkloadConfig
from stack_config.kinds import GeneratedName, KindTraits


@dataclass(frozen=True)
class JobMaster:
    """A pod the kind's controller creates for every job besides its workers (DLRover's job master)."""

    cluster_role: str
    """ClusterRole (installed with the operator) bound to the namespace's `default` ServiceAccount, which the
    master runs as."""
    operator: str
    """The operator that installs `cluster_role`; the namespace's RoleBinding waits for it."""


class _WorkloadNaming:
    """Pulumi names of one workload's resources (for both contexts)."""

    workload: WorkloadConfig
    only_workload: bool

    def resource_name(self, base: str) -> str:
        """The Pulumi name of the workload's resource `base` (`job`, `scaling`, ...): `<base>-<workload>`."""
        return f"{base}-{self.workload.name}"

    def opts(self, base: str, **kwargs: Any) -> pulumi.ResourceOptions:
        """Options of resource `base`: a stack with one workload aliases the name its release used (`base`
        alone), so upgrading keeps the running job instead of replacing it. Children named `<parent>-...`
        follow their parent's alias, the prefix renamed with it (Pulumi's own test of exactly this:
        pulumi/pulumi tests/integration/aliases/python/rename_component, `comp3-child` → `newcomp3-child`)."""
        aliases = [pulumi.Alias(name=base)] if self.only_workload else None
        return pulumi.ResourceOptions(aliases=aliases, **kwargs)


@dataclass
class WorkloadContext(_WorkloadNaming):
    """What a kind deploys with: the stack config, the one pod shape, and what the stage built before it."""

    config: StackConfig
    workload: WorkloadConfig
    """The workload to deploy (an entry of `config.workloads`; its `name` is the key)."""
    shape: PodShape
    """The training pod every replica of the workload runs."""
    operators: TrainingOperators
    """Installed operators; `operators.installed[name]` is what a custom resource must depend on."""
    provider: k8s.Provider
    ready: list[pulumi.Resource]
    """The namespace and its guard rails, the storage, the GPU readiness gate: created before the workload."""
    aws_opts: pulumi.ResourceOptions | None = None
    """The AWS provider (EKS stacks), for kinds that create AWS resources (a queue)."""
    region: str = ""
    training_role: Any = None
    """The training pods' Pod Identity role (EKS), for kinds that grant it access to what they create."""
    only_workload: bool = True
    """The stack has this one workload (releases before `workloads` had exactly one, named without it)."""
    queue_labels: dict[str, str] = field(default_factory=dict)
    """Labels every job object the kind submits must carry so Kueue admits it (`kueue.x-k8s.io/queue-name`);
    empty when Kueue is off. Put them on the object Kueue's integration watches (the PyTorchJob, the TrainJob,
    the ScaledJob whose labels KEDA copies onto its Jobs), not on the pod template."""


@dataclass
class Deployment:
    """What a deployed workload tells its users."""

    watch: dict[str, str]
    """kubectl (or aws) commands that follow the workload, exported as `watch`."""
    exports: dict[str, Any] = field(default_factory=dict)
    """Extra stack outputs (e.g. a queue URL)."""


class WorkloadKind(ABC):
    """One way to run training, on one platform (`KubernetesWorkloadKind`, `SwarmWorkloadKind`)."""

    name: ClassVar[str]
    """The kind's name: the value of `workloads.<name>.kind` (or, for `scaledjob`, of its `autoscaling.mode`)."""
    platform: ClassVar[Platform]
    """What must run it: the cluster target's platform has to match."""
    entrypoints: ClassVar[frozenset[str]] = frozenset({"train"})
    """Values of `workloads.<name>.entrypoint` the kind can run."""
    own_image: ClassVar[bool] = True
    """Can run a team's own image and command (`workloads.<name>.image`)."""
    generated_names: ClassVar[tuple[GeneratedName, ...]] = ()
    """Names derived from the workload's name by what runs it (stack_config/kinds.py `GeneratedName`): the longest of
    each kind of object its operator creates, with the upstream source."""

    @property
    def traits(self) -> KindTraits:
        """What the config rules may ask of this kind (stack_config/kinds.py), registered under `name` by the
        registry, so no rule below the kinds compares a kind's name."""
        return KindTraits(generated_names=self.generated_names)

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        """Config problems specific to this kind for one workload at key path `path` (run with every other rule,
        before anything is registered)."""
        return iter(())


@dataclass(frozen=True)
class TemplateUpdate:
    """What a changed pod template (a container: its image, command, env, resources) does to a running job of a
    kind: `make plan-diff` prints it beside the change, under destructive changes when the job restarts."""

    restarts: bool
    """The running job is stopped and started again: the steps since its last complete checkpoint are lost."""
    effect: str
    """What happens, in words a reviewer reads, with the upstream source."""
    needs_queue: bool = False
    """Only so when Kueue admits the job (its resource carries `kueue.x-k8s.io/queue-name`); otherwise unknown."""


KUEUE_REQUEUE = TemplateUpdate(
    restarts=True, needs_queue=True,
    effect="Kueue stops the running job and requeues it: a running job's pod sets must equal its Workload's "
           "(pod counts and containers compared with DeepEqual, kueue v0.19.2 pkg/util/equality/podset.go:41-63), and "
           "one that no "
           "longer does is stopped with NoMatchingWorkload (pkg/controller/jobframework/reconciler.go:1103). Once "
           "admitted again its pods start with the new template and resume from the last complete checkpoint: the "
           "steps since are lost")
"""The one policy for a new image (or any container change) on a running gang Kueue admits: a flagged restart from
its last checkpoint (docs/deploy.md, "A new image")."""


class KubernetesWorkloadKind(WorkloadKind):
    """A kind whose controller runs training pods. Subclasses set the class attributes and implement `deploy`
    and `pod_templates`."""

    platform: ClassVar[Platform] = "kubernetes"
    resource_kind: ClassVar[str]
    """Kind of the custom resource it creates (`PyTorchJob`)."""
    template_kinds: ClassVar[frozenset[str]] = frozenset()
    """Other custom resource kinds whose `pod_templates` hold this kind's pods (Trainer's ClusterTrainingRuntime)."""
    operators: ClassVar[frozenset[str]]
    """Operators it needs installed, by name: catalog/versions.py `OPERATOR_MANIFESTS`, or `keda`."""
    kueue_integration: ClassVar[str | None] = None
    """The Kueue integration (`integrations.frameworks` of Kueue's config) that admits its jobs; None when Kueue
    has none for it (then a stack that runs it turns Kueue off)."""
    pod_label: ClassVar[str]
    """Label the controller puts on every pod of a job (value: the job's name); NetworkPolicies select by it."""
    pod_security: ClassVar[PodSecurityLevel] = "restricted"
    """Pod Security level the training namespace must enforce for the controller's pods to be admitted."""
    job_master: ClassVar[JobMaster | None] = None
    keda_reads_aws: ClassVar[bool] = False
    """KEDA's operator reads an AWS service (a queue) for this kind: it gets a Pod Identity role."""
    keda_scales: ClassVar[bool] = False
    """`autoscaling.mode` can scale it: a ScaledObject resizes its Worker replicas, a ScaledJob runs Jobs of its
    pod shape."""
    readiness_bounds_rendezvous: ClassVar[bool] = False
    """Without Kueue, its multi-node jobs' workers wait `gpu.readinessTimeoutSeconds` for their rendezvous host."""
    clean_pod_policy: ClassVar[bool] = False
    """Its resource has runPolicy.cleanPodPolicy (`workloads.<name>.cleanPodPolicy` applies)."""
    template_update: ClassVar[TemplateUpdate | None] = None
    """What a changed container in its pod templates does to a running job of this kind; None: not known here
    (plan-diff says so rather than calling the change harmless)."""
    immutable_paths: ClassVar[tuple[str, ...]] = ()
    """Paths of its resource the API server refuses to change (the CRD's `self == oldSelf` rules): the kind
    deploys it with `replace_on_changes` on them (and delete-before-replace, its name being fixed), so a change
    there replaces the job instead of failing `up`; plan-diff and `make cluster-test`'s day two read them too."""

    @property
    def traits(self) -> KindTraits:
        return KindTraits(operators=self.operators, kueue_admits=self.kueue_integration is not None,
                          keda_scales=self.keda_scales, readiness_bounds_rendezvous=self.readiness_bounds_rendezvous,
                          clean_pod_policy=self.clean_pod_policy, generated_names=self.generated_names)

    @abstractmethod
    def deploy(self, context: WorkloadContext) -> Deployment:
        """Register the workload's resources and say how to watch it. Resource names are part of every live
        stack's state (a renamed resource is replaced), so each kind keeps the names it was released with."""

    @abstractmethod
    def pod_templates(self, body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """Role → pod template of every replica in one of this kind's custom resources."""

    def pod_counts(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Role → the number of pods of one of this kind's custom resources, as Kueue counts its pod sets (a change
        of one requeues a running admitted job like a container change: kueue v0.19.2
        pkg/util/equality/podset.go:55-57). Empty where the kind's counts live elsewhere."""
        return {}

    def with_pod_count(self, body: Mapping[str, Any], role: str, count: int) -> dict[str, Any]:
        """A copy of `body` whose role `role` (a key of `pod_counts`) runs `count` pods."""
        raise NotImplementedError(f"{self.resource_kind} names no pod counts")

    def containers(self, body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """Every container-like mapping of `body` that names an image (its pod templates' init and main
        containers, and whatever else the kind overrides them with): what a new image changes."""
        return [container for template in self.pod_templates(body).values()
                for container in [*(((template or {}).get("spec") or {}).get("initContainers") or []),
                                  *(((template or {}).get("spec") or {}).get("containers") or [])]]


@dataclass
class SwarmContext(_WorkloadNaming):
    """What a Swarm kind deploys with."""

    config: StackConfig
    workload: WorkloadConfig
    image: pulumi.Input[str]
    """The training image, by digest."""
    provider: Any
    """The Swarm manager's `docker.Provider`."""
    constraints: list[str]
    """Placement constraints selecting the workload's GPU servers."""
    gpus_per_node: int
    registry_auth: dict[str, pulumi.Input[str]] | None = None
    secrets: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    only_workload: bool = True


class SwarmWorkloadKind(WorkloadKind):
    """A kind that runs training as Docker Swarm services."""

    platform: ClassVar[Platform] = "swarm"

    @abstractmethod
    def deploy(self, context: SwarmContext) -> Deployment:
        """Register the workload's services and say how to watch them (resource names are state: keep them)."""
