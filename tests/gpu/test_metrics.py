"""GPU metrics values and the provisioned dashboard."""

from __future__ import annotations

import json

import pytest

from components.gpu_metrics import (
    DASHBOARD_FILE,
    dcgm_exporter_values,
    grafana_values,
    load_dashboard,
    metrics_namespace_labels,
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


def test_dcgm_exporter_counters_add_the_alerts_fields_to_the_charts_list():
    """The chart's default list (templates/metrics-configmap.yaml) lacks throttling and ECC counters, which the
    alert rules need: `customMetrics` replaces it whole, so it keeps every default field too."""
    from pathlib import Path

    values = dcgm_exporter_values({"nodeAffinity": {}}, [])
    enabled = {line.split(",")[0].strip() for line in values["customMetrics"].splitlines()
               if line.startswith("DCGM_FI_")}
    chart = (Path(__file__).resolve().parents[2] / "vendor/charts/dcgm-exporter-4.6.0/templates/"
             "metrics-configmap.yaml").read_text().split("{{- else }}")[1]
    defaults = {line.split(",")[0].strip() for line in chart.splitlines() if line.strip().startswith("DCGM_FI_")}
    assert defaults <= enabled
    assert {"DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "DCGM_FI_DEV_RETIRED_PENDING"} <= enabled - defaults


def test_prometheus_loads_the_alert_rules_and_scrapes_kueue_when_asked():
    import yaml

    rules = {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0"}]}]}
    values = prometheus_values("7d", alert_rules=rules, scrape_kueue=True)
    assert values["serverFiles"] == {"alerting_rules.yml": rules}
    job = yaml.safe_load(values["extraScrapeConfigs"])[0]
    assert job["job_name"] == "kueue" and job["scheme"] == "https"
    assert job["relabel_configs"][0]["regex"] == "kueue-controller-manager-metrics-service"
    plain = prometheus_values("7d")
    assert "serverFiles" not in plain and "extraScrapeConfigs" not in plain
