"""Issue 3: network, EKS control plane, GPU node groups, IAM and the Kubernetes provider, as planned."""

from __future__ import annotations

import json
from pathlib import Path

from components.gpu_node_group import autoscaler_tags
from components.launch_template import launch_template_args
from components.network import subnet_layout
from tests.conftest import plan_modified, plan_stack
from verify.plan import COMPUTED

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}


def test_network_has_private_node_subnets_in_two_zones_and_public_ones_only_for_nat_and_lbs() -> None:
    dev = plan_stack("dev")
    subnets = dev.by_type("aws:ec2/subnet:Subnet")
    private = [s for s in subnets if "private" in s.name]
    public = [s for s in subnets if "public" in s.name]
    assert len({s.inputs["availabilityZone"] for s in private}) == 2
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in subnets)
    assert all(s.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1" for s in private)
    assert all(s.inputs["tags"]["kubernetes.io/role/elb"] == "1" for s in public)
    assert len(dev.by_type("aws:ec2/natGateway:NatGateway")) == 1  # natGateways: single
    assert len(plan_stack("prod").by_type("aws:ec2/natGateway:NatGateway")) == 3  # one-per-az over 3 zones


def test_subnet_layout_is_disjoint() -> None:
    layout = subnet_layout("10.0.0.0/16", ["a", "b", "c"])
    cidrs = [p.private_cidr for p in layout] + [p.public_cidr for p in layout]
    assert len(set(cidrs)) == 6 and layout[0].private_cidr == "10.0.0.0/19" and layout[0].public_cidr == "10.0.224.0/22"


def test_control_plane_settings() -> None:
    for stack, public in (("dev", True), ("prod", False)):
        plan = plan_stack(stack)
        cluster = plan.one("aws:eks/cluster:Cluster")
        inputs = cluster.inputs
        assert inputs["vpcConfig"]["endpointPrivateAccess"] is True
        assert inputs["vpcConfig"]["endpointPublicAccess"] is public
        assert inputs["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
        assert inputs["encryptionConfig"]["resources"] == ["secrets"]
        assert inputs["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
        assert plan.one("aws:kms/key:Key", "eks-secrets").inputs["enableKeyRotation"] is True
        log_group = plan.one("aws:cloudwatch/logGroup:LogGroup")
        assert log_group.inputs["name"] == f"/aws/eks/gtp-{stack}/cluster" and log_group.inputs["retentionInDays"] > 0
        assert plan.depends_transitively(cluster, log_group)
        addons = {a.inputs["addonName"]: a for a in plan.by_type("aws:eks/addon:Addon")}
        assert set(addons) >= {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "aws-ebs-csi-driver"}
        assert json.loads(addons["vpc-cni"].inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
        # Every add-on at a build: the catalog's, or EKS's default looked up at `up` for the node monitoring agent,
        # whose builds aren't on record (tests/test_node_health.py).
        assert all(a.inputs["addonVersion"] for a in addons.values())
        assert addons["eks-node-monitoring-agent"].inputs["addonVersion"] == "eks-default-build-for-1.34"
    assert (plan_stack("dev").one("aws:eks/cluster:Cluster").inputs["vpcConfig"]["publicAccessCidrs"]
            == ["203.0.113.0/24"])


def test_access_entries_for_deployer_and_admins() -> None:
    prod = plan_stack("prod")
    principals = {e.inputs["principalArn"] for e in prod.by_type("aws:eks/accessEntry:AccessEntry")}
    assert principals == {"arn:aws:iam::210987654321:role/gtp-prod-deployer",
                          "arn:aws:iam::210987654321:role/platform-admins",
                          "arn:aws:iam::210987654321:role/gtp-preview"}
    dev = plan_stack("dev")
    assert {e.inputs["principalArn"] for e in dev.by_type("aws:eks/accessEntry:AccessEntry")} == {
        "arn:aws:iam::123456789012:role/gtp-dev-deployer", "arn:aws:iam::123456789012:role/platform-admins",
        "arn:aws:iam::123456789012:role/gtp-preview"}


def test_launch_templates_are_hardened() -> None:
    for stack in ("dev", "prod"):
        for template in plan_stack(stack).by_type("aws:ec2/launchTemplate:LaunchTemplate"):
            metadata = template.inputs["metadataOptions"]
            assert metadata["httpTokens"] == "required" and metadata["httpPutResponseHopLimit"] == 1
            volume = template.inputs["blockDeviceMappings"][0]["ebs"]
            assert volume["encrypted"] == "true" and volume["volumeType"] == "gp3"
            assert "keyName" not in template.inputs
            for interface in template.inputs.get("networkInterfaces", []):
                assert interface["associatePublicIpAddress"] == "false"


def test_gpu_node_groups_taint_ami_and_repair() -> None:
    dev = plan_stack("dev")
    group = dev.one("aws:eks/nodeGroup:NodeGroup", "g6-nodes")
    assert group.inputs["taints"] == [GPU_TAINT]
    assert group.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert group.inputs["capacityType"] == "SPOT"
    assert group.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 2}
    # Repair with the unhealthy-fraction guard and one node at a time (docs/operations.md, "Node health and repair").
    assert group.inputs["nodeRepairConfig"] == {"enabled": True, "maxUnhealthyNodeThresholdPercentage": 50,
                                                "maxParallelNodesRepairedCount": 1}
    assert "remoteAccess" not in group.inputs
    assert group.options["ignoreChanges"] == ["scalingConfig.desiredSize"]


def test_efa_interfaces_and_placement_groups() -> None:
    prod = plan_stack("prod")
    h100 = prod.one("aws:ec2/launchTemplate:LaunchTemplate", "h100-nodes")
    interfaces = h100.inputs["networkInterfaces"]
    assert len(interfaces) == 32  # p5.48xlarge
    assert all(i["interfaceType"] == "efa" for i in interfaces)
    assert [i["networkCardIndex"] for i in interfaces] == list(range(32))
    assert h100.inputs["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == (
        "cr-0123456789abcdef0")
    assert len(prod.one("aws:ec2/launchTemplate:LaunchTemplate", "a100-nodes").inputs["networkInterfaces"]) == 4
    placement = {p.name for p in prod.by_type("aws:ec2/placementGroup:PlacementGroup")}
    assert placement == {"a100-placement"}  # present without a reservation, absent with one (h100)
    assert "placement" not in h100.inputs


def test_scale_from_zero_tags_for_a_min_zero_group() -> None:
    dev = plan_stack("dev")
    tags = {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in dev.by_type("aws:autoscaling/tag:Tag")}
    # dev shares its one L4 as 4 MPS slices (renamed): the template node offers 4 nvidia.com/gpu.shared and no
    # whole GPU, plus the root volume (200 GiB) as ephemeral storage, which every training pod requests.
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu.shared"] == "4"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "0"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"] == "200Gi"
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert tags["k8s.io/cluster-autoscaler/node-template/label/gtp.dev/node-group"] == "g6"
    group = dev.one("aws:eks/nodeGroup:NodeGroup", "g6-nodes")
    assert group.inputs["tags"]["k8s.io/cluster-autoscaler/gtp-dev"] == "owned"
    release = dev.one("kubernetes:helm.sh/v3:Release", "autoscaler-release")
    assert (release.inputs["chart"] == "vendor/charts/cluster-autoscaler-9.52.1"
            and release.inputs["values"]["autoDiscovery"] == {"clusterName": "gtp-dev"})
    identity = dev.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "autoscaler-identity")
    assert identity.inputs["serviceAccount"] == "cluster-autoscaler"


def test_autoscaler_tags_pure() -> None:
    tags = autoscaler_tags("c", 8, {"a": "b"}, {"nvidia.com/gpu": ("true", "NO_SCHEDULE")}, num_efa_interfaces=32,
                           disk_size_gib=500)
    prefix = "k8s.io/cluster-autoscaler/node-template"
    assert tags[f"{prefix}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{prefix}/label/a"] == "b"
    assert tags[f"{prefix}/resources/nvidia.com/gpu"] == "8"
    assert f"{prefix}/resources/nvidia.com/gpu.shared" not in tags
    assert tags[f"{prefix}/resources/ephemeral-storage"] == "500Gi"


def test_autoscaler_tags_of_a_shared_group_offer_slices_not_whole_gpus() -> None:
    tags = autoscaler_tags("c", 8, {}, {}, disk_size_gib=100, gpu_slices_per_gpu=4)
    prefix = "k8s.io/cluster-autoscaler/node-template/resources"
    assert tags[f"{prefix}/nvidia.com/gpu.shared"] == "32"
    # 0, not absent: the AWS provider seeds nvidia.com/gpu from the instance type before applying the tags.
    assert tags[f"{prefix}/nvidia.com/gpu"] == "0"


def test_autoscaler_resource_tags_are_kubernetes_quantities() -> None:
    """The AWS provider parses every resources/ tag with resource.ParseQuantity (aws_manager.go)."""
    import re
    quantity = re.compile(r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?|[mkMGTPE]|[eE][0-9]+)?$")
    tags = autoscaler_tags("c", 1, {}, {}, disk_size_gib=200, gpu_slices_per_gpu=2)
    resources = {k: v for k, v in tags.items() if "/node-template/resources/" in k}
    assert resources and all(quantity.match(v) for v in resources.values()), resources


def test_capacity_block_launch_template() -> None:
    args = launch_template_args(name="n", disk_size_gib=100, tags={}, capacity_reservation_id="cr-1",
                                capacity_block=True)
    assert args["instance_market_options"] == {"market_type": "capacity-block"}


def test_iam_has_no_wildcard_actions_and_pod_identity_is_scoped() -> None:
    dev = plan_stack("dev")
    for policy in dev.by_type("aws:iam/rolePolicy:RolePolicy"):
        if policy.inputs["policy"] == COMPUTED:
            continue
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            assert all("*" not in action for action in statement["Action"]), policy.name
    attached = {a.inputs["policyArn"].rsplit("/", 1)[-1]
                for a in dev.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if a.name.startswith("eks-node-")}
    assert attached == {"AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly",
                        "AmazonSSMManagedInstanceCore"}
    training = dev.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "training-training")
    assert training.inputs["namespace"] == "training-dev" and training.inputs["serviceAccount"] == "trainer"


