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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from catalog import versions
from components.helm import pinned_release
from conventions.kubernetes import platform_labels, pod_security_labels, restricted_container, restricted_pod
from conventions.names import METRICS_NAMESPACE, PLATFORM_PRIORITY_CLASS, PROMETHEUS_RELEASE, PROMETHEUS_URL

DASHBOARD_FILE = Path(__file__).resolve().parent.parent / "dashboards" / "gpu.json"
DCGM_EXPORTER_RELEASE = "dcgm-exporter"
DCGM_EXPORTER_PORT = 9400
GRAFANA_RELEASE = "grafana"
PROMETHEUS_DATASOURCE_UID = "prometheus"
"""The data source uid `dashboards/gpu.json` refers to."""

RESTRICTED_CONTAINER = restricted_container()


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
        "service": {"annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(DCGM_EXPORTER_PORT)}},
        "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"cpu": "200m", "memory": "512Mi"}},
        # The chart's default (root, SYS_ADMIN for DCGM's profiling metrics) stated in full, plus NET_RAW dropped:
        # the exporter serves HTTP and reads GPUs through DCGM, it never opens raw sockets (Checkov CKV_K8S_28).
        "securityContext": {"runAsNonRoot": False, "runAsUser": 0,
                            "capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_RAW"]}},
    }


def prometheus_values(retention: str, priority_class: str | None = None) -> dict[str, Any]:
    """Helm values of the prometheus chart: the server only, with its default kubernetes scrape jobs
    (`kubernetes-service-endpoints` scrapes dcgm-exporter's annotated Service, `kubernetes-pods` scrapes
    trainer pods annotated `prometheus.io/scrape: "true"`).

    `priority_class`: prometheus 27.39.0 `server.priorityClassName` (templates/deploy.yaml). One replica and no
    PodDisruptionBudget (the chart's `server.podDisruptionBudget` stays off): two servers would be two
    independent scrapers with two TSDBs (twice the 2 GiB), and a budget on one replica either blocks every drain
    (minAvailable 1) or allows what no budget allows (maxUnavailable 1). A drain restarts it elsewhere; its
    emptyDir TSDB is lost then anyway."""
    return {
        "server": {
            **_priority(priority_class),
            "retention": retention,
            # No default StorageClass can be assumed (EKS >= 1.30 marks none default; k3s has local-path), so
            # the TSDB lives in a bounded emptyDir: metrics survive container restarts, not pod rescheduling.
            "persistentVolume": {"enabled": False},
            "emptyDir": {"sizeLimit": "10Gi"},
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
    """Offline stacks: upstream image → the site registry's copy (components.helm.pinned_release). Default: none."""
    platform_priority: pulumi.Resource | None = None
    """The `gtp-platform` PriorityClass (components/platform_priority.py): every release's pods name it and the
    releases wait for it. None: the charts' defaults."""
    runtime_class_name: str | None = None
    """RuntimeClass of dcgm-exporter's pods (the NVIDIA runtime where it isn't the nodes' default). None: the
    node's default runtime."""


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
                dcgm_exporter_values(args.gpu_affinity, args.gpu_tolerations, priority, args.runtime_class_name), release_opts,
                args.site_images))
        if args.prometheus or args.grafana:
            self.namespace = k8s.core.v1.Namespace(
                f"{name}-namespace", metadata={"name": METRICS_NAMESPACE, "labels": metrics_namespace_labels()},
                opts=k8s_opts)
        if args.prometheus:
            self.releases.append(_release(
                f"{name}-prometheus", PROMETHEUS_RELEASE, versions.PROMETHEUS, self.namespace.metadata["name"],
                prometheus_values(args.retention, priority), release_opts, args.site_images))
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
