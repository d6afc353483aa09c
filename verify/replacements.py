"""Which input changes force Pulumi to replace (delete and re-create) a resource, per resource type.

A plan diff that shows ``instanceTypes: ["g6.xlarge"] -> ["g6.2xlarge"]`` as a one-line update hides that EKS
must create a new node group and drain the old one. ``REPLACE_ON`` lists, for every custom resource type the
stacks register, the input properties (dotted paths, as ``verify.plan_diff.flatten`` writes them, matched as a
prefix) whose change forces replacement. ``tests/test_replacements.py`` fails when a plan registers a type that
has no entry here.

Sources (the facts are the providers', not ours):
- aws:*: pulumi-aws bridges terraform-provider-aws; a property is replace-on-change where the Terraform schema
  says ``ForceNew: true`` (SDKv2) or ``RequiresReplace()`` (framework) — see
  hashicorp/terraform-provider-aws ``internal/service/<service>/<resource>.go`` (named per entry), and
  pulumi-aws's ``provider/cmd/pulumi-resource-aws/schema.json`` where the bridge records them.
- kubernetes:*: pulumi-kubernetes ``provider/pkg/provider/provider.go`` (``forceNewProperties``) and
  ``provider/pkg/metadata/...``: a changed ``metadata.name`` or ``metadata.namespace`` always replaces; fields the
  API server declares immutable (Job's pod template, a PVC's spec, a StorageClass's parameters, a binding's
  roleRef, a PriorityClass's value) replace too. Helm v3 Release: ``provider/pkg/provider/helm_release.go``.
- docker:*: pulumi-docker bridges kreuzwerker/terraform-provider-docker (``internal/provider/resource_docker_*.go``);
  ``docker:index/image:Image`` is pulumi-docker's native resource (``provider/image.go``).
- pulumi:providers:*: a provider whose target changes (another region, cluster or daemon) replaces every
  resource it manages (pulumi-aws ``provider/resources.go`` region; pulumi-kubernetes ``DiffConfig``).
"""

from __future__ import annotations

from collections.abc import Iterable

_K8S_NAME = ("metadata.name", "metadata.namespace")

