"""GPU metrics values and the provisioned dashboard."""

from __future__ import annotations

import json

import pytest

from components.gpu_metrics import (
    DASHBOARD_FILE, dcgm_exporter_values, grafana_values, load_dashboard, metrics_namespace_labels,
    prometheus_values,
)
from conventions.names import PROMETHEUS_URL


def test_dcgm_exporter_is_scraped_by_annotation_without_servicemonitor():
    values = dcgm_exporter_values({"nodeAffinity": {}}, [{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert values["serviceMonitor"] == {"enabled": False}
    assert values["service"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "9400"}
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert values["resources"]["requests"] == values["resources"]["limits"]


def test_prometheus_is_server_only_and_fits_baseline():
    values = prometheus_values("7d")
    assert values["server"]["retention"] == "7d"
    assert values["server"]["service"]["servicePort"] == 80  # PROMETHEUS_URL's port
    for dependency in ("alertmanager", "prometheus-pushgateway", "kube-state-metrics", "prometheus-node-exporter"):
        assert values[dependency] == {"enabled": False}
    assert values["server"]["containerSecurityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert metrics_namespace_labels()["pod-security.kubernetes.io/enforce"] == "baseline"


def test_grafana_provisions_prometheus_and_the_dashboard():
    values = grafana_values(load_dashboard())
    source = values["datasources"]["datasources.yaml"]["datasources"][0]
    assert source["url"] == PROMETHEUS_URL and source["uid"] == "prometheus"
    assert json.loads(values["dashboards"]["gtp"]["gpu"]["json"])["uid"] == "gtp-gpu"
    assert values["service"] == {"type": "ClusterIP"}


@pytest.mark.parametrize("metric", ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "trainer_step_time_seconds",
                                    "trainer_samples_per_second", "trainer_last_checkpoint_step"])
def test_dashboard_panels_query(metric):
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert any(metric in expr for expr in expressions)
    assert all(panel["datasource"]["uid"] == "prometheus" for panel in dashboard["panels"])


def test_dashboard_with_another_data_source_is_refused(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"panels": [{"datasource": {"uid": "other"}}]}))
    with pytest.raises(ValueError, match="panels must use the data source uid 'prometheus'"):
        load_dashboard(path)
