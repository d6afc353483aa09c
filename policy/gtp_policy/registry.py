"""The contract: every policy of the gtp-platform pack, in report order.

All policies are MANDATORY: each guards a security boundary, a destroy that would otherwise hang or leak,
or a GPU-sharing setup that fails at runtime (NCCL refuses two ranks per GPU); none is a mere preference.
Per-stack overrides go through `--policy-pack-config` (`"<name>": {"enforcementLevel": "advisory"}`).
"""
from __future__ import annotations

from . import rules_aws as aws
from . import rules_kubernetes as k8s
from . import rules_lifecycle as life
from . import rules_supply_chain as supply
from .model import Rule

R, S = "resource", "stack"

POLICIES: tuple[Rule, ...] = (
    # EKS control plane
    Rule("eks-private-endpoint-in-production", "Production EKS clusters expose only a private API endpoint.",
         R, aws.eks_private_endpoint_in_production),
    Rule("eks-public-access-cidrs", "A public EKS endpoint lists its allowed CIDRs and never 0.0.0.0/0 or ::/0.",
         R, aws.eks_public_access_cidrs),
    Rule("eks-secrets-encryption", "EKS encrypts Kubernetes secrets with a KMS key (encryptionConfig).",
         R, aws.eks_secrets_encryption),
    Rule("eks-secrets-key-rotation", "The KMS key that encrypts EKS secrets has automatic rotation enabled.",
         S, aws.eks_secrets_key_rotation),
    Rule("kms-key-rotation", "Symmetric KMS keys have automatic rotation enabled.", R, aws.kms_key_rotation),
    Rule("eks-control-plane-logs", "EKS ships all five control-plane log types to CloudWatch.",
         R, aws.eks_control_plane_logs),
    Rule("eks-api-authentication-mode", "EKS authenticates with access entries only (authenticationMode API).",
         R, aws.eks_api_authentication_mode),
    Rule("eks-no-implicit-creator-admin", "The cluster creator gets no implicit cluster-admin.",
         R, aws.eks_no_implicit_creator_admin),
    # Nodes
    Rule("nodes-use-launch-template", "Managed node groups use a launch template.",
         R, aws.nodes_use_launch_template),
    Rule("nodes-imdsv2", "Launch templates require IMDSv2 with a hop limit of 1.", R, aws.nodes_imdsv2),
    Rule("nodes-encrypted-volumes", "Launch templates encrypt every EBS volume.", R, aws.nodes_encrypted_volumes),
    Rule("nodes-no-ssh", "Nodes have no SSH key pair and node groups no remote access.", R, aws.nodes_no_ssh),
    Rule("nodes-no-public-ip", "Launch template network interfaces never associate a public IP.",
         R, aws.nodes_no_public_ip),
    Rule("nodes-private-subnets", "Node groups use no subnet that maps public IPs on launch.",
         S, aws.nodes_private_subnets),
    Rule("gpu-node-group-taint", "GPU node groups carry the taint nvidia.com/gpu=true:NO_SCHEDULE.",
         R, aws.gpu_node_group_taint),
    Rule("eks-node-repair-needs-monitoring-agent", "Node groups with node repair run beside the "
         "eks-node-monitoring-agent add-on (it reports GPU faults to repair).", S,
         aws.node_repair_needs_monitoring_agent),
    Rule("gpu-instance-nvidia-ami", "Node groups of NVIDIA GPU instance types use an NVIDIA AMI type.",
         R, aws.gpu_instance_nvidia_ami),
    # ECR
    Rule("ecr-scan-on-push", "ECR repositories scan images on push.", R, aws.ecr_scan_on_push),
    Rule("ecr-immutable-tags", "ECR repositories have immutable tags.", R, aws.ecr_immutable_tags),
    Rule("ecr-kms-encryption", "ECR repositories are encrypted with KMS.", R, aws.ecr_kms_encryption),
    Rule("ecr-lifecycle-policy", "Every ECR repository has a lifecycle policy.", S, aws.ecr_lifecycle_policy),
    Rule("ecr-no-public-repository-policy", "ECR repository policies grant nothing to the '*' principal.",
         R, aws.ecr_no_public_repository_policy),
    Rule("production-image-signed-or-own-build", "Production workloads run only the stack's own image build or "
         "an image digest CI signed and verified (image.signedDigests).",
         S, supply.production_image_signed_or_own_build, upstream=False),
    # IAM
    Rule("iam-no-wildcard-actions", "Policies of node and training roles list actions; no '*' or 'service:*'.",
         S, aws.iam_no_wildcard_actions),
    Rule("pod-identity-single-service-account",
         "Pod Identity associations name exactly one namespace and service account, without wildcards.",
         R, aws.pod_identity_single_service_account),
    Rule("irsa-trust-scoped", "IRSA trust policies pin :sub to one service account with StringEquals.",
         R, aws.irsa_trust_scoped),
    # Kubernetes pod security. How a container is written: objects the program applies itself (upstream=False:
    # not an operator manifest's objects, Rule.upstream); host namespaces and hostPath: every object.
    Rule("k8s-run-as-non-root", "Containers run as non-root (runAsNonRoot true).",
         R, k8s.k8s_run_as_non_root, upstream=False),
    Rule("k8s-read-only-root-filesystem", "Containers have a read-only root filesystem.",
         R, k8s.k8s_read_only_root_filesystem, upstream=False),
    Rule("k8s-drop-all-capabilities", "Containers drop ALL capabilities.",
         R, k8s.k8s_drop_all_capabilities, upstream=False),
    Rule("k8s-no-privilege-escalation", "Containers are not privileged and disallow privilege escalation.",
         R, k8s.k8s_no_privilege_escalation, upstream=False),
    Rule("k8s-seccomp-runtime-default", "Containers run with the RuntimeDefault seccomp profile.",
         R, k8s.k8s_seccomp_runtime_default, upstream=False),
    Rule("k8s-no-host-namespaces", "Pods use no hostNetwork, hostPID or hostIPC outside the device-plugin namespace.",
         R, k8s.k8s_no_host_namespaces),
    Rule("k8s-no-host-path", "Pods mount no hostPath volumes outside the device-plugin namespace.",
         R, k8s.k8s_no_host_path),
    Rule("k8s-requests-equal-limits", "Every container sets resource requests equal to its limits.",
         R, k8s.k8s_requests_equal_limits, upstream=False),
    Rule("k8s-image-by-digest", "Container images are referenced by digest.",
         R, k8s.k8s_image_by_digest, upstream=False),
    Rule("k8s-image-from-stack-registry", "Container images come from the stack's registry.",
         R, k8s.k8s_image_from_stack_registry, upstream=False),
    Rule("offline-images-from-site-registry", "On an air-gapped stack every image (containers, chart values, operator "
         "manifests, the training image) comes from the site registry.", R, supply.offline_images_from_site_registry),
    Rule("k8s-no-loadbalancer-on-ephemeral", "Ephemeral stacks create no LoadBalancer Services.",
         R, k8s.k8s_no_loadbalancer_on_ephemeral),
    Rule("k8s-privileged-namespace-allow-list", "Only the GPU device-plugin namespace enforces the privileged "
         "Pod Security level.", R, k8s.k8s_privileged_namespace_allow_list),
    # GPU sharing
    Rule("gpu-shared-single-rank", "Multi-rank training jobs request whole GPUs, never nvidia.com/gpu.shared slices.",
         R, k8s.gpu_shared_single_rank),
    Rule("gpu-mps-replicas-range", "MPS sharing in the device plugin uses 2..48 replicas per GPU.",
         R, k8s.gpu_mps_replicas_range),
    Rule("gpu-sharing-renamed-resource", "Shared GPU slices are advertised as nvidia.com/gpu.shared "
         "(renameByDefault true).", R, k8s.gpu_sharing_renamed_resource),
    Rule("k8s-trainjob-resources-per-node", "A TrainJob requests its GPUs, and every GPU/EFA resource its runtime's "
         "node container requests, in spec.trainer.resourcesPerNode.requests.", S, k8s.trainjob_resources_per_node),
    # Lifecycle and destroy safety
    Rule("aws-required-tags", "AWS providers' defaultTags and launch templates' instance tags carry the required "
         "gtp:* tags with this stack's values.", S, life.aws_required_tags),
    Rule("ephemeral-ttl-tags", "Ephemeral stacks tag AWS resources with gtp:ttl-hours and gtp:expires-at.",
         S, life.ephemeral_ttl_tags),
    Rule("ephemeral-no-protect", "Ephemeral stacks protect no resource.", S, life.ephemeral_no_protect),
    Rule("ephemeral-no-retain-on-delete", "Ephemeral stacks retain no resource on delete.",
         S, life.ephemeral_no_retain_on_delete),
    Rule("ephemeral-force-delete", "Ephemeral stacks force-delete ECR repositories and S3 buckets.",
         S, life.ephemeral_force_delete),
    Rule("production-protect-stateful", "Production protects clusters, KMS keys, file systems, buckets and "
         "repositories.", S, life.production_protect_stateful),
    Rule("production-no-force-delete", "Production never force-deletes ECR repositories or S3 buckets.",
         S, life.production_no_force_delete),
    Rule("custom-resources-depend-on-operator", "Custom resources depend on the operator that reconciles them.",
         S, life.custom_resources_depend_on_operator),
    Rule("kubernetes-provider-depends-on-access-entry", "In-cluster resources use a kubernetes provider that "
         "depends on every EKS access grant (deployer, admins, reaper), so a destroy keeps its own access to the end.",
         S, life.kubernetes_provider_depends_on_access_entry),
)

POLICY_NAMES = tuple(rule.name for rule in POLICIES)
assert len(set(POLICY_NAMES)) == len(POLICY_NAMES), "policy names must be unique"
