"""Every upstream component this platform installs, pinned in one place.

Bump a version here and nowhere else; the offline plan and its golden files show the effect in review.
Each entry names the upstream source so a reviewer can check what a bump pulls in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VENDOR_DIR = "vendor"
"""Byte-exact copies of every upstream chart and operator manifest deployed (vendor/SOURCES.md, SHA256SUMS).
Relative to the project root, which is where the Pulumi CLI runs the program and its providers."""


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned to an exact version, installed from its vendored copy (`path`); `repository` is where
    the copy came from (provenance, and what a reviewer checks a bump against)."""

    repository: str
    chart: str
    version: str

    @property
    def path(self) -> str:
        """The vendored chart directory, relative to the project root."""
        return f"{VENDOR_DIR}/charts/{self.chart}-{self.version}"


# --- Kubernetes -----------------------------------------------------------------------------------------
# Kubernetes minor versions this program is tested against (kubernetes-validate schemas exist for each,
# and EKS offers them in standard or extended support).
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.32", "1.33", "1.34", "1.35")

# EKS managed add-ons, pinned per add-on. `aws eks describe-addon-versions --kubernetes-version <v>` lists
# the builds EKS offers; these are the newest builds compatible with 1.32-1.35 at the time of pinning.
# kube-proxy is the exception: its minor must equal the cluster's (kube-proxy may not be newer than the API
# server, nor more than three minors older), so it is pinned per Kubernetes version in EKS_KUBE_PROXY below.
EKS_ADDONS: dict[str, str] = {
    "vpc-cni": "v1.20.4-eksbuild.1",
    "coredns": "v1.12.4-eksbuild.1",
    "eks-pod-identity-agent": "v1.3.9-eksbuild.3",
    "aws-ebs-csi-driver": "v1.51.1-eksbuild.1",
    "aws-efs-csi-driver": "v2.1.13-eksbuild.1",
    "aws-fsx-csi-driver": "v1.7.0-eksbuild.1",
}

# kube-proxy add-on build per Kubernetes minor: the EKS user guide's "kube-proxy versions" table
# (docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html; 1.32-1.34 from the revision that listed
# v1.34.1-eksbuild.2, 1.35 from the first revision listing 1.35).
EKS_KUBE_PROXY: dict[str, str] = {
    "1.32": "v1.32.9-eksbuild.2",
    "1.33": "v1.33.5-eksbuild.2",
    "1.34": "v1.34.1-eksbuild.2",
    "1.35": "v1.35.3-eksbuild.2",
}


NODE_MONITORING_AGENT = "eks-node-monitoring-agent"
# The EKS node monitoring agent add-on (aws/eks-node-monitoring-agent): it sets the AcceleratedHardwareReady,
# KernelReady, NetworkingReady... node conditions that EKS node auto repair acts on (EKS user guide, "Automatically
# repair nodes in EKS clusters", node-repair.html: AcceleratedHardwareReady repaired after 10m, Replace or Reboot);
# without it repair sees only the kubelet's Ready condition. Its DaemonSet tolerates every taint
# (charts/eks-node-monitoring-agent/values.yaml:93-95 at v1.7.0), so it runs on the tainted GPU nodes.
EKS_DEFAULT_BUILD_ADDONS: tuple[str, ...] = (NODE_MONITORING_AGENT,)
"""Add-ons whose builds AWS publishes only through DescribeAddonVersions (EKS user guide, "Verify Amazon EKS add-on
version compatibility with a cluster", addon-compat.html): no AWS page lists an `eksbuild` per Kubernetes version to
record here offline. They get what upstream documents instead: EKS's own default build for the cluster's version,
read at `preview`/`up` by the provider's add-on-version lookup (`aws.eks.get_addon_version` without `most_recent`:
terraform-provider-aws internal/service/eks/addon_version_data_source.go `findAddonVersionByTwoPartKey` returns the
first build whose compatibility says `DefaultVersion`), exported as the stack output `eksAddonVersions`, and pinned
per stack with `cluster.addonVersions` once recorded."""


