"""The upstream images each vendored chart and operator manifest runs, and where a chart takes an override.

An air-gapped site (`image.airGap`) runs copies of these from its own registry, by digest. The references are what
the vendored sources render with the values this platform sets (tests/test_mirror.py renders every chart and
checks that the rendered images are exactly these: a chart bump that changes an image fails there until this
table follows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from catalog import versions

Style = Literal["tag", "digest", "registry-tag", "registry-sha"]


@dataclass(frozen=True)
class ImageSlot:
    """One image of a chart and the values object that sets it.

    `style` is how that object's keys compose the reference (read from the chart's templates):
    - `tag`: `{{repository}}:{{tag}}` — the pin goes into the tag as `<tag>@sha256:<hex>` (a `name:tag@digest`
      reference; the runtime pulls by digest and ignores the tag);
    - `digest`: `{{repository}}@{{digest}}` when `digest` is set (prometheus chart);
    - `registry-tag`: `{{registry}}/{{repository}}:{{tag}}` (keda chart);
    - `registry-sha`: `{{registry}}/{{repository}}:{{tag}}@sha256:{{sha}}` when `sha` is set (grafana chart).
    """

    values_path: tuple[str, ...]
    source: str
    style: Style


CHART_IMAGES: dict[str, tuple[ImageSlot, ...]] = {
    # templates/_helpers.tpl "nvidia-device-plugin.fullimage"; the NFD subchart (alias nfd): master.yaml, worker.yaml
    versions.NVIDIA_DEVICE_PLUGIN.chart: (
        ImageSlot(("image",), "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "tag"),
        ImageSlot(("nfd", "image"), "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", "tag"),
    ),
    # templates/daemonset.yaml
    versions.DCGM_EXPORTER.chart: (
        ImageSlot(("image",), "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.6.0-ubuntu22.04", "tag"),
    ),
    # templates/deploy.yaml (server.image, configmapReload.prometheus.image)
    versions.PROMETHEUS.chart: (
        ImageSlot(("server", "image"), "quay.io/prometheus/prometheus:v3.6.0", "digest"),
        ImageSlot(("configmapReload", "prometheus", "image"),
                  "quay.io/prometheus-operator/prometheus-config-reloader:v0.85.0", "digest"),
    ),
    # templates/_pod.tpl (image, downloadDashboardsImage)
    versions.GRAFANA.chart: (
        ImageSlot(("image",), "docker.io/grafana/grafana:12.2.1", "registry-sha"),
        ImageSlot(("downloadDashboardsImage",), "docker.io/curlimages/curl:8.9.1", "registry-sha"),
    ),
    # templates/manager/deployment.yaml, metrics-server/deployment.yaml, webhooks/deployment.yaml
    versions.KEDA.chart: (
        ImageSlot(("image", "keda"), "ghcr.io/kedacore/keda:2.20.2", "registry-tag"),
        ImageSlot(("image", "metricsApiServer"), "ghcr.io/kedacore/keda-metrics-apiserver:2.20.2", "registry-tag"),
        ImageSlot(("image", "webhooks"), "ghcr.io/kedacore/keda-admission-webhooks:2.20.2", "registry-tag"),
    ),
}
"""Chart name → its images. A chart missing here must be in `EKS_ONLY_CHARTS`."""

EKS_ONLY_CHARTS: frozenset[str] = frozenset({versions.CLUSTER_AUTOSCALER.chart, versions.EFA_DEVICE_PLUGIN.chart})
"""Charts only an EKS stack installs, which an air-gapped stack never is (stages/air_gap.py refuses it): nothing
mirrors their images, so they have no `CHART_IMAGES` row. tests/test_mirror.py holds every pinned chart to one of
the two."""

OPERATOR_IMAGES: dict[str, tuple[str, ...]] = {
    versions.TRAINING_OPERATOR_MANIFEST: ("ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489",),
    versions.TRAINER_MANIFEST: ("ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0",
                                "registry.k8s.io/jobset/jobset:v0.12.0"),
    versions.DLROVER_MANIFEST: (
        "docker.io/kubebuilder/kube-rbac-proxy:v0.13.1",
        "easydl/elasticjob-controller:master",
        # Not a container of the manifest: the controller's `--master-image` flag, the image of the job-master
        # pod it creates for every ElasticJob (dlrover v0.6.1 go/elasticjob/cmd/main.go flag `master-image`).
        "registry.cn-hangzhou.aliyuncs.com/intell-ai/dlrover:master",
    ),
    versions.KUEUE_MANIFEST: ("registry.k8s.io/kueue/kueue:v0.19.2",),
    versions.PROVISIONING_REQUEST_CRD: (),  # a CRD only (EKS stacks' cluster-autoscaler reads it): runs nothing
    f"{versions.NVIDIA_DEVICE_PLUGIN.path}/{versions.NFD_CRDS}": (),  # NFD's CRDs (components/helm.py): nothing
}
"""Operator manifest (vendored path) → every image it runs, exactly as the file spells them (containers, and
images passed as controller flags)."""

DLROVER_RELEASE_TAG = versions.DLROVER_VERSION
ARM64_VARIANTS: dict[str, str] = {
    # dlrover v0.6.1 .github/workflows/image_dlrover_controller.yml:18-25 builds `dlrover_controller` for
    # linux/amd64 and `dlrover_controller_aarch64` for linux/arm64 from separate Dockerfiles (one platform each,
    # :56-62), tagged by docker/metadata-action's default for the release event (the tag, :49-53).
    "easydl/elasticjob-controller:master":
        f"ghcr.io/intelligent-machine-learning/dlrover_controller_aarch64:{DLROVER_RELEASE_TAG}",
    # image_dlrover_master.yml:18-40: `release_dlrover_master_py310` (linux/amd64) and
    # `release_dlrover_master_py310_aarch64` (linux/arm64).
    "registry.cn-hangzhou.aliyuncs.com/intell-ai/dlrover:master":
        f"ghcr.io/intelligent-machine-learning/release_dlrover_master_py310_aarch64:{DLROVER_RELEASE_TAG}",
}
"""An image an operator manifest names → the image its project publishes for linux/arm64 instead. DLRover
publishes arm64 only as separate `_aarch64` images: the reference its manifest names is not one (its `:master`
images are built by no workflow of the tag, so nothing shows them to carry arm64)."""

IMAGE_PLATFORMS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(ARM64_VARIANTS.values(), ("linux/arm64",)),
}
"""Image → the platforms its publisher builds (from the build files cited above); the mirror lock records the
platforms of every mirrored image (tools/mirror.py)."""


def operator_images(manifest: str, architecture: str) -> tuple[str, ...]:
    """The images an operator manifest runs on a site of `architecture` (`arm64`: `ARM64_VARIANTS` swapped in)."""
    images = OPERATOR_IMAGES[manifest]
    if architecture != "arm64":
        return images
    return tuple(ARM64_VARIANTS.get(image, image) for image in images)
