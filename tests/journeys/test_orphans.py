"""Orphan audit against moto: resources of the stack or its cluster are found, others are not."""

import boto3
import pytest
from moto import mock_aws

from tools.orphans import Orphan, audit, format_orphans, ownership_reason

REGION = "us-east-1"


@pytest.fixture
def session(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def tag_spec(resource_type, tags):
    return [{"ResourceType": resource_type, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []


@pytest.fixture
def subnet(session):
    ec2 = session.client("ec2")
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.1.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]


def create_eni(session, subnet, tags, description=""):
    return session.client("ec2").create_network_interface(
        SubnetId=subnet, Description=description, TagSpecifications=tag_spec("network-interface", tags)
    )["NetworkInterface"]["NetworkInterfaceId"]


def create_alb(session, subnet, name, tags):
    tag_list = {"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]} if tags else {}
    return session.client("elbv2").create_load_balancer(Name=name, Subnets=[subnet], **tag_list)[
        "LoadBalancers"][0]["LoadBalancerArn"]


def test_leftover_eni_and_load_balancer_of_the_stack_are_found(session, subnet):
    ours_eni = create_eni(session, subnet, {"gtp:stack": "dev", "gtp:project": "gtp", "gtp:lifecycle": "persistent"})
    cni_eni = create_eni(session, subnet, {"cluster.k8s.amazonaws.com/name": "gtp-dev"})
    control_plane_eni = create_eni(session, subnet, {}, description="Amazon EKS gtp-dev")
    create_eni(session, subnet, {})  # untagged
    create_eni(session, subnet, {"gtp:stack": "prod", "gtp:project": "gtp"})  # other stack
    create_eni(session, subnet, {"gtp:stack": "dev", "gtp:project": "someone-else"})  # other project, same stack name
    create_eni(session, subnet, {"cluster.k8s.amazonaws.com/name": "gtp-prod"})  # other cluster
    ours_alb = create_alb(session, subnet, "k8s-default-web", {"elbv2.k8s.aws/cluster": "gtp-dev"})
    tagged_alb = create_alb(session, subnet, "gtp-dev-api", {"gtp:stack": "dev"})
    create_alb(session, subnet, "other-stack", {"gtp:stack": "prod"})
    create_alb(session, subnet, "untagged", {})
    session.client("elb").create_load_balancer(
        LoadBalancerName="a0123456789", AvailabilityZones=[f"{REGION}a"],
        Listeners=[{"Protocol": "tcp", "LoadBalancerPort": 80, "InstancePort": 30080}],
        Tags=[{"Key": "kubernetes.io/cluster/gtp-dev", "Value": "owned"}],
    )
    session.client("elb").create_load_balancer(
        LoadBalancerName="b0123456789", AvailabilityZones=[f"{REGION}a"],
        Listeners=[{"Protocol": "tcp", "LoadBalancerPort": 80, "InstancePort": 30080}],
        Tags=[{"Key": "kubernetes.io/cluster/gtp-prod", "Value": "owned"}],
    )

    found = {(orphan.kind, orphan.id): orphan.reason for orphan in audit(session, "dev")}

    assert found == {
        ("ec2:network-interface", ours_eni): "tag gtp:stack=dev",
        ("ec2:network-interface", cni_eni): "tag cluster.k8s.amazonaws.com/name=gtp-dev",
        ("ec2:network-interface", control_plane_eni): "description 'Amazon EKS gtp-dev'",
        ("elbv2:load-balancer", ours_alb): "tag elbv2.k8s.aws/cluster=gtp-dev",
        ("elbv2:load-balancer", tagged_alb): "tag gtp:stack=dev",
        ("elb:load-balancer", "a0123456789"): "tag kubernetes.io/cluster/gtp-dev=owned",
    }


def test_volumes_security_groups_log_groups_and_buckets(session, subnet):
    ec2 = session.client("ec2")
    vpc_id = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=10, TagSpecifications=tag_spec(
        "volume", {"kubernetes.io/cluster/gtp-bench-a": "owned", "kubernetes.io/created-for/pvc/name": "data"})
    )["VolumeId"]
    ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=10)
    group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc_id,
                                      TagSpecifications=tag_spec("security-group", {"gtp:stack": "bench-a"}))["GroupId"]
    session.client("logs").create_log_group(logGroupName="/aws/eks/gtp-bench-a/cluster")
    session.client("logs").create_log_group(logGroupName="/aws/eks/gtp-bench-ab/cluster")
    s3 = session.client("s3")
    s3.create_bucket(Bucket="gtp-bench-a-results")
    s3.put_bucket_tagging(Bucket="gtp-bench-a-results", Tagging={"TagSet": [{"Key": "gtp:stack", "Value": "bench-a"}]})
    s3.create_bucket(Bucket="unrelated")

    orphans = audit(session, "bench-a")

    assert {(o.kind, o.id) for o in orphans} == {
        ("ec2:volume", volume),
        ("ec2:security-group", group),
        ("logs:log-group", "/aws/eks/gtp-bench-a/cluster"),
        ("s3:bucket", "arn:aws:s3:::gtp-bench-a-results"),
    }
    assert all(o.region == REGION for o in orphans)


