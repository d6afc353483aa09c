"""GpuMetrics: dcgm-exporter on GPU nodes, Prometheus scraping it, and optionally Grafana with the GPU dashboard.

- dcgm-exporter (`catalog.versions.DCGM_EXPORTER`) runs as root with SYS_ADMIN and mounts the kubelet's
  pod-resources socket (a hostPath) to map GPUs to pods, which only the privileged PSA level allows, so it
  is installed into the device-plugin namespace, not into `gpu-metrics`.
- Prometheus: the plain `prometheus` community chart (`catalog.versions.PROMETHEUS`), not kube-prometheus-stack:
  one server Deployment, no operator and no CRDs to outlive their controller on destroy, and its default
  annotation-based scrape jobs find dcgm-exporter's Service and the trainer pods. Release `prometheus` in
  `gpu-metrics`, so the server is `conventions.names.PROMETHEUS_URL` (KEDA's trigger reads it).
- Grafana (`catalog.versions.GRAFANA`) with Prometheus as the default data source and `dashboards/gpu.json`
  provisioned from chart values (a file provider; no sidecar, no API calls).

`gpu-metrics` enforces the *baseline* Pod Security level (warns and audits *restricted*): the charts' pods run
as non-root without host access, and node-exporter (hostPID, hostNetwork, hostPath) is not installed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from catalog import versions
from components.alert_rules import ALERT_RULES_FILE, XID_COUNT_WINDOW_MINUTES
from components.helm import pinned_release
from conventions.durations import NANOSECONDS_PER_SECOND, parse_prometheus_duration
from conventions.kubernetes import platform_labels, pod_security_labels, restricted_container, restricted_pod
from conventions.names import METRICS_NAMESPACE, PLATFORM_PRIORITY_CLASS, PROMETHEUS_RELEASE, PROMETHEUS_URL

DASHBOARD_FILE = Path(__file__).resolve().parent.parent / "dashboards" / "gpu.json"
DCGM_EXPORTER_RELEASE = "dcgm-exporter"
DCGM_EXPORTER_PORT = 9400
GRAFANA_RELEASE = "grafana"
PROMETHEUS_DATASOURCE_UID = "prometheus"
"""The data source uid `dashboards/gpu.json` refers to."""

RESTRICTED_CONTAINER = restricted_container()

DCGM_COUNTERS = """\
# The dcgm-exporter 4.6.0 chart's default list (templates/metrics-configmap.yaml), plus what the alert rules need
# (components/alert_rules.py): throttling, ECC, retired pages, the windowed XID count. Format: DCGM field (or
# exporter counter DCGM_EXP_*), Prometheus type, help (no commas: a record has exactly 3 fields).
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_ENC_UTIL,      gauge, Encoder utilization (in %).
DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).
DCGM_FI_DEV_XID_ERRORS,            gauge,   Value of the last XID error encountered.
# Commented out in dcgm-exporter's own defaults (etc/default-counters.csv:40, as `counter`): a gauge here, since
# it falls as XIDs leave the window. The GpuXidError alert reads it (the value above never resets).
DCGM_EXP_XID_ERRORS_COUNT,         gauge,   Number of each XID (label xid) in the last window.
DCGM_FI_DEV_POWER_VIOLATION,       counter, Throttling duration due to power constraints (in us).
DCGM_FI_DEV_THERMAL_VIOLATION,     counter, Throttling duration due to thermal constraints (in us).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
DCGM_FI_DEV_RETIRED_SBE,     counter, Total number of retired pages due to single-bit errors.
DCGM_FI_DEV_RETIRED_DBE,     counter, Total number of retired pages due to double-bit errors.
DCGM_FI_DEV_RETIRED_PENDING, counter, Total number of pages pending retirement.
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL,            counter, Total number of NVLink bandwidth counters for all lanes.
DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,   counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE,           gauge,   Whether remapping of rows has failed
DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE,        gauge, Ratio of cycles the device memory interface is active sending or receiving data.
DCGM_FI_PROF_PCIE_TX_BYTES,      counter, The number of bytes of active pcie tx data including both header and payload.
DCGM_FI_PROF_PCIE_RX_BYTES,      counter, The number of bytes of active pcie rx data including both header and payload.
"""
"""dcgm-exporter's counters file (chart 4.6.0 `customMetrics`: "Must be the complete list and is not additive",
values.yaml; templates/metrics-configmap.yaml writes it to the ConfigMap the `-f` argument reads)."""

PROMETHEUS_STORAGE_CLASS = "gtp-prometheus"
"""The StorageClass of Prometheus' volume on EKS (`prometheus_storage_class`)."""
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
"""The EBS CSI driver (the `aws-ebs-csi-driver` EKS add-on every EKS stack installs, components/eks_cluster.py)."""
BYTES_PER_SAMPLE = 2
"""Prometheus stores about 1-2 bytes per sample after compression (prometheus.io/docs/prometheus/latest/storage,
"Operational aspects": needed_disk_space = retention_time_seconds * ingested_samples_per_second *
bytes_per_sample); the upper end."""
SCRAPE_INTERVAL_S = 60
"""The chart's global scrape_interval (prometheus 27.39.0 values.yaml `server.global.scrape_interval: 1m`)."""
MIN_VOLUME_GIB = 10
"""The smallest volume: the emptyDir's former bound; a year of a small stack fits."""
BASE_SERIES = 2000
"""Series besides the GPUs' and trainers': Prometheus' own, Kueue's, `up` and scrape metadata of every target."""
TRAINER_SERIES = 12
"""Series one trainer pod exports (telemetry.Metrics: 6 gauges and a counter with `_total`/`_created`, plus
prometheus-client's process and platform collectors are not in its private registry) rounded up."""