EKS_MANAGED_ADDONS: tuple[str, ...] = (*EKS_ADDONS, "kube-proxy", *EKS_DEFAULT_BUILD_ADDONS)
"""Every EKS managed add-on a stack may install (by EKS's add-on name)."""
EKS_ADDON_BUILD = r"^v\d+\.\d+\.\d+-eksbuild\.\d+$"
"""The shape of an add-on build as DescribeAddonVersions lists it (`v1.12.4-eksbuild.1`)."""


def eks_addon_version(addon: str, kubernetes_version: str) -> str | None:
    """The catalog's build of an EKS managed add-on for a cluster of `kubernetes_version` (a supported minor); None
    for an add-on the catalog leaves to EKS's default build (`EKS_DEFAULT_BUILD_ADDONS`)."""
    if addon == "kube-proxy":
        return EKS_KUBE_PROXY[kubernetes_version]
    if addon in EKS_DEFAULT_BUILD_ADDONS:
        return None
    return EKS_ADDONS[addon]


# --- GPU enablement -------------------------------------------------------------------------------------
# https://github.com/NVIDIA/k8s-device-plugin (chart bundles GFD and NFD as a dependency).
NVIDIA_DEVICE_PLUGIN = HelmChart("https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin", "0.20.0")
# https://github.com/NVIDIA/dcgm-exporter
DCGM_EXPORTER = HelmChart("https://nvidia.github.io/dcgm-exporter/helm-charts", "dcgm-exporter", "4.6.0")
# https://github.com/aws/eks-charts/tree/master/stable/aws-efa-k8s-device-plugin
EFA_DEVICE_PLUGIN = HelmChart("https://aws.github.io/eks-charts", "aws-efa-k8s-device-plugin", "v0.5.20")
# https://github.com/prometheus-community/helm-charts/tree/main/charts/prometheus
PROMETHEUS = HelmChart("https://prometheus-community.github.io/helm-charts", "prometheus", "27.39.0")
# https://github.com/grafana/helm-charts
GRAFANA = HelmChart("https://grafana.github.io/helm-charts", "grafana", "10.1.4")

# --- Cluster autoscaling --------------------------------------------------------------------------------
# https://github.com/kubernetes/autoscaler/tree/master/charts/cluster-autoscaler
CLUSTER_AUTOSCALER = HelmChart("https://kubernetes.github.io/autoscaler", "cluster-autoscaler", "9.52.1")
# The ProvisioningRequest CRD of the autoscaler that chart runs (image tag v1.34.1 = tag cluster-autoscaler-1.34.1),
# vendored byte-exact (vendor/SOURCES.md): the chart ships none, and Kueue's ProvisioningRequest admission check and
# the autoscaler's `--enable-provisioning-requests` both need it (components/cluster_autoscaler.py).
CLUSTER_AUTOSCALER_VERSION = "1.34.1"
PROVISIONING_REQUEST_CRD = f"{VENDOR_DIR}/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"
# The node-feature-discovery subchart's crds/ file, which helm would install once and never delete: the stack applies
# it from the vendored chart itself (components/helm.py `pinned_release` `crds`), so that `pulumi destroy` removes it.
NFD_CRDS = "charts/node-feature-discovery/crds/nfd-api-crds.yaml"