REPLACE_ON: dict[str, tuple[str, ...]] = {
    # internal/service/autoscaling/group_tag.go: autoscaling_group_name and the tag block are ForceNew.
    "aws:autoscaling/tag:Tag": ("autoscalingGroupName", "tag"),
    # internal/service/logs/group.go: name, name_prefix, log_group_class ForceNew.
    "aws:cloudwatch/logGroup:LogGroup": ("name", "namePrefix", "logGroupClass"),
    # internal/service/ec2/vpc_default_security_group.go: vpc_id ForceNew.
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": ("vpcId",),
    # internal/service/ec2/ec2_eip.go: address, domain, network_border_group, public_ipv4_pool, ipam_pool_id.
    "aws:ec2/eip:Eip": ("address", "domain", "networkBorderGroup", "publicIpv4Pool", "ipamPoolId",
                        "customerOwnedIpv4Pool"),
    # internal/service/ec2/vpc_internet_gateway.go: vpc_id is updatable (attach/detach); nothing forces new.
    "aws:ec2/internetGateway:InternetGateway": (),
    # internal/service/ec2/ec2_launch_template.go: only name/name_prefix; data changes make a new version.
    "aws:ec2/launchTemplate:LaunchTemplate": ("name", "namePrefix"),
    # internal/service/ec2/vpc_nat_gateway.go: allocation_id, connectivity_type, private_ip, subnet_id.
    "aws:ec2/natGateway:NatGateway": ("allocationId", "connectivityType", "privateIp", "subnetId"),
    # internal/service/ec2/ec2_placement_group.go: every argument but tags is ForceNew.
    "aws:ec2/placementGroup:PlacementGroup": ("name", "namePrefix", "strategy", "partitionCount", "spreadLevel"),
    # internal/service/ec2/vpc_route_table.go: vpc_id ForceNew.
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    # internal/service/ec2/vpc_route_table_association.go: subnet_id, gateway_id ForceNew.
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "gatewayId"),
    # internal/service/ec2/vpc_security_group.go: name, name_prefix, description, vpc_id ForceNew.
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "description", "vpcId"),
    # internal/service/ec2/vpc_subnet.go: vpc_id, cidr_block, availability_zone(_id), outpost_arn ForceNew.
    "aws:ec2/subnet:Subnet": ("vpcId", "cidrBlock", "availabilityZone", "availabilityZoneId", "outpostArn"),
    # internal/service/ec2/transitgateway_vpc_attachment.go (resourceTransitGatewayVPCAttachment): transit_gateway_id
    # and vpc_id ForceNew; subnet_ids and the options are modified in place (ModifyTransitGatewayVpcAttachment).
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment": ("transitGatewayId", "vpcId"),
    # internal/service/ec2/vpc_.go: cidr_block, ipv4_ipam_pool_id, ipv4_netmask_length ForceNew.
    "aws:ec2/vpc:Vpc": ("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength"),
    # internal/service/ecr/lifecycle_policy.go: repository ForceNew.
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ("repository",),
    # internal/service/ecr/repository.go: name and encryption_configuration ForceNew.
    "aws:ecr/repository:Repository": ("name", "encryptionConfigurations"),
    # internal/service/efs/access_point.go: file_system_id, posix_user, root_directory ForceNew.
    "aws:efs/accessPoint:AccessPoint": ("fileSystemId", "posixUser", "rootDirectory"),
    # internal/service/efs/file_system.go: creation_token, encrypted, kms_key_id, performance_mode,
    # availability_zone_name ForceNew.
    "aws:efs/fileSystem:FileSystem": ("creationToken", "encrypted", "kmsKeyId", "performanceMode",
                                      "availabilityZoneName"),
    # internal/service/efs/mount_target.go: file_system_id, subnet_id, ip_address ForceNew.
    "aws:efs/mountTarget:MountTarget": ("fileSystemId", "subnetId", "ipAddress"),
    # internal/service/eks/access_entry.go: cluster_name, principal_arn, type ForceNew.
    "aws:eks/accessEntry:AccessEntry": ("clusterName", "principalArn", "type"),
    # internal/service/eks/access_policy_association.go: no Update; every argument ForceNew.
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": ("clusterName", "principalArn", "policyArn",
                                                                "accessScope"),
    # internal/service/eks/addon.go: cluster_name, addon_name ForceNew (addon_version updates in place).
    "aws:eks/addon:Addon": ("clusterName", "addonName"),
    # internal/service/eks/cluster.go: name, role_arn, vpc_config.subnet_ids/security_group_ids,
    # kubernetes_network_config, bootstrap_self_managed_addons, access_config.bootstrap_cluster_creator_admin_...
    "aws:eks/cluster:Cluster": ("name", "roleArn", "vpcConfig.subnetIds", "vpcConfig.securityGroupIds",
                                "kubernetesNetworkConfig", "bootstrapSelfManagedAddons",
                                "accessConfig.bootstrapClusterCreatorAdminPermissions", "outpostConfig"),
    # internal/service/eks/node_group.go: ami_type, capacity_type, cluster_name, disk_size, instance_types,
    # node_group_name(_prefix), node_role_arn, remote_access, subnet_ids, launch_template.id/name ForceNew.
    "aws:eks/nodeGroup:NodeGroup": ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes",
                                    "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess",
                                    "subnetIds", "launchTemplate.id", "launchTemplate.name"),
    # internal/service/eks/pod_identity_association.go: cluster_name, namespace, service_account RequiresReplace.
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("clusterName", "namespace", "serviceAccount"),
    # internal/service/fsx/lustre_file_system.go: subnet_ids, security_group_ids, deployment_type,
    # storage_type, kms_key_id, import/export_path, drive_cache_type, file_system_type_version, efa_enabled.
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("subnetIds", "securityGroupIds", "deploymentType", "storageType",
                                                  "kmsKeyId", "importPath", "exportPath", "driveCacheType",
                                                  "fileSystemTypeVersion", "efaEnabled"),
    # internal/service/iam/role.go: name, name_prefix, path ForceNew.
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    # internal/service/iam/role_policy.go: name, name_prefix, role ForceNew.
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    # internal/service/iam/role_policy_attachment.go: role, policy_arn ForceNew.
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("role", "policyArn"),
    # internal/service/kms/alias.go: name, name_prefix ForceNew.
    "aws:kms/alias:Alias": ("name", "namePrefix"),
    # internal/service/kms/key.go: customer_master_key_spec, key_usage, multi_region, custom_key_store_id.
    "aws:kms/key:Key": ("customerMasterKeySpec", "keyUsage", "multiRegion", "customKeyStoreId", "xksKeyId"),
    # internal/service/s3/bucket.go: bucket, bucket_prefix, object_lock_enabled ForceNew.
    "aws:s3/bucket:Bucket": ("bucket", "bucketPrefix", "objectLockEnabled"),
    # internal/service/s3/bucket_ownership_controls.go: bucket ForceNew.
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": ("bucket",),
    # internal/service/s3/bucket_public_access_block.go: bucket ForceNew.
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": ("bucket",),
    # internal/service/s3/bucket_server_side_encryption_configuration.go: bucket, expected_bucket_owner.
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "bucket", "expectedBucketOwner"),
    # internal/service/s3/bucket_versioning.go: bucket, expected_bucket_owner, mfa ForceNew.
    "aws:s3/bucketVersioning:BucketVersioning": ("bucket", "expectedBucketOwner", "mfa"),
    # internal/service/sqs/queue.go: name, name_prefix, fifo_queue ForceNew.
    "aws:sqs/queue:Queue": ("name", "namePrefix", "fifoQueue"),
    # internal/service/sqs/queue_redrive_allow_policy.go: queue_url ForceNew.
    "aws:sqs/redriveAllowPolicy:RedriveAllowPolicy": ("queueUrl",),
    # internal/service/ec2/vpc_security_group_egress_rule.go / _ingress_rule.go: security_group_id
    # RequiresReplace (the rule's other fields are modified in place).
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("securityGroupId",),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("securityGroupId",),
    # pulumi-docker provider/image.go: a new image name is a new image; build changes update in place.
    "docker:index/image:Image": ("imageName",),
    # terraform-provider-docker resource_docker_network.go: every argument is ForceNew.
    "docker:index/network:Network": ("name", "driver", "options", "internal", "attachable", "ingress",
                                     "ipamConfigs", "ipamDriver", "ipv6", "labels"),
    # terraform-provider-docker resource_docker_service.go: name ForceNew (the spec updates the service).
    "docker:index/service:Service": ("name",),
    # pulumi-kubernetes: metadata.name/namespace always; plus the API server's immutable fields.
    # Cluster-scoped, every spec field mutable (k8s.io/api admissionregistration/v1: no immutable markers).
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy": ("metadata.name",),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding": ("metadata.name",),
    "kubernetes:batch/v1:Job": _K8S_NAME + ("spec.template", "spec.selector", "spec.completions"),
    # provider/pkg/provider/diff.go:22-36 `forceNewProperties` (v4.25.0): a ConfigMap's data and binaryData replace it
    # unless the provider sets enableConfigMapMutable (default false, provider.go:586-600; no stack's provider
    # does). `make up-test` found it: plan-diff called the readiness gate's script an update, the engine replaced it.
    "kubernetes:core/v1:ConfigMap": _K8S_NAME + ("data", "binaryData"),
    "kubernetes:core/v1:LimitRange": _K8S_NAME,
    "kubernetes:core/v1:Namespace": ("metadata.name",),
    "kubernetes:core/v1:PersistentVolume": ("metadata.name", "spec.csi", "spec.nfs", "spec.hostPath",
                                            "spec.storageClassName", "spec.volumeMode"),
    "kubernetes:core/v1:PersistentVolumeClaim": _K8S_NAME + ("spec.accessModes", "spec.storageClassName",
                                                             "spec.volumeName", "spec.volumeMode",
                                                             "spec.selector"),
    "kubernetes:core/v1:ResourceQuota": _K8S_NAME,
    "kubernetes:core/v1:ServiceAccount": _K8S_NAME,
    "kubernetes:elastic.iml.github.io/v1alpha1:ElasticJob": _K8S_NAME,
    # helm_release.go: a new release name or namespace is another release.
    "kubernetes:helm.sh/v3:Release": ("name", "namespace"),
    "kubernetes:keda.sh/v1alpha1:ScaledJob": _K8S_NAME,
    "kubernetes:keda.sh/v1alpha1:ScaledObject": _K8S_NAME,
    "kubernetes:kubeflow.org/v1:PyTorchJob": _K8S_NAME,
    # Kubeflow Trainer v2.3.0 CRDs: the provider replaces on a new name only (it knows no immutable field of a
    # custom resource); to run a changed job from scratch, rename the workload.
    "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime": ("metadata.name",),
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob": _K8S_NAME,
    # Kueue v0.19.2 CRDs: the provider replaces on a new name only; it knows no CEL rule of a CRD. The API server
    # refuses some updates (vendor/operators/kueue-v0.19.2.yaml x-kubernetes-validations): Topology spec.levels and
    # AdmissionCheck spec.controllerName are immutable, and so are a ResourceFlavor's nodeLabels, tolerations and
    # topologyName once it has a topologyName (the TAS flavors). Changing one of those fails `pulumi up` until the
    # object is renamed (a new name is a replacement here).
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": ("metadata.name",),
    "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue": _K8S_NAME,
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor": ("metadata.name",),
    "kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck": ("metadata.name",),
    "kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig": ("metadata.name",),
    "kubernetes:kueue.x-k8s.io/v1beta2:Topology": ("metadata.name",),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": _K8S_NAME,
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": ("metadata.name",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("metadata.name", "roleRef"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": _K8S_NAME + ("roleRef",),
    "kubernetes:scheduling.k8s.io/v1:PriorityClass": ("metadata.name", "value", "preemptionPolicy"),
    "kubernetes:storage.k8s.io/v1:StorageClass": ("metadata.name", "provisioner", "parameters", "reclaimPolicy",
                                                  "volumeBindingMode"),
    # Providers: another region / cluster / daemon replaces the provider and every resource under it.
    "pulumi:providers:aws": ("region",),
    "pulumi:providers:kubernetes": ("kubeconfig", "cluster", "context"),
    "pulumi:providers:docker": ("host",),
}


def forcing(type_token: str, changed_paths: Iterable[str]) -> list[str]:
    """The changed input paths (``inputs.``-prefixed or bare) that force `type_token` to be replaced."""
    props = REPLACE_ON.get(type_token, ())
    out = []
    for path in changed_paths:
        bare = path.removeprefix("inputs.")
        if path.startswith(("options.", "dependsOn", "parent")):
            continue
        if any(bare == p or bare.startswith((p + ".", p + "[")) for p in props):
            out.append(bare)
    return out
