"""The labels a node really carries, by who writes them: the node group itself, EKS and the kubelet, NVIDIA's GPU
feature discovery (GFD) and Node Feature Discovery (NFD). One catalog, read by the scheduling and scale-from-zero
simulation (verify/simulate/nodes.py, autoscaler.py): a pod selecting a label nobody writes never schedules.

Sources (pinned versions):
- kubelet / cloud provider well-known labels: k8s.io/api `core/v1/well_known_labels.go` (`kubernetes.io/arch`,
  `kubernetes.io/os`, `kubernetes.io/hostname`, `node.kubernetes.io/instance-type`, `topology.kubernetes.io/region`,
  `topology.kubernetes.io/zone`); the AWS cloud provider sets the last three on EC2 nodes.
- EKS managed node groups: "Managed node groups" in the EKS user guide (nodes carry `eks.amazonaws.com/nodegroup`,
  `eks.amazonaws.com/nodegroup-image`, `eks.amazonaws.com/capacityType` = ON_DEMAND | SPOT | CAPACITY_BLOCK) plus
  the group's own `labels`.
- GFD, NVIDIA/k8s-device-plugin v0.20.0 (chart 0.20.0): `internal/lm/nvml.go` `NewDeviceLabeler` merges
  machine-type, CUDA version, `nvidia.com/mig.capable`, `newSharingLabeler` (`nvidia.com/mps.capable`: "false"
  unless the node's config shares by MPS), the resource labeler and `nvidia.com/gpu.mode`;
  `internal/lm/resource.go` `baseLabeler` writes `nvidia.com/gpu.product` / `.count` / `.replicas` /
  `.sharing-strategy` (always under the full `nvidia.com/gpu.` prefix, even when the shared resource is renamed;
  `getProductName` appends `-SHARED` only for a shared, *un*renamed resource), `single("memory", MiB)` and
  `newArchitectureLabels` (`.family`, `.compute.major`, `.compute.minor`; `getArchFamily`).
  **Nothing in v0.20.0 writes `nvidia.com/gpu.present`**: `git grep gpu.present v0.20.0` finds it only as an
  input — the chart's default affinity (`deployments/helm/nvidia-device-plugin/values.yaml`: "We allow a GPU
  deployment to be forced by setting the following label"), the static manifests and a kind demo script that
  sets it by hand. A pod selecting it lands only on nodes an operator labelled.
- NFD v0.19.0 (the chart's `nfd` subchart): `source/pci/pci.go` `GetLabels` labels every PCI device whose class
  starts with an entry of `deviceClassWhitelist` as `pci-<deviceLabelFields joined by '_'>.present = true` under
  `feature.node.kubernetes.io/`; the device-plugin chart sets the whitelist to "02", "03" and the fields to `vendor`
  (values.yaml `nfd.worker.config`) → `feature.node.kubernetes.io/pci-10de.present = "true"` where an NVIDIA *PCI*
  display/3D controller exists (discrete GPUs). Jetson's GPU is integrated (not on PCI): no such label there.
"""

from __future__ import annotations

import re

from catalog.gpu_instances import JETSON_GPU_MODELS

# --- Kubernetes well-known (kubelet, cloud provider) --------------------------------------------------------
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
# cluster-autoscaler's AWS template adds the EBS CSI topology key too (aws_manager.go `buildGenericLabels`).
EBS_CSI_ZONE = "topology.ebs.csi.aws.com/zone"

# --- EKS managed node groups ---------------------------------------------------------------------------------
EKS_NODEGROUP = "eks.amazonaws.com/nodegroup"
EKS_NODEGROUP_IMAGE = "eks.amazonaws.com/nodegroup-image"
EKS_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"

# --- GFD (device plugin chart 0.20.0) and NFD ----------------------------------------------------------------
GPU_PRESENT = "nvidia.com/gpu.present"
"""Written by nothing the platform installs (see the module docstring): an operator's label, or the GPU Operator's."""
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_MEMORY = "nvidia.com/gpu.memory"
GPU_FAMILY = "nvidia.com/gpu.family"
GPU_REPLICAS = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
GPU_COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
GPU_COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"
MPS_CAPABLE = "nvidia.com/mps.capable"
MIG_CAPABLE = "nvidia.com/mig.capable"
NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"
DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
"""Read (not written) by the plugin's config-manager (`cmd/config-manager/main.go` `DefaultConfigLabel`): which
named config of the `config.map` a node uses; absent → the chart's `config.default`."""