# --- Training operators ---------------------------------------------------------------------------------
# Kubeflow training-operator v1 (PyTorchJob) lives on kubeflow/trainer branch release-1.9; master is
# Trainer v2 and must never be installed in its place (see shared DESIGN.md).
TRAINING_OPERATOR_VERSION = "v1.9.4"
# The kustomize render of github.com/kubeflow/trainer `manifests/overlays/standalone` at the tag (namespace
# `kubeflow`), vendored byte-exact and applied as is.
TRAINING_OPERATOR_MANIFEST = f"{VENDOR_DIR}/operators/training-operator-{TRAINING_OPERATOR_VERSION}.yaml"
# DLRover's ElasticJob controller (elastic.iml.github.io/v1alpha1); the image carries dlrover (torch comes from the base
# image) of the same minor version so `dlrover-run` speaks the controller's protocol.
DLROVER_VERSION = "v0.6.1"
# The kustomize render of the path DLRover's deployment guide applies (`kubectl -n dlrover apply -k
# go/elasticjob/config/manifests/bases`; docs/deployment/controller.md), with its ElasticJob CRD swapped for the
# same tag's `config/crd/bases` one (vendor/SOURCES.md says why; tools/vendor.py derives and checks it). It
# creates the `dlrover` namespace. Note: at v0.6.1 its Deployment runs the controller image
# `easydl/elasticjob-controller:master` and passes `--master-image=...dlrover:master`, i.e. the upstream
# kustomization itself does not pin the controller's images.
DLROVER_MANIFEST = f"{VENDOR_DIR}/derived/dlrover-{DLROVER_VERSION}.yaml"
DLROVER_PYTHON = "0.6.1"
# Kueue (gang admission with quotas): the kustomize render of `config/default` at tag v0.19.2 with the release's
# image setting (vendor/SOURCES.md "Kueue"), vendored byte-exact. Its ConfigMap and pull policy are rewritten per
# stack into a derived copy (components/kueue.py `kueue_manifest`), never in place.
KUEUE_VERSION = "v0.19.2"
KUEUE_MANIFEST = f"{VENDOR_DIR}/operators/kueue-{KUEUE_VERSION}.yaml"
# Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainJob) with the JobSet v0.12.0 controller it bundles: the
# kustomize render of github.com/kubeflow/trainer `manifests/overlays/manager` at the tag (namespace
# `kubeflow-system`; vendor/SOURCES.md has the provenance, incl. the rebuilt JobSet release asset). It coexists with
# training-operator v1 (different API group and namespace) but a stack installs it only for a
# `workloads.<name>.kind: trainjob`.
KUBEFLOW_TRAINER_VERSION = "v2.3.0"  # not TRAINER_VERSION: that is our trainer package's (below)
JOBSET_VERSION = "v0.12.0"
TRAINER_MANIFEST = f"{VENDOR_DIR}/operators/kubeflow-trainer-{KUBEFLOW_TRAINER_VERSION}.yaml"

OPERATOR_MANIFESTS: dict[str, str] = {
    "training-operator": TRAINING_OPERATOR_MANIFEST,
    "dlrover": DLROVER_MANIFEST,
    "trainer": TRAINER_MANIFEST,
}
"""The training operators installed from a vendored manifest, by the name workload kinds ask for them
(`KubernetesWorkloadKind.operators`; stack_config/derived.py `installed_parts` decides), in the order they are
installed. Kueue is installed on its own (components/kueue.py), KEDA from its chart."""
# https://github.com/kedacore/charts
KEDA = HelmChart("https://kedacore.github.io/charts", "keda", "2.20.2")


# --- Training image -------------------------------------------------------------------------------------
TORCH_VERSION = "2.13.0"
TRAINER_VERSION = "0.1.0"
# Official PyTorch CUDA *runtime* image for TORCH_VERSION (Docker Hub: pytorch/pytorch). Never `latest`.
# Published for linux/amd64 only, so it is the base of the x86_64 flavour alone (BASE_IMAGES below).
PYTORCH_BASE_IMAGE = (
    "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    "@sha256:db80a41f8428644cebcb3d75b0b62df334ab6c0e75785951eb25f48bfbd42407"
)


@dataclass(frozen=True)
class BaseImage:
    """The base of one image flavour: a platform and the GPU software stack its nodes need."""

    flavour: str
    platform: str
    """The one platform this base is built for."""
    reference: str | None
    """`name:tag@sha256:<digest>`, or None while nobody has verified a digest: a stack then refuses to build
    with it (stack_config.derived.base_image_refusal) unless it sets `image.baseImage` itself."""
    what: str
    """What the base is and where its pin comes from (for the refusal message and reviewers)."""


