"""Orphan audit: AWS resources that still belong to a stack after `pulumi destroy`.

Pulumi only deletes what it tracks. EKS and its controllers create resources Pulumi never sees, and these are
what make a destroy hang or leave a bill behind (see DESIGN.md, "Destroy hangs come from"):

- ENIs of the VPC CNI (tag ``cluster.k8s.amazonaws.com/name``) and of the control plane,
- load balancers for ``type: LoadBalancer`` Services (in-tree provider: ``kubernetes.io/cluster/<c>``;
  AWS Load Balancer Controller: ``elbv2.k8s.aws/cluster``) and their security groups,
- EBS volumes of PersistentVolumeClaims (EBS CSI driver: ``kubernetes.io/cluster/<c>`` / ``KubernetesCluster`` with
  ``--k8s-tag-cluster-id``; the stack's own StorageClass passes ``gtp:stack`` and ``KubernetesCluster`` through its
  ``tagSpecification_*`` parameters, components/gpu_metrics.py ``volume_tag_parameters``),
- the control-plane log group ``/aws/eks/<cluster>/cluster`` that EKS creates itself and never deletes.

Everything the program creates carries ``gtp:stack=<stack>`` (and ``gtp:project=gtp``), so a resource is an orphan
of a stack when it carries that tag or is owned by the stack's cluster (``gtp-<stack>`` unless told otherwise).

The decision is :func:`ownership_reason` (pure, tag map in, reason out); :func:`audit` is the thin boto3 layer.
Run it by hand with ``python -m tools.orphans STACK [--cluster-name NAME] [--region REGION]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # boto3 is imported lazily so the pure part loads without it.
    import boto3

PROJECT = "gtp"
STACK_TAG = "gtp:stack"
PROJECT_TAG = "gtp:project"

# Tags whose *value* is the cluster name, set by EKS-side controllers rather than by our program.
CLUSTER_VALUE_TAGS = (
    "elbv2.k8s.aws/cluster",  # AWS Load Balancer Controller (ALB/NLB, target groups, security groups)
    "cluster.k8s.amazonaws.com/name",  # Amazon VPC CNI (ENIs it attaches to nodes)
    "KubernetesCluster",  # EBS CSI driver with k8sTagClusterId, legacy in-tree provider
    "eks:cluster-name",  # EKS managed node groups (launch templates, ASGs, their instances' volumes)
)

# The ELB APIs take at most 20 load balancers per DescribeTags call.
_ELB_TAG_BATCH = 20


@dataclass(frozen=True)
class Orphan:
    """One resource that still exists although its stack was destroyed."""

    kind: str
    """Short resource kind, e.g. ``ec2:network-interface``, ``elbv2:load-balancer``."""
    id: str
    """The AWS identifier a person would paste into the console or CLI (ID, name or ARN)."""
    region: str
    reason: str
    """Why it is attributed to the stack, e.g. ``tag gtp:stack=dev``."""


def default_cluster_name(stack: str) -> str:
    """The EKS cluster name the program uses for a stack unless its config overrides it."""
    return f"{PROJECT}-{stack}"


def tags_to_dict(tags: Iterable[Mapping[str, str]] | Mapping[str, str] | None) -> dict[str, str]:
    """Normalise the AWS tag shapes (``[{"Key": k, "Value": v}]``, lower-case keys, or a plain dict)."""
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        return {str(key): str(value) for key, value in tags.items()}
    result: dict[str, str] = {}
    for tag in tags:
        key = tag.get("Key", tag.get("key"))
        if key is not None:
            result[key] = tag.get("Value", tag.get("value", "")) or ""
    return result


def ownership_reason(tags: Mapping[str, str], *, stack: str, cluster_name: str | None = None) -> str | None:
    """Why a resource with these tags belongs to ``stack``, or None when it does not.

    A ``gtp:stack`` match counts only when ``gtp:project`` is absent or ``gtp``: another project that reuses our tag
    key with the same stack name (``dev`` is common) is not ours to report.
    """
    if tags.get(STACK_TAG) == stack and tags.get(PROJECT_TAG, PROJECT) == PROJECT:
        return f"tag {STACK_TAG}={stack}"
    if cluster_name:
        owned_key = f"kubernetes.io/cluster/{cluster_name}"
        if owned_key in tags:
            return f"tag {owned_key}={tags[owned_key]}"
        for key in CLUSTER_VALUE_TAGS:
            if tags.get(key) == cluster_name:
                return f"tag {key}={cluster_name}"
    return None


def control_plane_log_group(cluster_name: str) -> str:
    """EKS writes control-plane logs here and keeps the group after the cluster is deleted."""
    return f"/aws/eks/{cluster_name}/cluster"


def stack_region(stack: str, cwd: str | None = None) -> str | None:
    """``gtp:region`` (the program's AWS region; else ``aws:region``) from the stack's config file, read as
    plain YAML so no secret is decrypted."""
    from stack_config.source import load_yaml_file

    base = Path(cwd or ".")
    for path in (base / "stacks" / f"Pulumi.{stack}.yaml", base / f"Pulumi.{stack}.yaml"):
        if path.exists():
            config = (load_yaml_file(path) or {}).get("config") or {}
            region = config.get("gtp:region") or config.get("aws:region")
            if isinstance(region, str):
                return region
            project = base / "Pulumi.yaml"  # the project's default for gtp:region
            if project.exists():
                default = ((load_yaml_file(project) or {}).get("config") or {}).get("region") or {}
                return default.get("default") if isinstance(default, dict) else None
    return None


def format_orphans(orphans: Sequence[Orphan]) -> str:
    """A table a person can act on; the empty case says so explicitly."""
    if not orphans:
        return "no orphaned resources found"
    rows = [("KIND", "ID", "REGION", "REASON")] + [
        (orphan.kind, orphan.id, orphan.region, orphan.reason)
        for orphan in sorted(orphans, key=lambda o: (o.kind, o.region, o.id))
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3] for row in rows
    ]
    lines.append(f"{len(orphans)} orphaned resource(s)")
    return "\n".join(lines)


# --- boto3 layer -------------------------------------------------------------------------------------------------


def _ec2_tag_filters(stack: str, cluster_name: str) -> list[list[dict[str, Any]]]:
    """One server-side filter set per way a resource can be ours; results are re-checked by ownership_reason."""
    filter_sets = [
        [{"Name": f"tag:{STACK_TAG}", "Values": [stack]}],
        [{"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{cluster_name}"]}],
    ]
    filter_sets += [[{"Name": f"tag:{key}", "Values": [cluster_name]}] for key in CLUSTER_VALUE_TAGS]
    return filter_sets


def _paginate(client: Any, operation: str, result_key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(result_key, [])


def _ec2_resources(
    ec2: Any,
    *,
    operation: str,
    result_key: str,
    id_key: str,
    tags_key: str,
    kind: str,
    stack: str,
    cluster_name: str,
    region: str,
) -> list[Orphan]:
    found: dict[str, Orphan] = {}
    for filters in _ec2_tag_filters(stack, cluster_name):
        for item in _paginate(ec2, operation, result_key, Filters=filters):
            reason = ownership_reason(tags_to_dict(item.get(tags_key)), stack=stack, cluster_name=cluster_name)
            if reason and item[id_key] not in found:
                found[item[id_key]] = Orphan(kind, item[id_key], region, reason)
    return list(found.values())


def _network_interfaces(ec2: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    # Control-plane ENIs are untagged; EKS names them "Amazon EKS <cluster>" in the description.
    description = f"Amazon EKS {cluster_name}"
    found = _ec2_resources(
        ec2,
        operation="describe_network_interfaces",
        result_key="NetworkInterfaces",
        id_key="NetworkInterfaceId",
        tags_key="TagSet",
        kind="ec2:network-interface",
        stack=stack,
        cluster_name=cluster_name,
        region=region,
    )
    seen = {orphan.id for orphan in found}
    for item in _paginate(
        ec2, "describe_network_interfaces", "NetworkInterfaces",
        Filters=[{"Name": "description", "Values": [description]}],
    ):
        if item.get("Description") == description and item["NetworkInterfaceId"] not in seen:
            found.append(Orphan("ec2:network-interface", item["NetworkInterfaceId"], region,
                                f"description {description!r}"))
    return found


def _security_groups(ec2: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    return _ec2_resources(
        ec2,
        operation="describe_security_groups",
        result_key="SecurityGroups",
        id_key="GroupId",
        tags_key="Tags",
        kind="ec2:security-group",
        stack=stack,
        cluster_name=cluster_name,
        region=region,
    )


def _volumes(ec2: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    return _ec2_resources(
        ec2,
        operation="describe_volumes",
        result_key="Volumes",
        id_key="VolumeId",
        tags_key="Tags",
        kind="ec2:volume",
        stack=stack,
        cluster_name=cluster_name,
        region=region,
    )


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _elbv2_load_balancers(elbv2: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    arns = [lb["LoadBalancerArn"] for lb in _paginate(elbv2, "describe_load_balancers", "LoadBalancers")]
    orphans = []
    for batch in _batches(arns, _ELB_TAG_BATCH):
        for description in elbv2.describe_tags(ResourceArns=list(batch)).get("TagDescriptions", []):
            tags = tags_to_dict(description.get("Tags"))
            reason = ownership_reason(tags, stack=stack, cluster_name=cluster_name)
            if reason:
                orphans.append(Orphan("elbv2:load-balancer", description["ResourceArn"], region, reason))
    return orphans


def _classic_load_balancers(elb: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    names = [
        lb["LoadBalancerName"] for lb in _paginate(elb, "describe_load_balancers", "LoadBalancerDescriptions")
    ]
    orphans = []
    for batch in _batches(names, _ELB_TAG_BATCH):
        for description in elb.describe_tags(LoadBalancerNames=list(batch)).get("TagDescriptions", []):
            tags = tags_to_dict(description.get("Tags"))
            reason = ownership_reason(tags, stack=stack, cluster_name=cluster_name)
            if reason:
                orphans.append(Orphan("elb:load-balancer", description["LoadBalancerName"], region, reason))
    return orphans


def _log_groups(logs: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    orphans = []
    control_plane = control_plane_log_group(cluster_name)
    for group in _paginate(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=control_plane):
        if group["logGroupName"] == control_plane:
            orphans.append(Orphan("logs:log-group", control_plane, region, "EKS control-plane log group"))
    return orphans


def _ecr_repositories(ecr: Any, stack: str, cluster_name: str, region: str) -> list[Orphan]:
    """Repositories read directly (their tags and image count): a repository left behind with images is what made
    a destroy fail, and the person needs to know whether deleting it loses images."""
    orphans = []
    for repository in _paginate(ecr, "describe_repositories", "repositories"):
        tags = tags_to_dict(ecr.list_tags_for_resource(resourceArn=repository["repositoryArn"]).get("tags"))
        reason = ownership_reason(tags, stack=stack, cluster_name=cluster_name)
        if reason:
            images = sum(1 for _ in _paginate(ecr, "list_images", "imageIds",
                                              repositoryName=repository["repositoryName"]))
            orphans.append(Orphan("ecr:repository", repository["repositoryArn"], region,
                                  f"{reason}; {images} image(s)"))
    return orphans


def _tagged_via_tagging_api(
    tagging: Any, stack: str, cluster_name: str, region: str, resource_types: Sequence[str]
) -> list[Orphan]:
    """Log groups, ECR repositories and S3 buckets: one Resource Groups Tagging API query instead of N tag reads."""
    orphans = []
    for tag_filter in ({"Key": STACK_TAG, "Values": [stack]}, {"Key": f"kubernetes.io/cluster/{cluster_name}"}):
        for mapping in _paginate(
            tagging, "get_resources", "ResourceTagMappingList",
            TagFilters=[tag_filter], ResourceTypeFilters=list(resource_types),
        ):
            reason = ownership_reason(tags_to_dict(mapping.get("Tags")), stack=stack, cluster_name=cluster_name)
            if reason:
                arn = mapping["ResourceARN"]
                service = arn.split(":")[2]
                kind = {"logs": "logs:log-group", "ecr": "ecr:repository", "s3": "s3:bucket"}.get(service, service)
                orphans.append(Orphan(kind, arn, region, reason))
    return orphans


TAGGING_API_TYPES = ("logs:log-group", "ecr:repository", "s3")


def _still_exists(session: boto3.Session, orphan: Orphan) -> bool:
    """Whether a tagging-API hit still exists, asked of its own service. The Resource Groups Tagging API is eventually
    consistent and goes on listing resources after their deletion (re:Post, "Only get existing resources with
    ResourceGroupTaggingAPI get-resources": get-resources "return deleted cluster resources as well"), which would
    fail a clean destroy with orphans that no longer exist."""
    from botocore.exceptions import ClientError

    try:
        if orphan.kind == "s3:bucket":
            session.client("s3").head_bucket(Bucket=orphan.id.rsplit(":", 1)[-1])
        elif orphan.kind == "logs:log-group":
            name = orphan.id.split(":log-group:", 1)[1].removesuffix(":*")
            groups = session.client("logs").describe_log_groups(logGroupNamePrefix=name).get("logGroups", [])
            return any(group["logGroupName"] == name for group in groups)
        elif orphan.kind == "ecr:repository":
            session.client("ecr").describe_repositories(repositoryNames=[orphan.id.rsplit("/", 1)[-1]])
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound",
                                                            "RepositoryNotFoundException",
                                                            "ResourceNotFoundException"):
            return False
        raise
    return True


def audit(session: boto3.Session, stack: str, *, cluster_name: str | None = None) -> list[Orphan]:
    """Every resource in the session's region that still belongs to ``stack``. Raises on AWS errors.

    Reads only (Describe*/List*/GetResources); the IAM policy of the caller needs those for ec2, elasticloadbalancing,
    logs, ecr and tag. S3 buckets are global but the tagging API reports them from the region they live in.
    """
    cluster = cluster_name or default_cluster_name(stack)
    region = session.region_name
    if not region:
        raise ValueError("no AWS region: set AWS_REGION or pass --region")
    ec2 = session.client("ec2")
    orphans: list[Orphan] = []
    orphans += _network_interfaces(ec2, stack, cluster, region)
    orphans += _security_groups(ec2, stack, cluster, region)
    orphans += _volumes(ec2, stack, cluster, region)
    orphans += _elbv2_load_balancers(session.client("elbv2"), stack, cluster, region)
    orphans += _classic_load_balancers(session.client("elb"), stack, cluster, region)
    orphans += _log_groups(session.client("logs"), stack, cluster, region)
    tagged = _tagged_via_tagging_api(
        session.client("resourcegroupstaggingapi"), stack, cluster, region, TAGGING_API_TYPES
    )
    # The control-plane log group is reported by name above; the tagging API may report it again by ARN.
    control_plane_arn_part = f":log-group:{control_plane_log_group(cluster)}"
    repositories = _ecr_repositories(session.client("ecr"), stack, cluster, region)
    orphans += repositories
    seen = {orphan.id for orphan in repositories}
    orphans += [orphan for orphan in tagged if control_plane_arn_part not in orphan.id and orphan.id not in seen
                and _still_exists(session, orphan)]
    return sorted(set(orphans), key=lambda o: (o.kind, o.id))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.orphans", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--cluster-name", help="EKS cluster name (default: gtp-<stack>)")
    parser.add_argument("--region", help="AWS region (default: the stack's gtp:region, else the environment)")
    args = parser.parse_args(argv)
    import boto3

    region = args.region or stack_region(args.stack)
    try:
        orphans = audit(boto3.Session(region_name=region), args.stack, cluster_name=args.cluster_name)
    except ValueError as error:  # no region
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(format_orphans(orphans))
    return 1 if orphans else 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