UNKNOWN = "<unknown>"
"""The value of a label whose value can't be known offline (a generated node name, a zone the subnets decide):
the label exists, and an `Exists` or `NotIn` matches it, but no `In`/`Gt`/`Lt` does."""


# GPU facts GFD reads from NVML, by the catalog's model name: the NVML device name (`nvidia-smi --query-gpu=name`)
# and the CUDA compute capability. A model missing here gets no product/family labels (UNKNOWN product).
_NVML: dict[str, tuple[str, tuple[int, int]]] = {
    "A10G": ("NVIDIA A10G", (8, 6)),
    "L4": ("NVIDIA L4", (8, 9)),
    "L40S": ("NVIDIA L40S", (8, 9)),
    "T4": ("Tesla T4", (7, 5)),
    "T4G": ("NVIDIA T4G", (7, 5)),
    "A100": ("NVIDIA A100-SXM4-40GB", (8, 0)),
    "H100": ("NVIDIA H100 80GB HBM3", (9, 0)),
    "H200": ("NVIDIA H200", (9, 0)),
    "B200": ("NVIDIA B200", (10, 0)),
    "Orin": ("Orin (nvgpu)", (8, 7)),
    "Xavier": ("Xavier", (7, 2)),
}
# MIG-capable models (A100 and newer data-centre GPUs).
_MIG_CAPABLE = ("A100", "H100", "H200", "B200")


def sanitise(name: str) -> str:
    """GFD's `sanitise` (internal/lm/resource.go): drop characters outside `[A-Za-z0-9-_. ]`, join words with '-'."""
    return "-".join(re.sub(r"[^A-Za-z0-9\-_. ]", "", name).split())


