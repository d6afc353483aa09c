"""Rules that span fields or sections. Each yields Problems with full key paths."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta

from catalog import compatibility, versions
from catalog.aws_regions import REGIONS
from catalog.eks_max_pods import MAX_PODS
from catalog.fsx_lustre import LUSTRE_DEPLOYMENTS
from catalog.gpu_instances import (
    DCGM_UNSUPPORTED_MODELS,
    GPU_INSTANCE_TYPES,
    JETSON_GPU_MODELS,
    JETSON_SHARING_MODES,
)
from catalog.node_allocatable import allocatable
from conventions.names import NVIDIA_RUNTIME_HANDLER, config_name
from conventions.quantities import cpu_cores, quantity_gib
from stack_config.applicability import check_applicability
from stack_config.consumers import CONSUMER_RULES
from stack_config.derived import (
    configured_pods,
    dcgm_exporter_enabled,
    gpus_per_pod,
    installed_parts,
    kueue_enabled,
    node_default_runtime,
    num_ranks,
    runtime_class_name,
)
from stack_config.kinds import KEDA_SCALED, kind_traits, kinds_where
from stack_config.problems import Problem, did_you_mean
from stack_config.schema import SharingConfig, StackConfig, WorkloadConfig
from stack_config.site_rules import RULES as SITE_RULES
from stack_config.storage_kinds import kinds_on, shared_by_pods
from stack_config.targets import traits_of

NAMESPACE = "gtp"
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
DIGEST_REFERENCE = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
CLOUDWATCH_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                             2922, 3288, 3653)
MPS_MAX_CLIENTS = 48  # NVIDIA MPS limit per GPU on compute capability >= 7.5 (device-plugin 0.20 docs)


# ---------------------------------------------------------------------------------------------------------
# Rules that span fields or sections. Each yields Problems with full key paths.
# ---------------------------------------------------------------------------------------------------------


Rule = tuple[Callable[[StackConfig], Iterable[Problem]], tuple[str, ...]]
"""A check and the top-level keys it reads: it runs only when every one of them parsed."""


def check_rules(config: StackConfig, failed: Iterable[str] = (), extra: Iterable[Rule] = (),
                partial: Iterable[str] = (), blocked: Iterable[str] = ()) -> list[Problem]:
    """Run every rule (the core ones here, then `extra`: the cluster targets' and workload kinds' own checks)
    whose sections all parsed (`failed` names the ones that didn't).

    A `partial` section parsed with its invalid fields (`blocked`, key paths) at their defaults: the rules of
    that section (the first it reads) still run, so independent problems come out together, and any problem
    they report about a blocked field, or naming one next to it, is dropped (the default caused it). Rules that
    only read a partial section from elsewhere don't run."""
    failed = set(failed)
    partial = set(partial)
    blocked = list(blocked)
    problems: list[Problem] = []
    for rule, needs in (*_RULES, *extra):
        if _waits_for(needs, failed, partial):
            continue
        problems.extend(p for p in rule(config) if not _caused_by_blocked(p, blocked))
    # Every field written where it has no effect (stack_config/applicability.py; it walks what parsed itself).
    # A key another rule already reported is left to that rule's more specific message, and a condition that
    # reads one (a wrong storage.kind) is not decided.
    reported = [problem.path for problem in problems]
    problems.extend(p for p in check_applicability(config, failed, [*blocked, *reported])
                    if not _caused_by_blocked(p, blocked))
    return problems


def _waits_for(needs: tuple[str, ...], failed: set[str], partial: set[str]) -> set[str]:
    """The sections a rule reading `needs` waits for: those that failed to parse, and partial ones it reads from
    elsewhere (their invalid fields stand at defaults)."""
    return failed.intersection(needs) | partial.intersection(needs[1:])


def skipped_rules(failed: Iterable[str] = (), extra: Iterable[Rule] = (), partial: Iterable[str] = ()
                  ) -> dict[str, set[str]]:
    """The rules `check_rules` did not run, by name, with the sections each waits for: the run says how many checks
    more will run once those parse, so that fixing what it reported is not mistaken for a clean stack."""
    failed, partial = set(failed), set(partial)
    skipped: dict[str, set[str]] = {}
    for rule, needs in (*_RULES, *extra):
        if waits := _waits_for(needs, failed, partial):
            skipped.setdefault(getattr(rule, "__name__", repr(rule)), set()).update(waits)
    return skipped


def _caused_by_blocked(problem: Problem, blocked: list[str]) -> bool:
    for path in blocked:
        if problem.path == path or problem.path.startswith((path + ".", path + "[")):
            return True
        parent, _, leaf = path.rpartition(".")
        if problem.path.rpartition(".")[0] == parent and re.search(rf"\b{re.escape(leaf)}\b", problem.message):
            return True
    return False


def _check_scalars(config: StackConfig) -> Iterator[Problem]:
    if config.kubernetes_version not in versions.SUPPORTED_KUBERNETES_VERSIONS:
        supported = versions.SUPPORTED_KUBERNETES_VERSIONS
        yield Problem("kubernetesVersion", f"{config.kubernetes_version!r} is not supported"
                                           f"{did_you_mean(config.kubernetes_version, supported, 0.8)}; allowed: "
                                           f"{', '.join(supported)}")
    if not DNS_LABEL.match(config.cluster_name) or len(config.cluster_name) > 40:
        yield Problem("namePrefix", f"{config.name_prefix!r} makes cluster name {config.cluster_name!r}, which "
                                    "must be a lowercase DNS label of at most 40 characters")
    if config.region not in REGIONS:
        yield Problem("region", f"{config.region!r} is not an AWS region{did_you_mean(config.region, REGIONS)}; "
                                f"allowed: {', '.join(REGIONS)}")


TAG_KEY_MAX = 128  # AWS tag limits (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html)
TAG_VALUE_MAX = 256
TAGS_MAX = 50
TAG_CHARS = re.compile(r"^[\w\s.:/=+\-@]*$")
PLATFORM_TAG_PREFIX = "gtp:"


def _check_tags(config: StackConfig) -> Iterator[Problem]:
    """The stack's tags go on every AWS resource (the provider's default tags), so AWS's rules apply here."""
    for key, value in config.tags.items():
        path = f"tags.{key}"
        if key.lower().startswith("aws:"):
            yield Problem(path, f"{key!r}: the 'aws:' prefix is reserved for AWS; use a key without it")
        elif key.lower().startswith(PLATFORM_TAG_PREFIX):  # IAM tag keys are case-insensitive
            yield Problem(path, f"{key!r}: the 'gtp:' prefix is the platform's own (project, stack, lifecycle); use "
                                "another key")
        if not 1 <= len(key) <= TAG_KEY_MAX:
            yield Problem(path, f"key of {len(key)} characters; allowed 1..{TAG_KEY_MAX}")
        if len(value) > TAG_VALUE_MAX:
            yield Problem(path, f"value of {len(value)} characters; allowed 0..{TAG_VALUE_MAX}")
        for what, text in (("key", key), ("value", value)):
            if not TAG_CHARS.match(text):
                yield Problem(path, f"{what} {text!r} has characters AWS tags don't allow; allowed: letters, "
                                    "digits, spaces and _ . : / = + - @")
    total = len(config.resource_tags())
    if total > TAGS_MAX:
        yield Problem("tags", f"{len(config.tags)} tags plus the platform's make {total}; AWS allows at most "
                              f"{TAGS_MAX} per resource")


def _check_cluster(config: StackConfig) -> Iterator[Problem]:
    cluster = config.cluster
    arn = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
    for key, roles in (("adminRoleArns", cluster.admin_role_arns), ("previewRoleArns", cluster.preview_role_arns)):
        for index, role in enumerate(roles):
            if not arn.match(role):
                yield Problem(f"cluster.{key}[{index}]", f"{role!r} is not an IAM role ARN")
    if cluster.deployer_role_arn is not None and not arn.match(cluster.deployer_role_arn):
        yield Problem("cluster.deployerRoleArn", f"{cluster.deployer_role_arn!r} is not an IAM role ARN")
    # EKS keeps one access entry per principal: a second `aws.eks.AccessEntry` for the same ARN fails at `up`
    # with ResourceInUseException, after everything before it was created.
    seen: dict[str, str] = {}
    if cluster.deployer_role_arn is not None:
        seen[cluster.deployer_role_arn] = "cluster.deployerRoleArn"
    listed = [(f"cluster.adminRoleArns[{index}]", role) for index, role in enumerate(cluster.admin_role_arns)]
    listed += [(f"cluster.previewRoleArns[{index}]", role) for index, role in enumerate(cluster.preview_role_arns)]
    for path, role in listed:
        if role in seen:
            yield Problem(path,
                          f"{role!r} is already {seen[role]} and would get a second EKS access entry (one per "
                          "principal); remove it here, the deployer is a cluster admin already"
                          if seen[role] == "cluster.deployerRoleArn" else
                          f"{role!r} is listed twice (also {seen[role]}); EKS allows one access entry per principal")
        else:
            seen[role] = path
    for addon, build in cluster.addon_versions.items():
        path = f"cluster.addonVersions.{addon}"
        if addon not in versions.EKS_MANAGED_ADDONS:
            yield Problem(path, f"{addon!r} is not an EKS add-on this platform installs"
                                f"{did_you_mean(addon, versions.EKS_MANAGED_ADDONS)}; allowed: "
                                f"{', '.join(versions.EKS_MANAGED_ADDONS)}")
        elif not isinstance(build, str) or not re.match(versions.EKS_ADDON_BUILD, build):
            yield Problem(path, f"{build!r} is not an add-on build; allowed: one `aws eks describe-addon-versions "
                                f"--addon-name {addon} --kubernetes-version {config.kubernetes_version}` lists, "
                                "like 'v1.4.0-eksbuild.2'")


def _check_network(config: StackConfig) -> Iterator[Problem]:
    network = config.network
    try:
        vpc = ipaddress.ip_network(network.vpc_cidr, strict=True)
        if vpc.version != 4 or not 16 <= vpc.prefixlen <= 20:
            yield Problem("network.vpcCidr", f"{network.vpc_cidr!r} must be an IPv4 /16../20 (room for "
                                             "private and public subnets in every zone)")
    except ValueError:
        yield Problem("network.vpcCidr", f"{network.vpc_cidr!r} is not a CIDR like '10.0.0.0/16'")


def check_sizes(path: str, min_size: int, desired: int | None, max_size: int) -> Iterator[Problem]:
    if max_size < min_size:
        yield Problem(f"{path}.maxSize", f"{max_size} is less than minSize {min_size}")
    if desired is not None and not min_size <= desired <= max_size:
        yield Problem(f"{path}.desiredSize", f"{desired} is outside minSize..maxSize ({min_size}..{max_size})")


def _check_node_groups(config: StackConfig) -> Iterator[Problem]:
    for name, group in config.gpu_node_groups.items():
        path = f"gpuNodeGroups.{name}"
        if not DNS_LABEL.match(name):
            yield Problem(path, f"name {name!r} must be a lowercase DNS label")
        # desiredSize is an EKS scaling setting; elsewhere it is refused as a key without effect (applicability)
        desired = group.desired_size if traits_of(config).provisions_in_aws else None
        yield from check_sizes(path, group.min_size, desired, group.max_size)


def _check_sharing(config: StackConfig) -> Iterator[Problem]:
    yield from _check_sharing_config("gpu.sharing", config.gpu.sharing)
    for name, group in config.gpu_node_groups.items():
        path = f"gpuNodeGroups.{name}"
        if group.sharing is not None:
            yield from _check_sharing_config(f"{path}.sharing", group.sharing)
        sharing = config.sharing_for(name)
        if sharing.mode == "mps" and group.mig_strategy != "none":
            yield Problem(f"{path}.migStrategy", f"{group.mig_strategy!r} with MPS sharing: MPS is not supported "
                                                 "on MIG devices; use migStrategy none or sharing time-slicing")
    # Groups with the same sharing use one named device-plugin config (conventions.names.config_name), and the
    # MIG strategy is part of that config, so they must agree on it.
    first_by_config: dict[str, str] = {}
    for name, group in config.gpu_node_groups.items():
        sharing = config.sharing_for(name)
        key = config_name(sharing.mode, sharing.replicas)
        first = first_by_config.setdefault(key, name)
        if config.gpu_node_groups[first].mig_strategy != group.mig_strategy:
            yield Problem(f"gpuNodeGroups.{name}.migStrategy",
                          f"{group.mig_strategy!r} differs from node group '{first}' "
                          f"({config.gpu_node_groups[first].mig_strategy!r}), which shares device-plugin config "
                          f"{key!r}; use the same migStrategy or a different sharing")


def _check_jetson(config: StackConfig) -> Iterator[Problem]:
    """Jetson GPUs: sharing only as verified there (catalog JETSON_SHARING_MODES: time-slicing, not MPS), and no
    dcgm-exporter (DCGM does not support Jetson: it would crash-loop on every Jetson node)."""
    for name, group in config.gpu_node_groups.items():
        if group.gpu_model not in JETSON_GPU_MODELS:
            continue
        sharing = config.sharing_for(name)
        if sharing.mode not in JETSON_SHARING_MODES:
            path = f"gpuNodeGroups.{name}.sharing.mode" if group.sharing is not None else "gpu.sharing.mode"
            yield Problem(path, f"{sharing.mode!r} is not verified on Jetson ({group.gpu_model}, node group '{name}'); "
                                f"use time-slicing to share its GPU, or none (allowed: "
                                f"{', '.join(JETSON_SHARING_MODES)})")
    jetson = sorted({g.gpu_model for g in config.gpu_node_groups.values() if g.gpu_model in DCGM_UNSUPPORTED_MODELS})
    if jetson and config.gpu.metrics.dcgm_exporter:  # explicitly on (its default is off there)
        yield Problem("gpu.metrics.dcgmExporter", f"true, but DCGM does not support Jetson ({', '.join(jetson)}); set "
                                                  "it to false (Prometheus still scrapes the trainer's own metrics)")


def _check_sharing_config(path: str, sharing: SharingConfig) -> Iterator[Problem]:
    # replicas with mode none has no effect: stack_config/applicability.py
    if sharing.mode == "mps" and not 2 <= sharing.replicas <= MPS_MAX_CLIENTS:
        yield Problem(f"{path}.replicas", f"{sharing.replicas} is outside 2..{MPS_MAX_CLIENTS} (MPS clients per GPU)")
    if sharing.mode == "time-slicing" and sharing.replicas < 2:
        yield Problem(f"{path}.replicas", f"{sharing.replicas} must be at least 2 for time-slicing")


# ECR repository names (CreateRepository, `repositoryName`): 2-256 characters, lowercase path components
# separated by '/', each letters/digits with single '.', '_' or '-' between them.
ECR_REPOSITORY_NAME = re.compile(r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$")


def _check_image(config: StackConfig) -> Iterator[Problem]:
    image = config.image
    if image.repository_name is not None and (not 2 <= len(image.repository_name) <= 256
                                              or not ECR_REPOSITORY_NAME.match(image.repository_name)):
        suggestion = re.sub(r"[^a-z0-9/]+", "-", image.repository_name.lower()).strip("-/") or "team/trainer"
        yield Problem("image.repositoryName", f"{image.repository_name!r} is not an ECR repository name: 2-256 "
                      "characters, lowercase letters and digits, separated by single '.', '_' or '-', path parts by "
                      f"'/'; e.g. {suggestion!r}")
    if image.reference is not None and not DIGEST_REFERENCE.match(image.reference):
        yield Problem("image.reference", f"{image.reference!r} must reference an image by digest "
                                         "('repo@sha256:<64 hex>'), never a mutable tag")
    for index, signed in enumerate(image.signed_digests):
        if not DIGEST_REFERENCE.match(signed):
            yield Problem(f"image.signedDigests[{index}]", f"{signed!r} must reference an image by digest "
                                                           "('repo@sha256:<64 hex>'), as cosign signed it")
    if not image.build and image.reference is None:
        yield Problem("image.reference", "is required when image.build is false")
    if image.build and image.reference is not None:
        yield Problem("image.build", "is true, but image.reference is set: build or reuse, not both")
    if image.registry == "existing":
        if not image.existing_registry:
            yield Problem("image.existingRegistry", "is required when image.registry is 'existing'")
        if image.build and config.registry_password is None:
            yield Problem("registryPassword", "is required to push to an existing registry: run `pulumi config "
                                              "set --secret registryPassword ...`")
    if image.base_image is not None and not DIGEST_REFERENCE.match(image.base_image):
        yield Problem("image.baseImage", f"{image.base_image!r} must pin the base by digest "
                                         "('repo:tag@sha256:<64 hex>'), never a mutable tag")
    models = {config.node_facts(name).gpu_model for name in valid_groups(config)}
    jetson = sorted(model for model in models if model in JETSON_GPU_MODELS)
    if jetson and len(jetson) < len(models):
        yield Problem("image.platform", f"one image cannot serve Jetson ({'/'.join(jetson)}, an L4T base) and server "
                                        f"GPUs ({'/'.join(sorted(models - set(jetson)))}, a CUDA base): split the "
                                        "stack")
    architectures = {config.node_facts(name).architecture for name in valid_groups(config)}
    wanted = image.platform.split("/")[1]
    if architectures and wanted not in architectures:
        yield Problem("image.platform", f"{image.platform!r} doesn't match the GPU nodes' architecture "
                                        f"{'/'.join(sorted(architectures))}")


def valid_groups(config: StackConfig) -> list[str]:
    """Groups whose facts can be computed (invalid ones are already reported)."""
    names = []
    for name, group in config.gpu_node_groups.items():
        if traits_of(config).node_facts == "config":  # adopted nodes: their facts come from config
            if group.gpus_per_node and group.architecture:
                names.append(name)
        elif group.instance_types and all(t in GPU_INSTANCE_TYPES for t in group.instance_types):
            names.append(name)
    return names


def each_workload(check: Callable[[StackConfig, WorkloadConfig, str], Iterable[Problem]]) -> Callable[
        [StackConfig], Iterator[Problem]]:
    """A rule over one workload (with its key path), run for every entry of `workloads`."""
    def rule(config: StackConfig) -> Iterator[Problem]:
        for name, workload in config.workloads.items():
            yield from check(config, workload, f"workloads.{name}")
    rule.__name__ = check.__name__
    return rule


def _check_workload(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    if not DNS_LABEL.match(workload.name):
        yield Problem(p, f"{workload.name!r} (the key) must be a lowercase DNS label (at most 63 of a-z, 0-9, '-')")
    if not config.gpu_node_groups:
        yield Problem("gpuNodeGroups", "is empty, but a workload is configured: add at least one GPU node group")
    if workload.node_group is None:
        yield Problem(f"{p}.nodeGroup", f"is required; allowed: {', '.join(config.gpu_node_groups) or '(none)'}")
        return
    if workload.node_group not in config.gpu_node_groups:
        yield Problem(f"{p}.nodeGroup", f"{workload.node_group!r} is not a GPU node group; allowed: "
                                            f"{', '.join(config.gpu_node_groups) or '(none)'}")
        return
    if workload.node_group not in valid_groups(config):
        return
    facts = config.node_facts(workload.node_group)
    sharing = config.sharing_for(workload.node_group)
    if (workload.gpus_per_node is not None and workload.gpu_resource == "whole"
            and workload.gpus_per_node > facts.num_gpus):
        yield Problem(f"{p}.gpusPerNode", f"{workload.gpus_per_node} is more than the {facts.num_gpus} GPUs of a "
                                              f"'{workload.node_group}' node")
    if workload.elastic is not None and workload.elastic.max_nodes < workload.elastic.min_nodes:
        yield Problem(f"{p}.elastic.maxNodes", f"{workload.elastic.max_nodes} is less than minNodes "
                                                   f"{workload.elastic.min_nodes}")
    if workload.gpu_resource == "whole" and sharing.mode != "none":
        # The device plugin renames every shared slice (renameByDefault, components/nvidia_device_plugin.py), so
        # such a node advertises nvidia.com/gpu.shared and 0 nvidia.com/gpu: a whole-GPU pod never schedules.
        yield Problem(f"{p}.gpuResource", f"'whole' requests nvidia.com/gpu, but node group "
                                              f"'{workload.node_group}' shares its GPUs ({sharing.mode}): its nodes "
                                              "offer only nvidia.com/gpu.shared; set its sharing mode 'none' or "
                                              "gpuResource 'shared' (single rank)")
    if workload.gpu_resource == "shared":
        if sharing.mode == "none":
            yield Problem(f"{p}.gpuResource", f"'shared' needs GPU sharing on node group "
                                                  f"'{workload.node_group}' (sharing mode is 'none')")
        ranks = num_ranks(config, workload)
        if ranks > 1:
            yield Problem(f"{p}.gpuResource", f"'shared' with {ranks} ranks: NCCL refuses two ranks on one "
                          "physical GPU, even under MPS, so a distributed job must request whole GPUs "
                          "(gpuResource: whole) or run a single rank")
    max_pods = configured_pods(workload)
    group = config.gpu_node_groups[workload.node_group]
    pods_per_node = max(1, facts.num_gpus // gpus_per_pod(config, workload))
    if workload.gpu_resource == "whole" and max_pods > group.max_size * pods_per_node:
        yield Problem(f"{p}.numNodes" if workload.elastic is None else f"{p}.elastic.maxNodes",
                      f"{max_pods} pods don't fit on node group '{workload.node_group}' (maxSize {group.max_size})")


def _check_quantities(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """The pod's Kubernetes quantities, parsed here so that a malformed one is a config problem with its key path,
    not a `ValueError` from a component after the cluster was registered."""
    amounts: dict[str, float] = {}
    for key, value, parse in (("cpu", workload.cpu, cpu_cores), ("memory", workload.memory, quantity_gib),
                              ("shmSize", workload.shm_size, quantity_gib),
                              ("ephemeralStorage", workload.ephemeral_storage, quantity_gib)):
        try:
            amounts[key] = parse(value)
        except ValueError as error:
            yield Problem(f"{p}.{key}", str(error))
            continue
        if amounts[key] <= 0:
            yield Problem(f"{p}.{key}", f"{value!r} must be more than zero")
    if 0 < amounts.get("memory", 0) < amounts.get("shmSize", 0):
        yield Problem(f"{p}.shmSize", f"{workload.shm_size!r} is more than {p}.memory {workload.memory!r}: "
                                          "/dev/shm is memory-backed and counts against the pod's memory limit; "
                                          f"use at most {workload.memory!r}")


def _check_fit(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """One training pod fits on one node of its EKS group: cpu, memory and scratch within the allocatable of the
    group's smallest instance type (capacity less kube-reserved and eviction thresholds, catalog/node_allocatable).
    Adopted nodes (existing clusters, Swarm) are not catalogued, so they are not checked here."""
    if (traits_of(config).node_facts != "catalog" or workload.node_group not in valid_groups(config)
            or workload.node_group not in config.gpu_node_groups):
        return
    group = config.gpu_node_groups[workload.node_group]
    nodes = []
    for name in group.instance_types:
        facts = GPU_INSTANCE_TYPES[name]
        node = allocatable(vcpus=facts.vcpus, memory_gib=facts.memory_gib, max_pods=MAX_PODS.get(name, 110),
                           disk_size_gib=group.disk_size_gib)
        nodes.append((name, node))
    try:
        cpu, memory, scratch = (cpu_cores(workload.cpu), quantity_gib(workload.memory),
                                quantity_gib(workload.ephemeral_storage))
    except ValueError:
        return  # reported by _check_quantities
    name, node = min(nodes, key=lambda item: item[1].cpu_millicores)
    if cpu * 1000 > node.cpu_millicores:
        yield Problem(f"{p}.cpu", f"{workload.cpu!r} is more than a node of group '{workload.node_group}' can give "
                                      f"a pod ({name}: {node.cpu_millicores}m allocatable); use at most "
                                      f"'{node.cpu_millicores}m' or a larger instance type")
    name, node = min(nodes, key=lambda item: item[1].memory_mib)
    if memory * 1024 > node.memory_mib:
        yield Problem(f"{p}.memory", f"{workload.memory!r} is more than a node of group '{workload.node_group}' "
                                         f"can give a pod ({name}: {node.memory_mib}Mi allocatable); use at most "
                                         f"'{node.memory_mib}Mi' or a larger instance type")
    name, node = min(nodes, key=lambda item: item[1].ephemeral_storage_gib)
    if scratch > node.ephemeral_storage_gib:
        yield Problem(f"{p}.ephemeralStorage", f"{workload.ephemeral_storage!r} is more than a node of group "
                      f"'{workload.node_group}' can give a pod ({node.ephemeral_storage_gib:g}Gi allocatable of its "
                      f"{group.disk_size_gib} GiB root volume); raise gpuNodeGroups.{workload.node_group}.diskSizeGib "
                      "or ask for less")


def _check_pods_fit_the_group(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """The most pods the workload runs at once (`max_running_pods`: its largest job, or the autoscaler's maxReplicas)
    fit its EKS group at maxSize by every resource a pod requests (`derived.pods_per_node`: cpu, memory and
    ephemeral-storage less the GPU node DaemonSets, as Kueue's quota and the simulation's node groups count them),
    not only its GPUs (`_check_workload` says that one). The rest would never be scheduled."""
    from stack_config.derived import max_running_pods, pods_per_node

    if traits_of(config).node_facts != "catalog" or workload.node_group not in valid_groups(config):
        return
    try:
        per_node, limit = pods_per_node(config, workload)
    except ValueError:
        return  # reported by the quantity rules
    group = config.gpu_node_groups[workload.node_group]
    pods = max_running_pods(workload)
    if limit == "GPUs" or per_node == 0 or pods <= per_node * group.max_size:
        return  # GPUs: `_check_workload`'s message; a pod no node holds: `_check_fit`'s
    path = (f"{p}.autoscaling.maxReplicas" if pods > configured_pods(workload)
            else f"{p}.elastic.maxNodes" if workload.elastic is not None else f"{p}.numNodes")
    key, value = {"cpu": ("cpu", workload.cpu), "memory": ("memory", workload.memory),
                  "ephemeral-storage": ("ephemeralStorage", workload.ephemeral_storage)}[limit]
    yield Problem(path, f"{pods} pods don't fit on node group '{workload.node_group}' at maxSize {group.max_size}: a "
                        f"node holds {per_node} by {limit} ({p}.{key} {value!r} each, of its allocatable less the GPU "
                        f"node DaemonSets); allowed: at most {per_node * group.max_size} pods, a smaller {p}.{key}, or "
                        f"a larger gpuNodeGroups.{workload.node_group}.maxSize")


def _check_workloads_fit_together(config: StackConfig) -> Iterator[Problem]:
    """Without Kueue, nothing stops the workloads of one node group from starting at once: if their pods together
    need more GPUs (or slices; Swarm: servers) than the group has at maxSize, some pods of a multi-pod job start
    and hold their GPUs while the rest wait for GPUs another job holds — the partial-gang deadlock Kueue exists to
    prevent. Each workload fitting alone is checked per workload (`_check_workload`)."""
    from stack_config.derived import gpu_resource_of, kueue_enabled, max_running_pods

    if len(config.workloads) < 2 or kueue_enabled(config):
        return
    valid = set(valid_groups(config))
    demand: dict[str, list[tuple[str, int]]] = {}
    for name, workload in config.workloads.items():
        if workload.node_group in valid:
            units = max_running_pods(workload) * (1 if traits_of(config).capacity_unit == "server"
                                                  else gpus_per_pod(config, workload))
            demand.setdefault(workload.node_group, []).append((name, units))
    for group, users in demand.items():
        if len(users) < 2:
            continue
        node_group = config.gpu_node_groups[group]
        if traits_of(config).capacity_unit == "server":
            capacity, unit = node_group.max_size, "server(s)"
        else:
            resource, replicas = gpu_resource_of(config, group)
            capacity, unit = node_group.max_size * config.node_facts(group).num_gpus * replicas, resource
        total = sum(units for _, units in users)
        if total > capacity:
            listed = ", ".join(f"{name} {units}" for name, units in users)
            yield Problem("workloads", f"{listed}: {total} {unit} at once on node group '{group}', which has "
                                       f"{capacity} at maxSize {node_group.max_size}; without Kueue their gangs "
                                       "can deadlock holding part of the GPUs: turn kueue on (EKS), raise "
                                       f"gpuNodeGroups.{group}.maxSize, or shrink the workloads")


def _check_own_image(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """A team's own image: by digest, with a command (`command` without it, and our trainer's arguments with it,
    have no effect: stack_config/applicability.py)."""
    if workload.image is None:
        return
    if not DIGEST_REFERENCE.match(workload.image):
        yield Problem(f"{p}.image", f"{workload.image!r} is not pinned by digest; write "
                                    "'registry/repo[:tag]@sha256:<64 hex>' (a tag can move under a running job)")
    if not workload.command:
        yield Problem(f"{p}.command", "is required with image: the program torchrun starts in every process, e.g. "
                                      "['-m', 'myteam.train'] or ['/app/train.py']")


def _check_where_work_is_kept(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """A job whose checkpoints must outlive its pods needs storage that does: with `storage.kind: none` they sit in
    one pod's node-local scratch (an emptyDir, deleted with the pod), so a multi-node job (rank 0 may come back on
    another node), an elastic or scaled one, or any production job would silently restart from step 0. Which kinds
    a job's pods share, and which are per pod: stack_config/storage_kinds.py."""
    # Kinds a job's pods share (stack_config/storage_kinds.py); only `none` is per pod.
    if shared_by_pods(config.storage.kind) or workload.checkpoints == "none" or workload.entrypoint != "train":
        return
    pods = configured_pods(workload)  # a ScaledJob's Jobs are independent single-pod runs, like a one-pod dev job
    why = (f"{pods} pods" if pods > 1 else "elastic" if workload.elastic is not None
           else "scaled by KEDA" if workload.autoscaling.mode == "scaledobject"
           else "on a production stack" if config.lifecycle.protect else None)
    if why is None:
        return
    shared = [kind for kind in kinds_on(config.cluster.mode) if shared_by_pods(kind)]
    yield Problem("storage.kind", f"{config.storage.kind!r} keeps checkpoints in one pod's node-local scratch, deleted "
                                  f"with the pod, but workload {workload.name!r} ({why}) must resume from them after a "
                                  f"pod is lost; allowed: storage every pod of the job shares ({', '.join(shared)} on "
                                  f"cluster.mode {config.cluster.mode!r}), or {p}.checkpoints: none if the job keeps "
                                  "no work")


def _check_production_images(config: StackConfig) -> Iterator[Problem]:
    """What the policy pack's `production_image_signed_or_own_build` would refuse, decided from config first (it
    stays the second line for what only the resources show): on a production stack (`lifecycle.protect`, the
    pack's `production` fact, verify/validate.py) every image a workload runs is the stack's own build or one
    of image.signedDigests."""
    if not config.lifecycle.protect:
        return
    signed = set(config.image.signed_digests)
    allowed = "the stack's own build (image.build) or a digest CI signed and verified, listed in image.signedDigests"
    if not config.image.build and config.image.reference and config.image.reference not in signed:
        yield Problem("image.reference", f"{config.image.reference!r} is not in image.signedDigests, and a production "
                                         f"stack (lifecycle.protect) runs only {allowed}")
    for name, workload in config.workloads.items():
        if workload.image and workload.image not in signed:
            yield Problem(f"workloads.{name}.image", f"{workload.image!r} is not in image.signedDigests, and a "
                                                     f"production stack (lifecycle.protect) runs only {allowed}")


def _check_kueue(config: StackConfig) -> Iterator[Problem]:
    from stack_config.derived import kueue_blockers

    kueue = config.kueue
    if kueue.enabled:
        for blocker in kueue_blockers(config):
            yield Problem("kueue.enabled", f"true, but {blocker}; set it to false or leave it unset")
    # waitForPodsReadyTimeout and admissionBudget: stack_config/consumers.py
    from stack_config.kinds import KUEUE_ADMITTED, kinds_where

    for index, kind in enumerate(kueue.submit_kinds):
        if kind not in KUEUE_ADMITTED.names:
            yield Problem(f"kueue.submitKinds[{index}]", f"{kind!r} is not a kind Kueue admits; use "
                                                         f"{kinds_where(KUEUE_ADMITTED)}")
    if kueue.submit_kinds and not kueue_enabled(config) and traits_of(config).platform == "kubernetes":
        yield Problem("kueue.submitKinds", "set, but Kueue is off (kueue.enabled): only Kueue admits a submitted job; "
                                           "remove it or turn Kueue on")


def _check_gang_capacity(config: StackConfig) -> Iterator[Problem]:
    """Kueue's atomic provisioning and topology-aware admission (`kueue.atomicProvisioning`, `kueue.topology`,
    `workloads.<name>.topology`) only where they can work."""
    from catalog.node_labels import TOPOLOGY_INSTANCE_TYPES
    from stack_config.derived import _efa_group, gang_nodes, provisioning_groups, topology_capable

    valid = set(valid_groups(config))
    kueue_on = kueue_enabled(config)
    topology_page = "docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html"
    for name, workload in config.workloads.items():
        p = f"workloads.{name}.topology"
        group = workload.node_group
        if workload.topology in (None, "none") or group not in valid or not traits_of(config).provisions_in_aws:
            continue
        if not kueue_on:
            yield Problem(p, f"{workload.topology!r}, but Kueue is off (kueue.enabled): only Kueue's "
                             "topology-aware scheduling reads it; remove it or turn Kueue on")
            continue
        if config.kueue.topology == "off":
            yield Problem(p, f"{workload.topology!r}, but kueue.topology is 'off' (no Topology, no topology flavor); "
                             "remove it or set kueue.topology")
            continue
        if not topology_capable(config, group):
            # The AWS cloud provider writes topology.k8s.aws/network-node-layer-* only from
            # ec2:DescribeInstanceTopology, which answers only for the types of the EC2 topology prerequisites
            # page (catalog/node_labels.py; cloud-provider-aws pkg/providers/v1/instances_v2.go:86-104 at v1.34.3).
            # A required level on a flavor without the labels never fits (Kueue TAS, topology_aware_scheduling.md:97).
            lacking = [t for t in config.gpu_node_groups[group].instance_types if t not in TOPOLOGY_INSTANCE_TYPES]
            yield Problem(p, f"{workload.topology!r}, but node group '{group}' has instance type(s) "
                             f"{', '.join(lacking)} without EC2 network-topology labels ({topology_page}); "
                             "use an instance type on that list or remove it")
    if not kueue_on and traits_of(config).provisions_in_aws:
        # Both act through Kueue's ClusterQueue (components/kueue.py): without Kueue they would do nothing.
        if config.kueue.atomic_provisioning == "on":
            yield Problem("kueue.atomicProvisioning", "'on', but Kueue is off (kueue.enabled): the ProvisioningRequest "
                                                      "check is a Kueue admission check; turn Kueue on or remove it")
        if config.kueue.topology in ("required", "preferred"):
            yield Problem("kueue.topology", f"{config.kueue.topology!r}, but Kueue is off (kueue.enabled): only "
                                            "Kueue's topology-aware scheduling reads it; turn Kueue on or remove it")
    if kueue_on and config.kueue.topology in ("required", "preferred"):
        for name, workload in config.workloads.items():
            group = workload.node_group
            if (group not in valid or workload.topology is not None or not traits_of(config).provisions_in_aws
                    or gang_nodes(config, workload) < 2 or not _efa_group(config, group)):
                continue
            if not topology_capable(config, group):
                lacking = [t for t in config.gpu_node_groups[group].instance_types
                           if t not in TOPOLOGY_INSTANCE_TYPES]
                yield Problem("kueue.topology", f"{config.kueue.topology!r}, but the multi-node EFA workload "
                              f"'{name}' runs on node group '{group}', whose instance type(s) {', '.join(lacking)} "
                              f"carry no EC2 network-topology labels ({topology_page}); set kueue.topology 'auto' "
                              f"or workloads.{name}.topology 'none', or use a listed instance type")
    if not kueue_on or not traits_of(config).provisions_in_aws:
        return
    chosen = set(provisioning_groups(config))
    for group in sorted(set(config.gpu_node_groups) & valid):
        node_group = config.gpu_node_groups[group]
        for name, workload in config.workloads.items():
            if workload.node_group != group:
                continue
            nodes = gang_nodes(config, workload)
            if group in chosen and nodes > node_group.max_size:
                # cluster-autoscaler core/scaleup/orchestrator/orchestrator.go:217 and :500 at
                # cluster-autoscaler-1.34.1: an all-or-nothing request larger than the group's MaxSize is refused.
                yield Problem(f"gpuNodeGroups.{group}.maxSize",
                              f"{node_group.max_size}, but workload '{name}' is a gang of {nodes} nodes and "
                              f"kueue.atomicProvisioning ({config.kueue.atomic_provisioning!r}) asks the "
                              "cluster-autoscaler for all of them at once, which it refuses beyond maxSize: raise "
                              f"maxSize to at least {nodes} or shrink the gang")
            explicit = config.kueue.topology != "off" and (workload.topology in ("required", "preferred") or (
                workload.topology is None and config.kueue.topology in ("required", "preferred")))
            if (explicit and group not in chosen and topology_capable(config, group)
                    and node_group.min_size < nodes):
                # Kueue TAS counts only nodes that run (site/content/en/docs/concepts/topology_aware_scheduling.md:
                # 61-67 at v0.19.2) and creates no pod before admission, so nothing scales the group up; with the
                # provisioning check the topology is assigned after the nodes came (:124-137).
                yield Problem("kueue.atomicProvisioning",
                              f"{config.kueue.atomic_provisioning!r}, but workload '{name}' asks for a network "
                              f"topology on node group '{group}' (minSize {node_group.min_size}, gang of {nodes}): "
                              "Kueue's topology-aware scheduling sees only running nodes, so the gang would never "
                              "be admitted; set it 'auto' or 'on', or minSize to at least the gang")


def _startup_floor(config: StackConfig, bounded: Callable[[WorkloadConfig], bool] = lambda workload: True
                   ) -> tuple[int, str, list[str]] | None:
    """The slowest pod start-up of the stack's `bounded` workloads on EKS (stack_config.derived.pod_startup_floor):
    seconds, the workload and node group it is for, and its parts; None when there is nothing to bound."""
    from stack_config.derived import pod_startup_floor

    if traits_of(config).node_facts != "catalog":  # adopted nodes are running; a site registry's speed is unknown
        return None
    valid = set(valid_groups(config))
    floors = []
    for name, workload in config.workloads.items():
        if workload.node_group in valid and bounded(workload):
            seconds, parts = pod_startup_floor(config, workload)
            if seconds:
                floors.append((seconds, f"workload {name!r} on node group {workload.node_group!r}", parts))
    return max(floors, key=lambda floor: floor[0]) if floors else None


def _check_startup_bound(config: StackConfig) -> Iterator[Problem]:
    """The stack's start-up bound (stack_config.derived.startup_bound_seconds) can't be shorter than the start-up it
    bounds: Kueue's waitForPodsReady.timeout evicts and requeues an admitted job whose pods aren't ready in time
    (Kueue v0.19.2 apis/config/v1beta2 `WaitForPodsReady.Timeout`, components/kueue.py `manager_config`;
    docs/scheduling.md, "Gang admission"), so a timeout below the time a pod needs to start evicts the job every
    time; without Kueue, gpu.readinessTimeoutSeconds is the bound (a multi-node PyTorchJob's workers wait that long
    for their rendezvous host, elasticPolicy.rdzvConf, workload_kinds/pytorchjob.py)."""
    from stack_config.derived import duration_seconds, kueue_enabled

    if traits_of(config).node_facts != "catalog":
        return
    readiness = config.gpu.readiness_timeout_seconds
    if kueue_enabled(config):
        floor = _startup_floor(config)  # every workload is queued
        timeout = config.kueue.wait_for_pods_ready_timeout
        try:
            bound = duration_seconds(timeout)
        except ValueError:
            bound = None  # not a duration this bound can be (stack_config/consumers.py reports it)
        if floor is not None and bound is not None and 0 < bound < floor[0]:
            seconds, what, parts = floor
            yield Problem("kueue.waitForPodsReadyTimeout",
                          f"{timeout!r} ({bound} s) is shorter than a pod of {what} needs to "
                          f"start: at least {seconds} s = {' + '.join(parts)} (catalog/startup_times.py); Kueue "
                          "evicts and requeues an admitted job whose pods aren't ready by then, so the job would be "
                          f"evicted before it runs, every time; use at least '{math.ceil(seconds / 60)}m'")
        return  # Kueue's timeout is the bound; the readiness gate then only waits for running nodes' GPUs
    floor = _startup_floor(config, lambda workload: kind_traits(workload.kind).readiness_bounds_rendezvous
                           and workload.autoscaling.mode != "scaledjob"
                           and (workload.elastic is not None or workload.num_nodes > 1))
    if floor is not None and readiness < floor[0]:
        seconds, what, parts = floor
        yield Problem("gpu.readinessTimeoutSeconds",
                      f"{readiness} s is shorter than a pod of {what} needs to start: at least {seconds} s = "
                      f"{' + '.join(parts)} (catalog/startup_times.py); without Kueue it is the stack's start-up "
                      "bound, the PyTorchJob's rendezvous timeout (elasticPolicy.rdzvConf read_timeout), so its "
                      f"workers would give up on a master pod still starting; use at least {seconds}")


def _check_runtime_class(config: StackConfig) -> Iterator[Problem]:
    name = config.gpu.runtime_class_name
    if name and (len(name) > 253 or not all(DNS_LABEL.match(part) or re.fullmatch(r"[a-z0-9]+", part)
                                             for part in name.split("."))):
        yield Problem("gpu.runtimeClassName", f"{name!r} is not a RuntimeClass name (a lowercase DNS subdomain); "
                                              "allowed: e.g. 'nvidia', or '' for the node's default runtime")
    elif config.gpu.create_runtime_class and runtime_class_name(config) is None:
        yield Problem("gpu.createRuntimeClass", "needs a RuntimeClass name: set gpu.runtimeClassName (e.g. 'nvidia'), "
                                                "or leave createRuntimeClass false")
    else:
        yield from _check_gpu_runtime(config)


def _check_gpu_runtime(config: StackConfig) -> Iterator[Problem]:
    """The precondition the simulator's `runtime handlers` check holds the rendered pods to
    (verify/simulate/runtime.py), decided from config before anything is registered: every GPU pod (and the device
    plugin's daemons) runs under the NVIDIA runtime, through a RuntimeClass the cluster has, or the nodes' default.
    A RuntimeClass that doesn't exist makes the API server refuse every pod naming it (kubernetes v1.34.12
    plugin/pkg/admission/runtimeclass/admission.go:158 "pod rejected: RuntimeClass %q not found"); the runc
    default injects no driver libraries, so no GPU is advertised or visible."""
    traits = traits_of(config)
    if traits.platform != "kubernetes":
        return
    classes = dict(traits.site_runtime_classes)
    name = runtime_class_name(config)
    if name is not None and config.gpu.create_runtime_class:
        classes[name] = NVIDIA_RUNTIME_HANDLER  # components/nvidia_device_plugin.py creates it with this handler
    has = (", ".join(f"'{c}' (handler '{h}')" for c, h in sorted(classes.items())) or "none")
    written = config.gpu.runtime_class_name
    if name is None:
        default = node_default_runtime(config)
        if default != NVIDIA_RUNTIME_HANDLER:
            yield Problem("gpu.runtimeClassName", f"{written!r} runs the GPU pods under the nodes' default runtime "
                          f"'{default}' (cluster.nodeDefaultRuntime), which injects no NVIDIA driver libraries: no "
                          f"GPU would be advertised or visible; allowed: a RuntimeClass with handler "
                          f"'{NVIDIA_RUNTIME_HANDLER}' this cluster has ({has}; leave gpu.runtimeClassName unset for "
                          f"the default), or cluster.nodeDefaultRuntime: {NVIDIA_RUNTIME_HANDLER} if the nodes' "
                          "containerd defaults to the NVIDIA runtime")
    elif name not in classes:
        yield Problem("gpu.runtimeClassName", f"{name!r} is not a RuntimeClass this cluster has (it has: {has}): the "
                      "API server refuses every pod that names it; allowed: one it has, or gpu.createRuntimeClass: "
                      f"true to create {name!r} with handler '{NVIDIA_RUNTIME_HANDLER}'")
    elif classes[name] != NVIDIA_RUNTIME_HANDLER:
        yield Problem("gpu.runtimeClassName", f"{name!r} runs the GPU pods under handler '{classes[name]}', which "
                      "injects no NVIDIA driver libraries; allowed: a RuntimeClass with handler "
                      f"'{NVIDIA_RUNTIME_HANDLER}' ({has})")


CLUSTER_COMPONENTS = frozenset({"cluster-autoscaler"})
"""Components `installed_parts` decides from `cluster` alone."""


def _compatibility(config: StackConfig, components_from_cluster: bool) -> Iterator[Problem]:
    values = {**compatibility.pin_values(), "kubernetesVersion": config.kubernetes_version}
    installed = installed_parts(config)

    def ours(component: str) -> bool:
        # Pin pairings and the cluster's own components need only `cluster` to parse; the others need the sections
        # that say what the stack installs (two rules, so a typo elsewhere still leaves the first reported).
        return (not component or component in CLUSTER_COMPONENTS) is components_from_cluster

    def uses(row: compatibility.Row) -> bool:
        # The stack sets the cluster's Kubernetes version only on EKS; pairings of pins hold whatever it runs.
        if not ours(row.component) or ("kubernetesVersion" in row.pins and not traits_of(config).provisions_in_aws):
            return False
        return not row.component or row.component in installed

    for row, why in compatibility.problems(values, uses):
        path = "kubernetesVersion" if "kubernetesVersion" in row.pins else f"catalog.versions.{row.pins[0]}"
        yield Problem(path, f"{' × '.join(f'{pin} {values[pin]}' for pin in row.pins)} break compatibility row "
                            f"'{row.name}': {why} (source: {row.source})")
    for floor, why in compatibility.floor_problems(values, lambda floor: ours(floor.uses) and floor.uses in installed):
        yield Problem(f"catalog.versions.{floor.pin}", why)


def _check_compatibility(config: StackConfig) -> Iterator[Problem]:
    """catalog/compatibility.py: the rows relating pins (and the autoscaler's, on EKS) hold."""
    return _compatibility(config, components_from_cluster=True)


def _check_installed_compatibility(config: StackConfig) -> Iterator[Problem]:
    """catalog/compatibility.py: the rows of every component this stack installs hold for its pins and its
    kubernetesVersion, and none of them is below a CVE floor."""
    return _compatibility(config, components_from_cluster=False)


def _check_autoscaling(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    autoscaling = workload.autoscaling
    if autoscaling.max_replicas < autoscaling.min_replicas:
        yield Problem(f"{p}.autoscaling.maxReplicas", f"{autoscaling.max_replicas} is less than minReplicas "
                                                 f"{autoscaling.min_replicas}")
    if autoscaling.mode == "scaledobject":
        if workload.kind not in KEDA_SCALED or workload.elastic is None:
            yield Problem(f"{p}.autoscaling.mode", "'scaledobject' scales the Worker replicas of an elastic "
                                              f"PyTorchJob: set {p}.kind {kinds_where(KEDA_SCALED)} and {p}.elastic")
        if autoscaling.min_replicas < 1:
            yield Problem(f"{p}.autoscaling.minReplicas", f"{autoscaling.min_replicas} would scale the PyTorchJob to 0 "
                          "workers, which the training-operator's webhook rejects; use >= 1 or mode scaledjob")
        elastic = workload.elastic
        if elastic is not None and not (elastic.min_nodes <= autoscaling.min_replicas
                                        and autoscaling.max_replicas <= elastic.max_nodes):
            yield Problem(f"{p}.autoscaling.maxReplicas", f"KEDA's range {autoscaling.min_replicas}.."
                          f"{autoscaling.max_replicas} must lie within {p}.elastic {elastic.min_nodes}.."
                          f"{elastic.max_nodes}: the training-operator's elasticPolicy rejects Worker counts "
                          "outside it")
        if not config.gpu.metrics.prometheus or not dcgm_exporter_enabled(config):
            yield Problem(f"{p}.autoscaling.mode", "'scaledobject' triggers on DCGM metrics in Prometheus: enable "
                                              "gpu.metrics.dcgmExporter and gpu.metrics.prometheus")
    if autoscaling.mode == "scaledjob":
        if workload.kind not in KEDA_SCALED:
            yield Problem(f"{p}.autoscaling.mode", "'scaledjob' starts training Jobs from the PyTorchJob's pod shape: "
                                              f"set {p}.kind {kinds_where(KEDA_SCALED)}")


def _check_storage(config: StackConfig) -> Iterator[Problem]:
    storage = config.storage
    if storage.kind == "existing" and not storage.existing_storage_class:
        yield Problem("storage.existingStorageClass", "is required when storage.kind is 'existing'")
    if storage.kind == "fsx-lustre":
        yield from _check_lustre(storage.fsx_deployment_type, storage.size_gib, storage.fsx_throughput_per_unit)
    if not storage.mount_path.startswith("/"):
        yield Problem("storage.mountPath", f"{storage.mount_path!r} must be an absolute path")


def _check_lustre(deployment_type: str, size_gib: int, throughput: int) -> Iterator[Problem]:
    """What FSx's CreateFileSystem would refuse at `up`, after the cluster exists: a size or a throughput its deployment
    type doesn't take (catalog/fsx_lustre.py, with the API reference's sentences). A throughput written for a type
    that takes none is a key without effect (stack_config/applicability.py)."""
    deployment = LUSTRE_DEPLOYMENTS[deployment_type]
    if not deployment.valid_size(size_gib):
        yield Problem("storage.sizeGib", f"{size_gib} is not a valid FSx for Lustre size for {deployment_type}: "
                                         f"allowed {deployment.sizes_text()} (FSx CreateFileSystem StorageCapacity)")
    if deployment.throughputs and throughput not in deployment.throughputs:
        yield Problem("storage.fsxThroughputPerUnit",
                      f"{throughput} MB/s/TiB is not a throughput of {deployment_type}; allowed "
                      f"{', '.join(map(str, deployment.throughputs))} (FSx CreateFileSystemLustreConfiguration "
                      "PerUnitStorageThroughput)")


def _check_lifecycle(config: StackConfig) -> Iterator[Problem]:
    lifecycle = config.lifecycle
    if lifecycle.ephemeral:
        if lifecycle.protect:
            yield Problem("lifecycle.protect", "an ephemeral stack protects nothing, so it can always be destroyed")
        if lifecycle.ttl_hours is None:
            yield Problem("lifecycle.ttlHours", "is required for an ephemeral stack (the reaper destroys it after)")
        if lifecycle.created_at is None:
            yield Problem("lifecycle.createdAt", "is required for an ephemeral stack (ISO-8601 UTC)")
        elif lifecycle.created_at.utcoffset() != UTC.utcoffset(None):
            yield Problem("lifecycle.createdAt", f"{lifecycle.created_at.isoformat()!r} must be UTC (end with 'Z')")
        else:
            yield from _check_lifetime(lifecycle.created_at)
        if lifecycle.kms_deletion_window != 7:
            yield Problem("lifecycle.kmsDeletionWindowDays", f"{lifecycle.kms_deletion_window} on an ephemeral "
                                                             "stack; use 7 (the shortest AWS allows)")
        if lifecycle.max_gpu_node_hours is not None and lifecycle.ttl_hours is not None:
            node_hours = sum(group.max_size for group in config.gpu_node_groups.values()) * lifecycle.ttl_hours
            if node_hours > lifecycle.max_gpu_node_hours:
                yield Problem("lifecycle.maxGpuNodeHours", f"GPU groups may run {node_hours:g} node-hours (sum of "
                              f"maxSize x ttlHours), over the cap of {lifecycle.max_gpu_node_hours:g}")


def _check_ttl(config: StackConfig) -> Iterator[Problem]:
    """An ephemeral EKS stack's TTL can't end before the stack can run anything: the reaper destroys it ttlHours
    after createdAt (tools/reap.py), and creating its EKS control plane alone averages 15 minutes, before a training
    pod's own start-up (catalog/startup_times.py)."""
    from catalog.startup_times import EKS_CONTROL_PLANE_SECONDS

    lifecycle = config.lifecycle
    if not lifecycle.ephemeral or lifecycle.ttl_hours is None or not traits_of(config).provisions_in_aws:
        return
    floor = _startup_floor(config)
    pod_seconds, parts = (floor[0], f" + a pod's start-up ({floor[1]}: {' + '.join(floor[2])})") if floor else (0, "")
    least = EKS_CONTROL_PLANE_SECONDS + pod_seconds
    if lifecycle.ttl_hours * 3600 < least:
        yield Problem("lifecycle.ttlHours", f"{lifecycle.ttl_hours:g} ({lifecycle.ttl_hours * 60:g} min) ends before "
                      f"the stack can run anything: at least {least} s = creating the EKS control plane "
                      f"({EKS_CONTROL_PLANE_SECONDS} s on average, aws/containers-roadmap#1227){parts}; the reaper "
                      f"destroys the stack ttlHours after createdAt; use at least {math.ceil(least / 36) / 100:g} "
                      "plus the job's own run time")


CLOCK_SKEW = timedelta(minutes=10)
"""How far in the future a creation time may lie (clocks of the writer and the deployer disagree a little)."""


def _check_lifetime(created_at: datetime, now: datetime | None = None) -> Iterator[Problem]:
    """A stack "created" in the future outlives its TTL: the reaper counts ttlHours from createdAt (tools/reap.py).
    (An expiry already past is not refused here: plans of a stack that is being reaped still run.)"""
    now = now or datetime.now(UTC)
    if created_at > now + CLOCK_SKEW:
        yield Problem("lifecycle.createdAt", f"'{created_at:%Y-%m-%dT%H:%M:%SZ}' is in the future (now "
                                             f"{now:%Y-%m-%dT%H:%M:%SZ}): the reaper counts ttlHours from it, so the "
                                             "stack would outlive its TTL; write the time it is created, e.g. "
                                             "`date -u +%Y-%m-%dT%H:%M:%SZ`")


_RULES = (
    (_check_scalars, ()),
    (_check_tags, ("tags",)),
    (_check_cluster, ("cluster",)),
    (_check_network, ("network", "cluster")),
    (_check_node_groups, ("cluster",)),  # runs on the entries that parsed
    (_check_sharing, ("gpu", "cluster")),
    (_check_jetson, ("gpu", "gpuNodeGroups")),
    (_check_image, ("image", "cluster")),
    (each_workload(_check_workload), ("workloads", "gpuNodeGroups", "gpu", "cluster")),
    (each_workload(_check_quantities), ("workloads",)),
    (each_workload(_check_fit), ("workloads", "gpuNodeGroups", "cluster")),
    (each_workload(_check_pods_fit_the_group), ("workloads", "gpuNodeGroups", "gpu", "cluster")),
    (each_workload(_check_own_image), ("workloads",)),
    (_check_production_images, ("lifecycle", "image", "workloads")),
    (each_workload(_check_where_work_is_kept), ("workloads", "storage", "lifecycle")),
    (_check_workloads_fit_together, ("workloads", "gpuNodeGroups", "gpu", "cluster", "kueue")),
    (_check_runtime_class, ("gpu", "cluster")),
    (_check_compatibility, ("cluster",)),
    (_check_installed_compatibility, ("cluster", "gpuNodeGroups", "gpu", "workloads", "kueue")),
    (_check_kueue, ("kueue", "workloads", "cluster")),
    (_check_gang_capacity, ("kueue", "workloads", "cluster", "gpuNodeGroups")),
    (_check_startup_bound, ("cluster", "kueue", "gpu", "gpuNodeGroups", "workloads", "image")),
    (each_workload(_check_autoscaling), ("workloads", "gpu", "cluster")),
    (_check_storage, ("storage", "cluster")),
    (_check_lifecycle, ("lifecycle", "gpuNodeGroups")),
    (_check_ttl, ("lifecycle", "cluster", "gpuNodeGroups", "workloads", "image")),
    *SITE_RULES,  # stack_config/site_rules.py: what AWS, the API server, a kubelet or a site would refuse
    *CONSUMER_RULES,  # values read by another program's grammar: stack_config/consumers.py
)


def camel(snake_name: str) -> str:
    head, *rest = snake_name.split("_")
    return head + "".join(part.title() for part in rest)


def snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