def test_a_prometheus_volume_the_destroy_left_is_found(session):
    """Issue 41: a volume of prod's `gtp-prometheus` class, tagged as aws-ebs-csi-driver v1.51.1 tags it (its own
    tags, `--extra-create-metadata`'s, and the class's `tagSpecification_*`), still exists after a destroy (the PV
    controller deletes it after the claim, racing the add-on's and the nodes' deletion): the audit lists it. Before,
    the class passed no tags, the driver's own name no cluster, and the audit found nothing."""
    from components.gpu_metrics import PROMETHEUS_STORAGE_CLASS
    from tests.conftest import plan_stack

    storage_class = next(o for o in plan_stack("prod").kubernetes_objects()
                         if o["kind"] == "StorageClass" and o["metadata"]["name"] == PROMETHEUS_STORAGE_CLASS)
    assert storage_class["reclaimPolicy"] == "Delete"  # the volume goes with its claim; the audit is for the race
    tags = {"CSIVolumeName": "pvc-0f3c", "ebs.csi.aws.com/cluster": "true",
            "kubernetes.io/created-for/pvc/name": "prometheus-server",
            "kubernetes.io/created-for/pvc/namespace": "gpu-metrics", "kubernetes.io/created-for/pv/name": "pvc-0f3c"}
    for key, value in sorted(storage_class["parameters"].items()):
        if key.startswith("tagSpecification"):  # pkg/util/template/template.go:40: split at the first "="
            tag, _, tag_value = value.partition("=")
            tags[tag] = tag_value
    ec2 = session.client("ec2")
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=10, VolumeType="gp3",
                               TagSpecifications=tag_spec("volume", tags))["VolumeId"]

    assert [(o.kind, o.id, o.reason) for o in audit(session, "prod")] == [("ec2:volume", volume, "tag gtp:stack=prod")]
    assert tags["KubernetesCluster"] == "gtp-prod"  # found by cluster too (`--cluster-name` of a renamed stack)
    assert audit(session, "prod", cluster_name="gtp-prod")[0].id == volume


def test_clean_account_has_no_orphans(session, subnet):
    create_eni(session, subnet, {"gtp:stack": "prod"})
    assert audit(session, "dev") == []
    assert format_orphans([]) == "no orphaned resources found"


def test_custom_cluster_name(session, subnet):
    eni = create_eni(session, subnet, {"kubernetes.io/cluster/shared-edge": "shared"})
    assert [o.id for o in audit(session, "edge", cluster_name="shared-edge")] == [eni]
    assert audit(session, "edge") == []


def test_audit_without_region_fails_clearly():
    class NoRegionSession:
        region_name = None

    with pytest.raises(ValueError, match="no AWS region: set AWS_REGION or pass --region"):
        audit(NoRegionSession(), "dev")


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({"gtp:stack": "dev"}, "tag gtp:stack=dev"),
        ({"gtp:stack": "dev", "gtp:project": "gtp"}, "tag gtp:stack=dev"),
        ({"gtp:stack": "dev", "gtp:project": "other"}, None),
        ({"gtp:stack": "dev2"}, None),
        ({"kubernetes.io/cluster/gtp-dev": "owned"}, "tag kubernetes.io/cluster/gtp-dev=owned"),
        ({"kubernetes.io/cluster/gtp-dev2": "owned"}, None),
        ({"KubernetesCluster": "gtp-dev"}, "tag KubernetesCluster=gtp-dev"),
        ({"eks:cluster-name": "gtp-dev"}, "tag eks:cluster-name=gtp-dev"),
        ({"kubernetes.io/created-for/pvc/name": "data"}, None),  # says nothing about which cluster
        ({}, None),
    ],
)
def test_ownership_reason(tags, expected):
    assert ownership_reason(tags, stack="dev", cluster_name="gtp-dev") == expected


