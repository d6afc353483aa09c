"""Stack-wide rules: tags, destroy safety on ephemeral stacks, protection in production, ordering.

Destroy hangs come from protected resources, non-empty ECR/S3, custom resources outliving their operator
(finalizers nobody removes) and in-cluster resources outliving the deployer's cluster access; the engine
deletes in reverse dependency order, so the ordering rules below make destroy succeed.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .graph import StackIndex, inputs
from .model import EPHEMERAL_TAGS, Facts, Finding, Record, as_list, as_number, get_path, is_computed, is_true
from .rules_aws import ACCESS_ENTRY, ACCESS_POLICY_ASSOCIATION, CLUSTER, ECR_REPOSITORY, KMS_KEY, LAUNCH_TEMPLATE
from .rules_kubernetes import HELM_RELEASE_TYPES

AWS_PROVIDER = "pulumi:providers:aws"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
S3_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
FILE_SYSTEMS = (
    "aws:efs/fileSystem:FileSystem",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:fsx/ontapFileSystem:OntapFileSystem",
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem",
    "aws:fsx/windowsFileSystem:WindowsFileSystem",
)
PROTECTED_IN_PRODUCTION = (CLUSTER, KMS_KEY, ECR_REPOSITORY) + S3_BUCKETS + FILE_SYSTEMS
OPERATOR_TYPES = HELM_RELEASE_TYPES + (
    "kubernetes:kustomize/v2:Directory",
    "kubernetes:yaml/v2:ConfigFile",
    "kubernetes:yaml/v2:ConfigGroup",
)
# API group of a custom resource → marker that the name of the installing Helm release / operator manifest (yaml
# ConfigFile) contains.
OPERATOR_OF_GROUP = {
    "kubeflow.org": "training-operator",
    "elastic.iml.github.io": "dlrover",
    "trainer.kubeflow.org": "trainer",
    "keda.sh": "keda",
    "monitoring.coreos.com": "prometheus",
}


def _options(record: Record) -> Mapping:
    options = record.get("options")
    return options if isinstance(options, Mapping) else {}


def _tag_maps(stack: StackIndex) -> Iterator[tuple[Record, str, Any]]:
    """(record, field, tags) for every AWS provider's defaultTags and every launch template's instance tags
    (defaultTags do not reach instances an Auto Scaling group launches from a template)."""
    for provider in stack.of_type(AWS_PROVIDER):
        yield provider, "defaultTags.tags", get_path(inputs(provider), "defaultTags.tags")
    for template in stack.of_type(LAUNCH_TEMPLATE):
        specs = get_path(inputs(template), "tagSpecifications")
        instance = [s for s in as_list(specs) if get_path(s, "resourceType") == "instance"]
        tags = get_path(instance[0], "tags") if instance else None
        yield template, "tagSpecifications[resourceType=instance].tags", tags


def _missing_keys(tags: Any, keys: tuple) -> list:
    if is_computed(tags):
        return list(keys)
    return [k for k in keys if not (isinstance(tags, Mapping) and tags.get(k) not in (None, ""))]


def aws_required_tags(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    expected_lifecycle = "ephemeral" if facts.ephemeral else "persistent"
    for record, field, tags in _tag_maps(stack):
        missing = _missing_keys(tags, facts.required_tags)
        if missing:
            yield Finding(field, tags, f"missing required tag keys {missing}", record=record)
            continue
        stack_tag, lifecycle = tags.get("gtp:stack"), tags.get("gtp:lifecycle")
        if stack_tag is not None and not is_computed(stack_tag) and stack_tag != facts.stack:
            yield Finding(f"{field}.gtp:stack", stack_tag, f"must be the stack name {facts.stack!r}", record=record)
        if lifecycle is not None and not is_computed(lifecycle) and lifecycle != expected_lifecycle:
            yield Finding(f"{field}.gtp:lifecycle", lifecycle, f"must be {expected_lifecycle!r} on this stack",
                          record=record)


def ephemeral_ttl_tags(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    if not facts.ephemeral:
        return
    for record, field, tags in _tag_maps(stack):
        missing = _missing_keys(tags, EPHEMERAL_TAGS)
        if missing:
            yield Finding(field, tags, f"ephemeral stacks must carry TTL tags {missing}", record=record)
            continue
        ttl = tags.get("gtp:ttl-hours")
        number = as_number(ttl)
        if not is_computed(ttl) and (number is None or number <= 0):
            yield Finding(f"{field}.gtp:ttl-hours", ttl, "must be a positive number of hours", record=record)


def ephemeral_no_protect(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    if not facts.ephemeral:
        return
    for record in stack.records:
        if _options(record).get("protect") is True:
            yield Finding("options.protect", True, "ephemeral stacks must destroy cleanly; remove protect",
                          record=record)


def ephemeral_no_retain_on_delete(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """retainOnDelete leaves billable resources behind. (The Pulumi policy engine does not expose this option,
    so under `pulumi preview --policy-pack` only the offline runner can see it.)"""
    if not facts.ephemeral:
        return
    for record in stack.records:
        if _options(record).get("retainOnDelete") is True:
            yield Finding("options.retainOnDelete", True, "ephemeral stacks must not leave resources behind",
                          record=record)


def ephemeral_force_delete(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """A non-empty ECR repository or S3 bucket fails to delete unless forceDelete / forceDestroy is set."""
    if not facts.ephemeral:
        return
    for record in stack.of_type(ECR_REPOSITORY):
        value = get_path(inputs(record), "forceDelete")
        if not is_true(value):
            yield Finding("forceDelete", value, "must be true on ephemeral stacks (images block deletion)",
                          record=record)
    for record in stack.of_type(*S3_BUCKETS):
        value = get_path(inputs(record), "forceDestroy")
        if not is_true(value):
            yield Finding("forceDestroy", value, "must be true on ephemeral stacks (objects block deletion)",
                          record=record)


def production_protect_stateful(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    if not facts.production:
        return
    for record in stack.of_type(*PROTECTED_IN_PRODUCTION):
        protect = _options(record).get("protect")
        if protect is not True:
            yield Finding("options.protect", protect, "production clusters, keys, storage and repositories "
                                                      "must be protected", record=record)


def production_no_force_delete(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    if not facts.production:
        return
    for record in stack.of_type(ECR_REPOSITORY):
        if is_true(get_path(inputs(record), "forceDelete")):
            yield Finding("forceDelete", True, "production repositories must not delete their images",
                          record=record)
    for record in stack.of_type(*S3_BUCKETS):
        if is_true(get_path(inputs(record), "forceDestroy")):
            yield Finding("forceDestroy", True, "production buckets must not delete their objects", record=record)


def kubernetes_group(resource_type: str) -> str:
    """`kubernetes:kubeflow.org/v1:PyTorchJob` → `kubeflow.org`."""
    _, _, rest = resource_type.partition(":")
    return rest.split("/", 1)[0] if "/" in rest else ""


def custom_resources_depend_on_operator(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    operators = list(stack.of_type(*OPERATOR_TYPES))
    for record in stack.records:
        resource_type = str(record.get("type"))
        if not resource_type.startswith("kubernetes:"):
            continue
        marker = OPERATOR_OF_GROUP.get(kubernetes_group(resource_type))
        if marker is None:
            continue
        candidates = [o for o in operators if marker in str(o.get("name")).lower()]
        if not candidates or not stack.depends_on_any(record, candidates):
            names = [o.get("name") for o in candidates]
            yield Finding("dependsOn", record.get("dependsOn") or [],
                          f"must depend (dependsOn, parent or provider) on the {marker} operator "
                          f"(Helm release or operator manifest; found {names or 'none'}) so destroy removes it "
                          "before its controller", record=record)


def kubernetes_provider_depends_on_access_entry(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """Every EKS access grant (entry and policy association) is an ancestor of the kubernetes provider. A destroy
    runs under one of them (the deployer, an admin, the reaper) and Pulumi deletes in dependency order, everything
    nothing depends on in the first wave (pkg/v3 resource/deploy/step_generator.go:2730-2747 ScheduleDeletes,
    pulumi/pulumi at 1b594989): a grant outside the provider's ancestors goes first, and every later in-cluster
    delete by its principal gets 403."""
    if not stack.of_type(CLUSTER):
        return  # kubeconfig-only stacks (edge) have no access entries
    grants = stack.of_type(ACCESS_ENTRY, ACCESS_POLICY_ASSOCIATION)
    checked: set = set()
    for record in stack.records:
        resource_type = str(record.get("type"))
        if not resource_type.startswith("kubernetes:"):
            continue
        if not record.get("custom", True) and not record.get("provider"):
            continue  # a component; its children carry the provider
        provider = stack.provider_of(record)
        if provider is None or provider.get("type") != KUBERNETES_PROVIDER:
            yield Finding("provider", record.get("provider"),
                          "in-cluster resources must use the stack's explicit kubernetes provider", record=record)
            continue
        urn = provider.get("urn")
        if urn in checked:
            continue
        checked.add(urn)
        if not grants:
            yield Finding("dependsOn", provider.get("dependsOn") or [],
                          "the kubernetes provider must depend on the deployer's aws:eks/accessEntry:AccessEntry "
                          "so cluster access outlives every in-cluster resource on destroy", record=provider)
            continue
        ancestors = {r.get("urn") for r in stack.upstream(provider)}
        missing = [str(g.get("name")) for g in grants if g.get("urn") not in ancestors]
        if missing:
            yield Finding("dependsOn", provider.get("dependsOn") or [],
                          f"the kubernetes provider must depend on every EKS access grant, or a destroy run by that "
                          f"principal (an admin, the reaper) deletes its own access before the in-cluster objects "
                          f"and fails with 403; not an ancestor: {', '.join(sorted(missing))}", record=provider)