def test_kubernetes_provider_depends_on_cluster_node_groups_and_deployer_access() -> None:
    prod = plan_stack("prod")
    provider = prod.one("pulumi:providers:kubernetes")
    for type_, name in (("aws:eks/cluster:Cluster", "eks-cluster"), ("aws:eks/nodeGroup:NodeGroup", "h100-nodes"),
                        ("aws:eks/nodeGroup:NodeGroup", "a100-nodes"), ("aws:eks/nodeGroup:NodeGroup", "eks-system"),
                        ("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "eks-deployer")):
        assert prod.one(type_, name).urn in provider.depends_on


def test_protection_by_lifecycle(tmp_path: Path) -> None:
    prod = plan_stack("prod")
    assert prod.one("aws:eks/cluster:Cluster").options["protect"] is True
    assert all(k.options["protect"] for k in prod.by_type("aws:kms/key:Key"))
    dev = plan_stack("dev")
    assert not any(r.options["protect"] for r in dev.resources)
    assert dev.one("aws:kms/key:Key", "eks-secrets").inputs["deletionWindowInDays"] == 30

    def ephemeral(config: dict) -> None:
        config["gtp:lifecycle"] = {"ephemeral": True, "ttlHours": 4, "createdAt": "2026-12-02T13:00:00Z"}

    bench = plan_modified(tmp_path, "dev", ephemeral)
    assert bench.one("aws:kms/key:Key", "eks-secrets").inputs["deletionWindowInDays"] == 7
    tags = json.loads(bench.one("pulumi:providers:aws").inputs["defaultTags"])["tags"]
    assert tags["gtp:ttl-hours"] == "4" and tags["gtp:expires-at"] == "2026-12-02T17:00:00Z"


def test_edge_has_no_aws_cluster_resources_and_a_provider_from_the_secret_kubeconfig() -> None:
    edge = plan_stack("edge")
    assert not [r for r in edge.resources if r.type.startswith("aws:")]
    provider = edge.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"


def test_outputs_name_the_cluster_and_gpu_capacity() -> None:
    prod = plan_stack("prod")
    assert prod.outputs["clusterName"] == "gtp-prod"
    assert prod.outputs["gpuNodeGroups"]["h100"] == {"gpuModel": "H100", "gpusPerNode": 8, "maxGpus": 32, "maxNodes": 4}
    assert prod.outputs["kubeconfig"] == "[secret]" and prod.outputs["oidcIssuer"] == COMPUTED


def test_a_transit_gateway_deployer_gets_an_attachment_routes_and_443_before_any_kubernetes_resource() -> None:
    """prod's deployer sits behind a Transit Gateway: the VPC is attached to it, every private route table routes the
    runners' CIDRs through it, the endpoint admits them on 443, and the Kubernetes provider waits for all of it."""
    prod = plan_stack("prod")
    attachment = prod.one("aws:ec2transitgateway/vpcAttachment:VpcAttachment", "network-deployer")
    assert attachment.inputs["transitGatewayId"] == "tgw-0123456789abcdef0"
    assert len(attachment.inputs["subnetIds"]) == 3  # one private subnet per zone
    private_tables = [t for t in prod.by_type("aws:ec2/routeTable:RouteTable") if "private" in t.name]
    assert private_tables and all(
        {"cidrBlock": "192.0.2.0/24", "transitGatewayId": "tgw-0123456789abcdef0"} in t.inputs["routes"]
        and attachment.urn in t.depends_on for t in private_tables)
    ingress = prod.one("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "eks-api-from-192-0-2-0-24")
    assert (ingress.inputs["cidrIpv4"], ingress.inputs["fromPort"], ingress.inputs["toPort"]) == (
        "192.0.2.0/24", 443, 443)
    provider = prod.one("pulumi:providers:kubernetes")
    assert {attachment.urn, ingress.urn, *[t.urn for t in private_tables]} <= set(provider.depends_on)


def test_a_public_endpoint_deployer_opens_nothing_in_the_vpc() -> None:
    dev = plan_stack("dev")
    assert dev.by_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment") == []
    assert [r for r in dev.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
            if r.name.startswith("eks-api-from-")] == []
    assert all(len(t.inputs["routes"]) == 1 for t in dev.by_type("aws:ec2/routeTable:RouteTable"))


def test_an_in_vpc_deployer_gets_443_on_the_endpoint_and_no_attachment(tmp_path: Path) -> None:
    def in_vpc(config: dict) -> None:
        config["gtp:network"] = {"existingVpcId": "vpc-0a1b2c3d",
                                 "existingPrivateSubnetIds": ["subnet-0a1b2c3d", "subnet-0b1c2d3e"]}
        config["gtp:cluster"]["endpointPublicAccess"] = False
        del config["gtp:cluster"]["publicAccessCidrs"]
        config["gtp:cluster"]["deployer"] = {"access": "in-vpc", "runnerLabels": ["self-hosted", "gtp-dev"],
                                             "cidrs": ["10.9.0.0/24"]}

    plan = plan_modified(tmp_path, "dev", in_vpc)
    assert plan.by_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment") == []
    ingress = plan.one("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "eks-api-from-10-9-0-0-24")
    assert ingress.inputs["cidrIpv4"] == "10.9.0.0/24"
    assert ingress.urn in plan.one("pulumi:providers:kubernetes").depends_on