def arch_family(major: int, minor: int) -> str:
    """GFD's `getArchFamily` (internal/lm/resource.go, v0.20.0)."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    return {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper", 10: "blackwell",
            12: "blackwell", 13: "rubin"}.get(major, "undefined")


def kubernetes_labels(*, architecture: str, hostname: str = UNKNOWN) -> dict[str, str]:
    """What the kubelet writes on every node (any distribution: EKS, k3s)."""
    return {ARCH: architecture, OS: "linux", HOSTNAME: hostname}


def eks_labels(*, node_group_name: str, capacity_type: str, instance_type: str, region: str,
               zone: str = UNKNOWN) -> dict[str, str]:
    """What EKS and the AWS cloud provider add on a managed node group's node (besides the group's own labels)."""
    return {EKS_NODEGROUP: node_group_name, EKS_NODEGROUP_IMAGE: UNKNOWN, EKS_CAPACITY_TYPE: capacity_type,
            INSTANCE_TYPE: instance_type, REGION: region, ZONE: zone}


def gfd_labels(*, num_gpus: int, gpu_model: str, gpu_memory_gib: float, sharing_strategy: str = "none",
               replicas: int = 1, renamed: bool = True) -> dict[str, str]:
    """What GFD writes on a node with `num_gpus` GPUs of `gpu_model` whose device-plugin config shares them by
    `sharing_strategy` (`none`, `mps`, `time-slicing`) with `replicas` per GPU (`renamed`: renameByDefault).

    `nvidia.com/gpu.memory` is the nominal size in MiB; NVML reports slightly less (an L4's 24 GiB reads 23034),
    so a `Gt` on it is judged against an upper bound; 0 (an adopted node's, not declared) gives UNKNOWN."""
    if num_gpus <= 0:
        return {}
    nvml_name, (major, minor) = _NVML.get(gpu_model, (None, (0, 0)))
    shared = sharing_strategy != "none" and replicas > 1
    product = UNKNOWN
    if gpu_model == "A100" and gpu_memory_gib >= 80:
        nvml_name = "NVIDIA A100-SXM4-80GB"  # p4de
    if nvml_name is not None:
        product = sanitise(nvml_name) + ("-SHARED" if shared and not renamed else "")
    labels = {
        GPU_PRODUCT: product,
        GPU_COUNT: str(num_gpus),
        GPU_REPLICAS: str(replicas),
        GPU_SHARING_STRATEGY: sharing_strategy if shared else "none",
        GPU_MEMORY: str(int(gpu_memory_gib * 1024)) if gpu_memory_gib > 0 else UNKNOWN,
        MIG_CAPABLE: "true" if gpu_model in _MIG_CAPABLE else "false",
        # newSharingLabeler: "false" unless MPS; under MPS, isMPSCapable (no MIG-enabled device).
        MPS_CAPABLE: "true" if sharing_strategy == "mps" else "false",
    }
    if major:
        labels |= {GPU_FAMILY: arch_family(major, minor), GPU_COMPUTE_MAJOR: str(major),
                   GPU_COMPUTE_MINOR: str(minor)}
    return labels


def nfd_labels(*, gpu_model: str | None) -> dict[str, str]:
    """The NFD labels that matter for GPU placement: the NVIDIA PCI device label on discrete-GPU nodes."""
    if gpu_model is None or gpu_model in JETSON_GPU_MODELS:
        return {}
    return {NFD_NVIDIA_PCI: "true"}


# --- EC2 network topology (AWS cloud provider) -----------------------------------------------------------------
# Who writes them and when: the AWS cloud-controller-manager (kubernetes/cloud-provider-aws, the `cloud-node`
# controller EKS runs for every cluster), at node registration: `InstanceMetadata` (pkg/providers/v1/
# instances_v2.go:162 at v1.34.3) adds `getAdditionalLabels` (:70-111), which calls ec2:DescribeInstanceTopology
# for the instance and writes one `topology.k8s.aws/network-node-layer-<n>` per returned network node, top layer
# first (:86 "If topology labels are already set, skip", :100-104 `layer := index + 1`). It asks only for the
# instance types the provider expects an answer for (pkg/providers/v1/topology.go:43
# `^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$`); every other type is skipped without a label. EC2 answers
# only for the instance types on the "Prerequisites for Amazon EC2 topology" page
# (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html, "Instance types"):
# 3 network nodes for the g6e/g7e, hpc, p3dn/p4d/p4de/p5/p5e/p5en/p6e-gb200 and trn types below, 4 for p6-b200 /
# p6-b300. A node of any other type (g5, g6, p3.*...) never carries them. The labels exist only once the instance
# runs: a scale-from-zero template (cluster-autoscaler, verify/simulate/autoscaler.py) can't know their values, so
# the simulation treats them as UNKNOWN on a template node and Kueue computes a topology-aware placement only
# after the nodes registered (Kueue's TAS with a ProvisioningRequest admission check: components/kueue.py).
NETWORK_NODE_LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"
NETWORK_NODE_LAYERS = tuple(f"{NETWORK_NODE_LAYER_PREFIX}{layer}" for layer in (1, 2, 3))
"""The layers every topology-capable type has (top to bottom); p6-b200/b300 add a fourth, unused here."""

_TOPOLOGY_3 = (
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g6e.48xlarge", "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
    "hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge", "hpc7a.12xlarge",
    "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6e-gb200.36xlarge",
    "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
)
_TOPOLOGY_4 = ("p6-b200.48xlarge", "p6-b300.48xlarge")
TOPOLOGY_INSTANCE_TYPES: dict[str, int] = {**dict.fromkeys(_TOPOLOGY_3, 3), **dict.fromkeys(_TOPOLOGY_4, 4)}
"""Instance type → how many network-node layers EC2 returns for it (the prerequisites page above)."""


def _cloud_provider_asks(instance_type: str) -> bool:
    """cloud-provider-aws pkg/providers/v1/topology.go:43 (v1.34.3): the types it calls DescribeInstanceTopology for."""
    return re.fullmatch(r"(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)", instance_type) is not None


def network_topology_layers(instance_type: str) -> int:
    """How many `topology.k8s.aws/network-node-layer-*` labels a node of `instance_type` carries once registered:
    0 when EC2 has no topology for the type. The g6e/g7e types are on EC2's list, but cloud-provider-aws v1.34.3
    still labels them: `GetNodeTopology` asks EC2 for every type not yet cached as unsupported (topology.go:87-131,
    `mightSupportTopology` :148-175) and the regex only decides whether an empty answer is an error (:116-128), so the
    list, not the regex, is what a node carries."""
    return TOPOLOGY_INSTANCE_TYPES.get(instance_type, 0)


def topology_labels(instance_type: str) -> dict[str, str]:
    """The network labels a registered node of `instance_type` carries (values known only on the real node)."""
    return dict.fromkeys(NETWORK_NODE_LAYERS[:min(3, network_topology_layers(instance_type))], UNKNOWN)