# One base per platform and device. Only x86_64 is pinned: no digest of the arm64 bases could be verified
# offline when this table was written, and inventing one would be worse than refusing to build. Pin one by
# filling `reference` (tag AND digest, checked with `docker buildx imagetools inspect`), or set `image.baseImage`
# in the stack (e.g. a copy in the site's own registry).
BASE_IMAGES: dict[str, BaseImage] = {
    "cuda-x86_64": BaseImage("cuda-x86_64", "linux/amd64", PYTORCH_BASE_IMAGE,
                             "PyTorch CUDA runtime image for x86_64 (Docker Hub pytorch/pytorch)"),
    "cuda-sbsa": BaseImage("cuda-sbsa", "linux/arm64", None,
                           "a PyTorch CUDA image for arm64 SBSA servers (Grace, Graviton + NVIDIA), e.g. NVIDIA NGC's "
                           "PyTorch container, arm64 manifest, with torch " + TORCH_VERSION),
    "jetson-l4t": BaseImage("jetson-l4t", "linux/arm64", None,
                            "an L4T/JetPack PyTorch image matching the Jetson devices' JetPack release (NVIDIA's "
                            "l4t PyTorch container for JetPack 6)"),
}


@dataclass(frozen=True)
class EfaInstaller:
    """AWS's EFA installer (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html): user-space
    libfabric with the efa provider, and the aws-ofi-nccl NCCL net plugin it bundles (built by AWS for the CUDA
    and NCCL generations it supports: check its release notes against TORCH_VERSION's CUDA/NCCL on a bump).
    The image's build verifies the tarball with every pin set here (images/trainer/verify-efa-installer.sh); with
    neither pin, a stack with EFA groups refuses to build (stack_config.derived.efa_installer_refusal)."""

    version: str
    gpg_fingerprint: str | None
    """Fingerprint (40 upper-case hex digits, no spaces) of the key AWS signs installer tarballs with, as AWS
    documents it; the build accepts the tarball only with a valid `.tar.gz.sig` by that key. AWS's guide names the
    same key for every release it walks through, so a version bump keeps it (check the page). None: no signature
    check."""
    sha256: str | None
    """SHA-256 (64 lower-case hex digits) of `aws-efa-installer-<version>.tar.gz` as AWS records it: checked too
    where set. None where AWS publishes none for this version."""
    aws_ofi_nccl: str
    """The aws-ofi-nccl (libnccl-ofi) release this installer bundles (EFA release notes, efa-changelog)."""
    nccl_range: tuple[str, str]
    """(oldest, newest tested) NCCL that aws-ofi-nccl release supports, from its release notes; torch's NCCL must
    fall inside (tests/test_catalog.py reads torch's own requirement)."""

    def __post_init__(self) -> None:
        if self.gpg_fingerprint is not None and not re.fullmatch(r"[0-9A-F]{40}", self.gpg_fingerprint):
            raise ValueError(f"EfaInstaller.gpg_fingerprint must be 40 upper-case hex digits without spaces (as "
                             f"`gpg --with-colons` prints it), got {self.gpg_fingerprint!r}")
        if self.sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ValueError(f"EfaInstaller.sha256 must be 64 lower-case hex digits, got {self.sha256!r}")


