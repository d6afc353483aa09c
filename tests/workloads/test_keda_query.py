"""The KEDA query's label names against the pinned prometheus chart's real scrape configuration.

dcgm-exporter labels each GPU series with the pod using it (`namespace`, `pod`). Whether those names survive the
scrape, or are renamed `exported_namespace` / `exported_pod`, depends on the scrape job that finds dcgm-exporter:
with `honor_labels: false` a scraped label that clashes with a target label is renamed `exported_<name>`; with
`honor_labels: true` the scraped label wins unchanged (Prometheus docs, `scrape_config.honor_labels`). The job is
read from a byte-exact excerpt of the chart's values.yaml (tests/fixtures/upstream/README.md).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

from components.gpu_metrics import dcgm_exporter_values, prometheus_values
from components.keda_scaling import gpu_utilization_query
from conventions.names import METRICS_NAMESPACE

SERVER_FILES = Path(__file__).parents[1] / "fixtures" / "upstream" / "prometheus-27.39.0-values-serverFiles.yaml"
SERVER_FILES_SHA256 = "18d88eb54c0ab680c65d1bad50710671afe04001fbea408219dbad1a2dcc24e9"
# What dcgm-exporter calls the pod using a GPU (its default pod attribution labels).
EXPORTER_POD_LABELS = ("namespace", "pod")


def scrape_jobs() -> list[dict[str, Any]]:
    text = SERVER_FILES.read_bytes()
    assert hashlib.sha256(text).hexdigest() == SERVER_FILES_SHA256, "the chart excerpt changed; see its README"
    return yaml.safe_load(text)["serverFiles"]["prometheus.yml"]["scrape_configs"]


def _kept(job: dict[str, Any], meta: dict[str, str]) -> bool:
    """Whether the job's keep/drop relabel rules keep a target with these meta labels (regexes are anchored)."""
    for rule in job.get("relabel_configs", []):
        action = rule.get("action", "replace")
        if action not in ("keep", "drop"):
            continue
        value = rule.get("separator", ";").join(meta.get(label, "") for label in rule["source_labels"])
        regex = rule.get("regex", "(.*)")
        regex = str(regex).lower() if isinstance(regex, bool) else str(regex)  # YAML reads `regex: true` as a bool
        matched = re.fullmatch(regex, value) is not None
        if matched != (action == "keep"):
            return False
    return True


def jobs_scraping(role: str, meta: dict[str, str]) -> list[dict[str, Any]]:
    return [job for job in scrape_jobs()
            if any(sd.get("role") == role for sd in job.get("kubernetes_sd_configs", [])) and _kept(job, meta)]


def surviving_label(job: dict[str, Any], scraped_label: str) -> str:
    """The name a scraped label has in the TSDB after this job's scrape."""
    if job.get("honor_labels", False):
        return scraped_label
    targets = {rule.get("target_label") for rule in job.get("relabel_configs", [])
               if rule.get("action", "replace") == "replace"}
    return f"exported_{scraped_label}" if scraped_label in targets else scraped_label


def query_label_names(query: str) -> set[str]:
    return set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*"', query))


def dcgm_service_meta() -> dict[str, str]:
    """Service-discovery labels of dcgm-exporter's Service endpoints, from our chart values."""
    annotations = dcgm_exporter_values({}, [])["service"]["annotations"]
    meta = {"__meta_kubernetes_namespace": METRICS_NAMESPACE}
    for key, value in annotations.items():
        meta["__meta_kubernetes_service_annotation_" + re.sub(r"[^A-Za-z0-9_]", "_", key)] = value
    return meta


def test_the_stack_keeps_the_charts_default_scrape_jobs():
    values = prometheus_values("15d")
    assert "serverFiles" not in values and "extraScrapeConfigs" not in values


def test_exactly_one_chart_job_scrapes_dcgm_exporter_and_it_honors_labels():
    jobs = jobs_scraping("endpoints", dcgm_service_meta())
    assert [job["job_name"] for job in jobs] == ["kubernetes-service-endpoints"]
    assert jobs[0]["honor_labels"] is True


def test_the_keda_query_filters_on_the_label_names_that_survive_the_scrape():
    (job,) = jobs_scraping("endpoints", dcgm_service_meta())
    surviving = {surviving_label(job, label) for label in EXPORTER_POD_LABELS}
    assert surviving == {"namespace", "pod"}
    assert query_label_names(gpu_utilization_query("training-prod", "gpt")) == surviving


def test_without_honor_labels_the_clashing_namespace_label_would_be_exported():
    (job,) = jobs_scraping("endpoints", dcgm_service_meta())
    dishonoring = dict(job, honor_labels=False)
    assert surviving_label(dishonoring, "namespace") == "exported_namespace"  # the job writes target `namespace`
    assert surviving_label(dishonoring, "pod") == "pod"  # endpoints job writes no `pod` target label


def test_a_service_without_the_scrape_annotation_is_not_scraped():
    assert jobs_scraping("endpoints", {"__meta_kubernetes_namespace": METRICS_NAMESPACE}) == []