def duration_seconds(text: str) -> float:
    """A Prometheus duration (`30d`, `1y`, `12h30m`) in seconds, as Prometheus reads it (model.ParseDuration,
    conventions/durations.py)."""
    try:
        return parse_prometheus_duration(text) / NANOSECONDS_PER_SECOND
    except ValueError as error:
        raise ValueError(f"{text!r} is not a Prometheus duration (e.g. 15d, 1y, 12h30m): {error}") from None


def estimated_series(gpus: int, trainer_pods: int, counters: int | None = None) -> int:
    """Active series at the stack's largest size: each GPU's dcgm-exporter counters, each trainer pod's metrics,
    and BASE_SERIES."""
    per_gpu = counters if counters is not None else sum(1 for line in DCGM_COUNTERS.splitlines()
                                                        if line.startswith(("DCGM_FI_", "DCGM_EXP_")))
    return gpus * per_gpu + trainer_pods * TRAINER_SERIES + BASE_SERIES


def prometheus_volume_gib(retention: str, series: int) -> int:
    """The volume the retention needs: retention × samples per second × BYTES_PER_SAMPLE, doubled for the WAL, the
    head block and compaction's temporary copy, at least MIN_VOLUME_GIB."""
    needed = duration_seconds(retention) * series / SCRAPE_INTERVAL_S * BYTES_PER_SAMPLE
    return max(MIN_VOLUME_GIB, math.ceil(2 * needed / 2**30))


EBS_CSI_RESERVED_TAG_KEYS = frozenset({"CSIVolumeName", "CSIVolumeSnapshotName", "ebs.csi.aws.com/cluster"})
"""Tag keys aws-ebs-csi-driver v1.51.1 refuses in `tagSpecification_*` (pkg/driver/validation.go:44-58
`validateExtraTags`, with the `kubernetes.io` prefix: EBS_CSI_RESERVED_TAG_PREFIX)."""
EBS_CSI_RESERVED_TAG_PREFIX = "kubernetes.io"
"""pkg/cloud/cloud.go:123 `KubernetesTagKeyPrefix`: a `tagSpecification` key with it fails CreateVolume
(`InvalidArgument`, pkg/driver/controller.go:267-269), so `kubernetes.io/cluster/<name>` can't be passed here."""


def volume_tag_parameters(tags: Mapping[str, str]) -> dict[str, str]:
    """`tagSpecification_<n>: "key=value"` StorageClass parameters (aws-ebs-csi-driver v1.51.1 docs/tagging.md:14-34,
    "StorageClass Tagging") that put `tags` on every volume the class provisions, in sorted key order so the plan is
    stable. The driver splits each value at its first `=` (pkg/util/template/template.go:40) and rejects reserved
    keys (EBS_CSI_RESERVED_TAG_KEYS, EBS_CSI_RESERVED_TAG_PREFIX): a key with `=` or a reserved one is left out
    rather than failing every volume's creation."""
    usable = sorted((key, value) for key, value in tags.items()
                    if "=" not in key and key not in EBS_CSI_RESERVED_TAG_KEYS
                    and not key.startswith(EBS_CSI_RESERVED_TAG_PREFIX))
    return {f"tagSpecification_{index}": f"{key}={value}" for index, (key, value) in enumerate(usable, start=1)}