# Installed into the image's `efa` variant (images/trainer/Dockerfile stages efa-installer and net-efa) for stacks
# with EFA groups. torch 2.13.0's CUDA 13 wheels require nvidia-nccl-cu13==2.29.7 (torch's METADATA `Requires-Dist`).
# - Version: EFA installer 1.50.0 bundles aws-ofi-nccl 1.21.1 (EFA release notes, "Elastic Fabric Adapter release
#   notes", row 1.50.0, August 21, 2026), "tested with NCCL v2.31.2-1 while maintaining backward compatibility with
#   older NCCL versions (NCCL v2.17.1 and later)" (aws/aws-ofi-nccl release v1.21.1).
# - Verified as AWS documents (EC2 user guide, "Install the EFA software", step "Verify the authenticity and
#   integrity of the EFA tarball": https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html, source
#   awsdocs/amazon-ec2-user-guide doc_source/efa-start.md): import aws-efa-installer.key, whose `gpg --fingerprint`
#   "should return a fingerprint that is identical to `4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC`", then
#   `gpg --verify` the tarball's `.tar.gz.sig` (a "Good signature" by that key). The page gives the same
#   fingerprint for 1.20.0 (the archived guide) and for 1.47.0 and 1.50.0 (efa-start-nccl.html, English and Chinese
#   editions), so it is pinned below; the build also requires that key to be the signature's primary key.
# - SHA-256: none is recorded for 1.50.0. The archived copy of AWS's checksum page (doc_source/efa-verify.md,
#   "Verify the EFA installer using a checksum") stops at 1.14.0, and the newest installer AWS's
#   aws-parallelcluster-cookbook records one for, as far as could be read here, is 1.41.0
#   (cookbooks/aws-parallelcluster-environment/attributes/environment.rb:73-74, commit e9e449c8, PR #2953), whose
#   aws-ofi-nccl 1.14.2 predates notes listing torch's NCCL 2.29.7 (first in the 1.19 series). So sha256 stays None:
#   the signature is the check, and a SHA-256 AWS publishes for a pinned release goes here as an extra one.
EFA_INSTALLER = EfaInstaller(version="1.50.0", gpg_fingerprint="4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC", sha256=None,
                             aws_ofi_nccl="1.21.1", nccl_range=("2.17.1", "2.31.2"))


# --- The real test cluster (`make cluster-test`, tools/cluster_test) -----------------------------------
# Built from their Go modules (tools/cluster_test/gomod/<component>/go.mod; a test checks each go.mod against
# these). Kubernetes: the newest v1.34 patch the Go module proxy here serves (v1.34.13 answers 403), the minor of
# the dev and prod stacks; etcd: kubeadm v1.34.12's SupportedEtcdVersion for 1.34 (cmd/kubeadm/app/constants/
# constants.go:509), Debian's 3.4.23 being older than that apiserver supports; kwok: the newest tag.
CLUSTER_TEST_KUBERNETES = "v1.34.12"
CLUSTER_TEST_ETCD = "v3.6.5"
KWOK_VERSION = "v0.8.0"

# --- The real `pulumi up` (`make up-test`, tools/up_test) -------------------------------------------------
# Built from their Go modules too (tools/cluster_test/gomod/pulumi*/go.mod). The CLI: github.com/pulumi/pulumi/pkg/v3
# at the nearest version the Go module proxy here serves at or above the SDK pin (pulumi==3.272.0 in
# requirements.txt; pkg/v3 v3.272.0 answers 403, v3.274.0 is served): the SDK works with any CLI of its major at
# or above its own version. The kubernetes provider: the proxy serves its provider/ sub-module at one commit only,
# f47bc2d6f199, tagged v4.25.0 (the repository tags its root, so the sub-module has pseudo-versions only), so the
# pulumi-kubernetes SDK is pinned at 4.25.0 to match: the SDK asks the engine for a plugin of its own version or
# newer. No Python language host is served (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
# answers 403 for every version) and no pulumi-docker provider module: docs/real-pulumi.md says what runs instead.
PULUMI_CLI_VERSION = "v3.274.0"
PULUMI_KUBERNETES_PROVIDER = "4.25.0"
PULUMI_KUBERNETES_PROVIDER_MODULE = "v4.0.0-20260115033456-f47bc2d6f199"
"""The provider/v4 module version of tag v4.25.0 (`git tag --points-at f47bc2d6f199` in pulumi/pulumi-kubernetes)."""