def test_format_orphans_table():
    text = format_orphans([
        Orphan("elbv2:load-balancer", "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/k8s/1", "us-east-1",
               "tag elbv2.k8s.aws/cluster=gtp-dev"),
        Orphan("ec2:network-interface", "eni-1", "us-east-1", "tag gtp:stack=dev"),
    ])
    assert text.splitlines() == [
        "KIND                   ID                                                               REGION     REASON",
        "ec2:network-interface  eni-1                                                            us-east-1  "
        "tag gtp:stack=dev",
        "elbv2:load-balancer    arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/k8s/1  us-east-1  "
        "tag elbv2.k8s.aws/cluster=gtp-dev",
        "2 orphaned resource(s)",
    ]


MANIFEST = ('{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", '
            '"config": {"digest": "sha256:aa", "size": 1, "mediaType": "x"}, "layers": []}')


def test_a_non_empty_repository_and_bucket_left_behind_are_reported(session):
    """What made dev's destroy fail: a repository with pushed images and a bucket with results still exist."""
    ecr = session.client("ecr")
    ours = ecr.create_repository(repositoryName="gtp-dev-trainer", tags=[{"Key": "gtp:stack", "Value": "dev"}])
    ecr.put_image(repositoryName="gtp-dev-trainer", imageManifest=MANIFEST, imageTag="v1")
    ecr.create_repository(repositoryName="other-trainer", tags=[{"Key": "gtp:stack", "Value": "prod"}])
    s3 = session.client("s3")
    s3.create_bucket(Bucket="gtp-dev-results")
    s3.put_bucket_tagging(Bucket="gtp-dev-results", Tagging={"TagSet": [{"Key": "gtp:stack", "Value": "dev"}]})
    s3.put_object(Bucket="gtp-dev-results", Key="bench/result.json", Body=b"{}")
    orphans = audit(session, "dev")
    assert Orphan("ecr:repository", ours["repository"]["repositoryArn"], REGION,
                  "tag gtp:stack=dev; 1 image(s)") in orphans
    assert Orphan("s3:bucket", "arn:aws:s3:::gtp-dev-results", REGION, "tag gtp:stack=dev") in orphans
    assert len(orphans) == 2


def test_orphans_cli_audits_in_the_stack_region(session, monkeypatch, capsys):
    from tests.conftest import ROOT
    from tools import orphans as orphans_module

    monkeypatch.chdir(ROOT)
    logs = boto3.client("logs", region_name="eu-central-1")
    logs.create_log_group(logGroupName="/aws/eks/gtp-edge/cluster")
    assert orphans_module.main(["edge"]) == 1  # stacks/Pulumi.edge.yaml: gtp:region eu-central-1
    assert "/aws/eks/gtp-edge/cluster  eu-central-1" in capsys.readouterr().out


def test_tagging_api_hits_are_rechecked_with_their_own_service(session, monkeypatch):
    # Before: the tagging API (eventually consistent) still listing a just-deleted bucket or log group failed a
    # clean destroy with "orphaned resources remain".
    import tools.orphans as orphans_module

    s3 = session.client("s3")
    s3.create_bucket(Bucket="gtp-dev-kept")
    session.client("logs").create_log_group(logGroupName="/gtp/dev/kept")
    stale = [Orphan("s3:bucket", "arn:aws:s3:::gtp-dev-gone", REGION, "tag gtp:stack=dev"),
             Orphan("logs:log-group", f"arn:aws:logs:{REGION}:123456789012:log-group:/gtp/dev/gone:*", REGION,
                    "tag gtp:stack=dev"),
             Orphan("ecr:repository", f"arn:aws:ecr:{REGION}:123456789012:repository/gtp-dev-gone", REGION,
                    "tag gtp:stack=dev")]
    live = [Orphan("s3:bucket", "arn:aws:s3:::gtp-dev-kept", REGION, "tag gtp:stack=dev"),
            Orphan("logs:log-group", f"arn:aws:logs:{REGION}:123456789012:log-group:/gtp/dev/kept:*", REGION,
                   "tag gtp:stack=dev")]
    monkeypatch.setattr(orphans_module, "_tagged_via_tagging_api", lambda *args: stale + live)
    assert audit(session, "dev") == sorted(live, key=lambda o: (o.kind, o.id))