def prometheus_storage_class(volume_tags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """gp3, encrypted, bound where the Prometheus pod is scheduled, tagged like the stack's other resources.

    aws-ebs-csi-driver v1.51.1 parameters (docs/parameters.md:10-16) `type: gp3`, `encrypted: "true"` (without
    `kmsKeyId` the account's default EBS key) and `csi.storage.k8s.io/fstype: ext4` stated, not left to the
    provisioner's `--default-fstype`: the kubelet applies the pod's fsGroup (65534, Prometheus' user) to a CSI
    volume only when it has an fsType (the CSIDriver's default fsGroupPolicy `ReadWriteOnceWithFSType`).
    `WaitForFirstConsumer`: EBS volumes are zonal, so the volume is created in the zone
    of the node the scheduler picked (Kubernetes docs, Storage Classes, "Volume binding mode"); `Immediate` could
    put it in a zone with no node the pod may use. `Delete`: the volume goes with the stack (`pulumi destroy`
    deletes the release and its claim) instead of leaking. Expansion allowed: a larger retention only grows it.
    `volume_tags` (`volume_tag_parameters`): the driver tags a volume with its cluster only when the controller runs
    with `--k8s-tag-cluster-id` (docs/tagging.md:9), which the EKS add-on's defaults don't promise; the stack's own
    tags (`gtp:stack`, ...) let `make destroy`'s orphan audit (tools/orphans.py) find a volume the destroy left."""
    return {"provisioner": EBS_CSI_PROVISIONER,
            "parameters": {"type": "gp3", "encrypted": "true", "csi.storage.k8s.io/fstype": "ext4",
                           **volume_tag_parameters(volume_tags or {})},
            "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete", "allowVolumeExpansion": True}


KUEUE_NAMESPACE = "kueue-system"
KUEUE_METRICS_SERVICE = "kueue-controller-manager-metrics-service"
"""Kueue v0.19.2's metrics Service (vendor/operators/kueue-v0.19.2.yaml: port 8443, https)."""


def kueue_scrape_config() -> dict[str, Any]:
    """A scrape job for Kueue's controller metrics (the queue alert reads them).

    Kueue v0.19.2 serves /metrics on :8443 over TLS behind controller-runtime's authentication and authorization
    filter (cmd/kueue/main.go:188-192 `metricsserver.Options{SecureServing: true, FilterProvider:
    filters.WithAuthenticationAndAuthorization}`): Prometheus presents its service account token, which the
    prometheus chart's ClusterRole already lets `get` the `/metrics` non-resource URL (27.39.0
    templates/clusterrole.yaml:41-44). Kueue loads a metrics certificate only when its internal cert management is
    off (main.go:215-234); the vendored config leaves it on, so controller-runtime serves a self-signed certificate
    made at start and there is no CA to verify it against: verification is skipped, and the token sent is
    Prometheus' own read-only one."""
    return {
        "job_name": "kueue",
        "scheme": "https",
        "bearer_token_file": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "tls_config": {"insecure_skip_verify": True},
        "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": [KUEUE_NAMESPACE]}}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_service_name"], "regex": KUEUE_METRICS_SERVICE, "action": "keep"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }


def metrics_namespace_labels() -> dict[str, str]:
    return pod_security_labels("baseline") | platform_labels("gpu-metrics")


# A small helper container (config reloader, init step): prometheus-config-reloader idles at a few MiB.
RELOADER_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
GRAFANA_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}


def _priority(priority_class: str | None) -> dict[str, str]:
    return {"priorityClassName": priority_class} if priority_class else {}


