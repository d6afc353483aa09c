"""In-cluster addresses that one component serves and another consumes."""

from __future__ import annotations

METRICS_NAMESPACE = "gpu-metrics"
PROMETHEUS_RELEASE = "prometheus"
# The prometheus chart names its server Service "<release>-server" and serves on port 80.
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-server.{METRICS_NAMESPACE}.svc.cluster.local:80"
DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"