def dcgm_exporter_values(affinity: Mapping[str, Any], node_tolerations: list[Mapping[str, str]],
                         priority_class: str | None = None, runtime_class: str | None = None) -> dict[str, Any]:
    """Helm values of the dcgm-exporter chart: on GPU nodes only, scraped through Service annotations.

    `priority_class` replaces the chart's `system-node-critical` (dcgm-exporter 4.6.0 templates/daemonset.yaml
    `.Values.priorityClassName | default "system-node-critical"`): the exporter only observes, the node's GPUs work
    without it, and a node-critical pod makes the kubelet evict others to admit it (pkg/kubelet/preemption
    `CriticalPodAdmissionHandler`), a right kept for the device plugins. The platform class still ranks it above
    every training pod. None keeps the chart's default. A DaemonSet needs no
    PodDisruptionBudget (drains skip DaemonSet pods). `runtime_class`: the GPU nodes' NVIDIA RuntimeClass where
    their default runtime is runc (DCGM needs the driver libraries the NVIDIA runtime injects; chart 4.6.0
    templates/daemonset.yaml:45-46 `.Values.runtimeClassName`)."""
    return {
        **_priority(priority_class),
        **({"runtimeClassName": runtime_class} if runtime_class else {}),
        "affinity": dict(affinity),
        "tolerations": [dict(t) for t in node_tolerations],
        # The chart creates a ServiceMonitor by default, a prometheus-operator CRD that the plain prometheus
        # chart does not install: the release would fail. Prometheus finds the Service by annotation instead.
        "serviceMonitor": {"enabled": False},
        # Not the chart's default list: the alert rules need throttling, ECC and retired-page counters too.
        "customMetrics": DCGM_COUNTERS,
        # The window of DCGM_EXP_XID_ERRORS_COUNT, stated so the alert's text can't drift from the exporter's
        # default (dcgm-exporter 4.4.1-4.6.0 pkg/cmd/app.go:234-240; chart templates/daemonset.yaml:160-162).
        "extraEnv": [{"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "value": str(XID_COUNT_WINDOW_MINUTES * 60_000)}],
        "service": {"annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(DCGM_EXPORTER_PORT)}},
        "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"cpu": "200m", "memory": "512Mi"}},
        # The chart's default (root, SYS_ADMIN for DCGM's profiling metrics) stated in full, plus NET_RAW dropped:
        # the exporter serves HTTP and reads GPUs through DCGM, it never opens raw sockets (Checkov CKV_K8S_28).
        "securityContext": {"runAsNonRoot": False, "runAsUser": 0,
                            "capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_RAW"]}},
    }


def prometheus_values(retention: str, priority_class: str | None = None, alert_rules: Mapping[str, Any] | None = None,
                      scrape_kueue: bool = False, volume_gib: int | None = None,
                      storage_class: str = PROMETHEUS_STORAGE_CLASS) -> dict[str, Any]:
    """Helm values of the prometheus chart: the server only, with its default kubernetes scrape jobs
    (`kubernetes-service-endpoints` scrapes dcgm-exporter's annotated Service, `kubernetes-pods` scrapes
    trainer pods annotated `prometheus.io/scrape: "true"`).

    `priority_class`: prometheus 27.39.0 `server.priorityClassName` (templates/deploy.yaml). One replica and no
    PodDisruptionBudget (the chart's `server.podDisruptionBudget` stays off): two servers would be two
    independent scrapers with two TSDBs (twice the 2 GiB), and a budget on one replica either blocks every drain
    (minAvailable 1) or allows what no budget allows (maxUnavailable 1). A drain restarts it elsewhere (with a
    volume, in the volume's zone).

    `alert_rules`: a rule file (components/alert_rules.py) for `serverFiles."alerting_rules.yml"`, which the
    chart's default `rule_files` loads (values.yaml:813-840). `scrape_kueue`: add the `kueue` scrape job
    (`kueue_scrape_config`, through `extraScrapeConfigs`, a YAML string appended to scrape_configs).
    `volume_gib`: keep the TSDB on a ReadWriteOnce claim of that size in `storage_class` (values.yaml:526-572
    `server.persistentVolume`), with `retentionSize` at 80 % of it so a busier cluster than estimated drops old
    blocks instead of filling the disk; the chart's `Recreate` strategy (values.yaml:467-468) stops the old pod
    before the new one attaches the volume. None: a bounded emptyDir (no StorageClass can be assumed: EKS >= 1.30
    marks none default; k3s has local-path), so metrics survive container restarts, not pod rescheduling."""
    if volume_gib:
        storage: dict[str, Any] = {
            "persistentVolume": {"enabled": True, "storageClass": storage_class, "size": f"{volume_gib}Gi",
                                 "accessModes": ["ReadWriteOnce"]},
            # Prometheus' GB is 2^30 bytes (units.Base2Bytes in its --storage.tsdb.retention.size flag).
            "retentionSize": f"{math.floor(volume_gib * 0.8)}GB"}
    else:
        storage = {"persistentVolume": {"enabled": False}, "emptyDir": {"sizeLimit": "10Gi"}}
    extra: dict[str, Any] = {}
    if alert_rules:
        extra["serverFiles"] = {ALERT_RULES_FILE: dict(alert_rules)}
    if scrape_kueue:
        extra["extraScrapeConfigs"] = yaml.safe_dump([kueue_scrape_config()], sort_keys=False)
    return {
        **extra,
        "server": {
            **_priority(priority_class),
            "retention": retention,
            **storage,
            "securityContext": restricted_pod(user=65534, group=65534, fs_group=65534),
            "containerSecurityContext": RESTRICTED_CONTAINER,
            "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "500m", "memory": "2Gi"}},
            "service": {"type": "ClusterIP", "servicePort": 80},
        },
        # The config reloader sidecar (prometheus-config-reloader) only watches a ConfigMap and POSTs /-/reload:
        # Checkov CKV_K8S_10-13 want requests and limits on every container; the chart's default is none.
        "configmapReload": {"prometheus": {"containerSecurityContext": RESTRICTED_CONTAINER,
                                           "resources": RELOADER_RESOURCES}},
        "alertmanager": {"enabled": False},
        "prometheus-pushgateway": {"enabled": False},
        "kube-state-metrics": {"enabled": False},
        # node-exporter needs hostPID/hostNetwork/hostPath, which the baseline namespace forbids.
        "prometheus-node-exporter": {"enabled": False},
    }


def grafana_values(dashboard_json: str, prometheus_url: str = PROMETHEUS_URL,
                   priority_class: str | None = None) -> dict[str, Any]:
    """Helm values of the grafana chart: Prometheus as default data source, the GPU dashboard provisioned.

    `priority_class`: grafana 10.1.4 top-level `priorityClassName` (templates/_pod.tpl). One replica, no
    PodDisruptionBudget (the chart's `podDisruptionBudget` stays empty): a dashboard briefly away during a drain
    costs nothing, and a budget on one replica would block the drain."""
    return {
        **_priority(priority_class),
        "datasources": {"datasources.yaml": {"apiVersion": 1, "datasources": [{
            "name": "Prometheus", "type": "prometheus", "uid": PROMETHEUS_DATASOURCE_UID, "url": prometheus_url,
            "access": "proxy", "isDefault": True,
        }]}},
        "dashboardProviders": {"dashboardproviders.yaml": {"apiVersion": 1, "providers": [{
            "name": "gtp", "orgId": 1, "folder": "GPU training", "type": "file", "disableDeletion": True,
            "editable": False, "options": {"path": "/var/lib/grafana/dashboards/gtp"},
        }]}},
        "dashboards": {"gtp": {"gpu": {"json": dashboard_json}}},
        "persistence": {"enabled": False},
        # ClusterIP only: reach it with `kubectl port-forward`; a LoadBalancer would leak ELBs on destroy.
        "service": {"type": "ClusterIP"},
        "testFramework": {"enabled": False},
        "securityContext": restricted_pod(user=472, group=472, fs_group=472),
        "containerSecurityContext": RESTRICTED_CONTAINER,
        # Grafana's own minimum hardware is 512 MB of memory and one CPU (grafana.com docs, "Install Grafana",
        # hardware recommendations); one dashboard and one data source stay well below it.
        "resources": GRAFANA_RESOURCES,
        # The `download-dashboards` init container (rendered whenever `dashboards` is set) only creates the
        # dashboard directory on the mounted storage volume: a read-only root and small bounds fit it.
        "downloadDashboards": {"securityContext": RESTRICTED_CONTAINER, "resources": RELOADER_RESOURCES},
        # Grafana reads no Kubernetes API (its sidecars, the only users of the token, are disabled): no token.
        "automountServiceAccountToken": False,
    }


def load_dashboard(path: Path = DASHBOARD_FILE) -> str:
    """The dashboard as compact JSON text (validated: it must parse and use our data source uid)."""
    dashboard = json.loads(path.read_text())
    if PROMETHEUS_DATASOURCE_UID not in json.dumps(dashboard):
        raise ValueError(f"{path}: panels must use the data source uid {PROMETHEUS_DATASOURCE_UID!r}")
    return json.dumps(dashboard, sort_keys=True, separators=(",", ":"))


@dataclass
class GpuMetricsArgs:
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    device_plugin_namespace: pulumi.Input[str]
    """The privileged namespace dcgm-exporter runs in (its name output, so the release waits for it)."""
    gpu_affinity: dict[str, Any]
    """Node affinity selecting every GPU node group (see `nvidia_device_plugin.gpu_node_affinity`)."""
    gpu_tolerations: list[dict[str, str]] = field(default_factory=list)
    """Tolerations for the GPU nodes' taints."""
    dcgm_exporter: bool = True
    """Install dcgm-exporter. Default true."""
    prometheus: bool = True
    """Install Prometheus. Default true."""
    grafana: bool = False
    """Install Grafana with the GPU dashboard. Default false."""
    retention: str = "15d"
    """Prometheus retention. Default `15d`."""
    site_images: dict[str, str] = field(default_factory=dict)
    """Air-gapped stacks: upstream image → the site registry's copy (components.helm.pinned_release). Default: none."""
    platform_priority: pulumi.Resource | None = None
    """The `gtp-platform` PriorityClass (components/platform_priority.py): every release's pods name it and the
    releases wait for it. None: the charts' defaults."""
    runtime_class_name: str | None = None
    """RuntimeClass of dcgm-exporter's pods (the NVIDIA runtime where it isn't the nodes' default). None: the
    node's default runtime."""
    alert_rules: dict[str, Any] | None = None
    """Prometheus alerting rules (`components.alert_rules.alert_rules`). None: no rules."""
    scrape_kueue: bool = False
    """Scrape Kueue's controller metrics (the stack runs Kueue). Default false."""
    volume_gib: int | None = None
    """Keep Prometheus' TSDB on an EBS gp3 volume of this size (EKS; `prometheus_volume_gib`), in the StorageClass
    `gtp-prometheus` the component creates. None: a bounded emptyDir."""
    volume_tags: dict[str, str] = field(default_factory=dict)
    """Tags of that volume (`volume_tag_parameters`): the stack's resource tags and its cluster, so the orphan audit
    finds a volume a destroy left behind. Default: none."""


class GpuMetrics(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace | None
    releases: list[k8s.helm.v3.Release]

    def __init__(self, name: str, args: GpuMetricsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:gpu:GpuMetrics", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        priority = PLATFORM_PRIORITY_CLASS if args.platform_priority else None
        release_opts = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(
            depends_on=[args.platform_priority] if args.platform_priority else []))
        self.releases = []
        self.namespace = None
        if args.dcgm_exporter:
            self.releases.append(_release(
                f"{name}-dcgm-exporter", DCGM_EXPORTER_RELEASE, versions.DCGM_EXPORTER, args.device_plugin_namespace,
                dcgm_exporter_values(args.gpu_affinity, args.gpu_tolerations, priority, args.runtime_class_name),
                release_opts, args.site_images))
        if args.prometheus or args.grafana:
            self.namespace = k8s.core.v1.Namespace(
                f"{name}-namespace", metadata={"name": METRICS_NAMESPACE, "labels": metrics_namespace_labels()},
                opts=k8s_opts)
        prometheus_opts = release_opts
        if args.prometheus and args.volume_gib:
            spec = prometheus_storage_class(args.volume_tags)
            storage_class = k8s.storage.v1.StorageClass(
                f"{name}-storage-class", metadata={"name": PROMETHEUS_STORAGE_CLASS,
                                                    "labels": platform_labels("gpu-metrics")},
                provisioner=spec["provisioner"], parameters=spec["parameters"],
                volume_binding_mode=spec["volumeBindingMode"], reclaim_policy=spec["reclaimPolicy"],
                allow_volume_expansion=spec["allowVolumeExpansion"], opts=k8s_opts)
            prometheus_opts = pulumi.ResourceOptions.merge(release_opts, pulumi.ResourceOptions(
                depends_on=[storage_class]))
        if args.prometheus:
            self.releases.append(_release(
                f"{name}-prometheus", PROMETHEUS_RELEASE, versions.PROMETHEUS, self.namespace.metadata["name"],
                prometheus_values(args.retention, priority, args.alert_rules, args.scrape_kueue, args.volume_gib),
                prometheus_opts, args.site_images))
        if args.grafana:
            self.releases.append(_release(
                f"{name}-grafana", GRAFANA_RELEASE, versions.GRAFANA, self.namespace.metadata["name"],
                grafana_values(load_dashboard(), priority_class=priority), release_opts, args.site_images))
        self.register_outputs({})



def _release(resource_name: str, release_name: str, chart: versions.HelmChart, namespace: pulumi.Input[str],
             values: dict[str, Any], opts: pulumi.ResourceOptions,
             site_images: dict[str, str]) -> k8s.helm.v3.Release:
    return pinned_release(resource_name, chart, release_name=release_name, namespace=namespace, values=values,
                          opts=opts, site_images=site_images)
