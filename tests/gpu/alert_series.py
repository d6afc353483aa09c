"""A test oracle (tests/gpu): the alert rules as the rendered cluster holds them, and the series they would see,
for `promtool test rules`.

From the rendered cluster: the rule file (the prometheus chart's server ConfigMap, `alerting_rules.yml`), and the
labels each exporter's series carry once stored, computed the way `queries` does for KEDA (Kubernetes discovery's
`__meta_*` labels, the scrape job's relabel rules unchanged, honor_labels): dcgm-exporter's GPU series through the
`kubernetes-service-endpoints` job, our trainer's through `kubernetes-pods` (from the rendered training pod template:
its labels and annotations), Kueue's through the `kueue` job. What is exported at all: dcgm-exporter's counters file
(its rendered ConfigMap), the trainer's registry (images/trainer `trainer.telemetry.Metrics`, read as /metrics text),
Kueue's (`components.alert_rules.KUEUE_METRICS`, cited from its source) and Prometheus' own `up`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import yaml

from components.alert_rules import ALERT_RULES_FILE, KUEUE_METRICS, PROMETHEUS_METRICS
from components.gpu_metrics import KUEUE_METRICS_SERVICE, KUEUE_NAMESPACE
from components.training_pod import METRICS_PORT
from verify.render import ClusterObject
from verify.simulate import queries

APP_LABEL = "app.kubernetes.io/name"


def rule_file(objects: Iterable[ClusterObject]) -> dict[str, Any] | None:
    """The rendered `alerting_rules.yml` of the prometheus chart's server ConfigMap, parsed; None without one."""
    for item in objects:
        data = item.obj.get("data") or {}
        if item.kind == "ConfigMap" and item.source.startswith("chart ") and "prometheus.yml" in data:
            rules = yaml.safe_load(data.get(ALERT_RULES_FILE) or "{}")
            return rules or None
    return None


def trainer_metric_names() -> frozenset[str]:
    """The sample names the trainer's /metrics serves (counters with their `_total`/`_created`), from its registry."""
    from prometheus_client.parser import text_string_to_metric_families

    from trainer.telemetry import Metrics

    text = Metrics(0, rank=0, serve=False).exposition()
    return frozenset(sample.name for family in text_string_to_metric_families(text) for sample in family.samples)


def exported_metric_names(objects: Sequence[ClusterObject]) -> frozenset[str]:
    """Every metric name some exporter of this cluster exposes (see the module docstring)."""
    exporter = queries.dcgm_exporter(objects)
    names = set(exporter.counters if exporter else ()) | trainer_metric_names() | PROMETHEUS_METRICS
    config = queries.prometheus_config(objects) or {}
    if any(job.get("job_name") == "kueue" for job in config.get("scrape_configs") or []):
        names |= KUEUE_METRICS
    return frozenset(names)


def _job(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    for job in config.get("scrape_configs") or []:
        if job.get("job_name") == name:
            return job
    raise LookupError(f"the rendered prometheus.yml has no scrape job {name!r}")


def _pod_templates(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        containers = (value.get("spec") or {}).get("containers") if isinstance(value.get("spec"), dict) else None
        if isinstance(containers, list) and "metadata" in value:
            yield value
        for item in value.values():
            yield from _pod_templates(item)
    elif isinstance(value, list):
        for item in value:
            yield from _pod_templates(item)


def _trainer_container(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """The container serving the trainer's metrics (named `pytorch`, or `node` in a TrainJob's runtime)."""
    for container in template["spec"]["containers"]:
        if any(int(p.get("containerPort", 0)) == METRICS_PORT for p in container.get("ports") or []):
            return container
    return None


def training_pod_template(objects: Iterable[ClusterObject], workload: str) -> dict[str, Any]:
    """The rendered pod template of a workload's trainer (`app.kubernetes.io/name: <workload>`, a container
    serving the trainer's metrics port)."""
    for item in objects:
        for template in _pod_templates(item.obj):
            labels = (template.get("metadata") or {}).get("labels") or {}
            if labels.get(APP_LABEL) == workload and _trainer_container(template) is not None:
                return template
    raise LookupError(f"no rendered pod template of workload {workload!r} runs the trainer with its metrics port")


def trainer_series_labels(objects: Sequence[ClusterObject], workload: str, namespace: str, pod: str, rank: int,
                          ip: str = "10.1.0.5") -> dict[str, str]:
    """The labels a trainer gauge of `pod` carries in Prometheus (without `__name__`): what the kubernetes-pods job
    keeps of the pod's discovery labels (pod.go `buildPod`: one target per container port), merged with the
    exposed `rank`. Only the annotated port's target survives the relabelling."""
    config = queries.prometheus_config(objects)
    assert config is not None
    job = _job(config, "kubernetes-pods")
    template = training_pod_template(objects, workload)
    container = _trainer_container(template) or {}
    meta = queries.META
    for port in container.get("ports") or []:
        discovered = {f"{meta}namespace": namespace, f"{meta}pod_ip": ip, f"{meta}pod_ready": "true",
                      f"{meta}pod_phase": "Running", f"{meta}pod_node_name": "gpu-node-0",
                      f"{meta}pod_container_name": str(container.get("name")),
                      f"{meta}pod_container_port_number": str(port["containerPort"]),
                      f"{meta}pod_container_port_name": str(port.get("name", "")),
                      "__address__": f"{ip}:{port['containerPort']}",
                      **queries._object_meta("pod", {**template["metadata"], "name": pod})}
        target = queries.target_labels(job, discovered, config.get("global"))
        if target is not None:
            series = queries.scraped_labels(target, {"rank": str(rank)}, bool(job.get("honor_labels", False)),
                                            job.get("metric_relabel_configs") or [])
            return dict(series or {})
    raise LookupError(f"the kubernetes-pods job keeps no target of {workload}'s pods")


def trainer_up_labels(objects: Sequence[ClusterObject], workload: str, namespace: str, pod: str) -> dict[str, str]:
    """`up`'s labels for a trainer target: the target labels alone."""
    labels = trainer_series_labels(objects, workload, namespace, pod, 0)
    labels.pop("rank")
    return labels


def dcgm_series_labels(objects: Sequence[ClusterObject], use: queries.GpuUse, node: str,
                       model_name: str | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A dcgm-exporter GPU series' stored labels (node `node`), as the scraping job keeps them. `extra`: labels
    the exporter adds after the GPU's own (an exporter counter's `xid`, `window_size_in_ms`)."""
    config, exporter = queries.prometheus_config(objects), queries.dcgm_exporter(objects)
    assert config is not None and exporter is not None
    pod = queries.ExporterPod(name=f"dcgm-exporter-{node}", ip="10.0.1.17", node=node,
                              uid="00000000-0000-4000-8000-000000000001")
    jobs = queries.scraping_jobs(config, exporter, [pod])
    if not jobs:
        raise LookupError("no scrape job keeps dcgm-exporter's targets")
    job, _, target = jobs[0]
    exposed = use.labels(node)
    if model_name:
        exposed["modelName"] = model_name
    exposed.update(extra or {})
    return dict(queries.scraped_labels(target, exposed, bool(job.get("honor_labels", False)),
                                       job.get("metric_relabel_configs") or []) or {})


def dcgm_up_labels(objects: Sequence[ClusterObject], node: str) -> dict[str, str]:
    config, exporter = queries.prometheus_config(objects), queries.dcgm_exporter(objects)
    assert config is not None and exporter is not None
    pod = queries.ExporterPod(name=f"dcgm-exporter-{node}", ip="10.0.1.17", node=node,
                              uid="00000000-0000-4000-8000-000000000001")
    _, _, target = queries.scraping_jobs(config, exporter, [pod])[0]
    return {k: v for k, v in target.items() if not k.startswith("__")}


def kueue_series_labels(objects: Sequence[ClusterObject], exposed: Mapping[str, str]) -> dict[str, str]:
    """A Kueue metric's stored labels: the `kueue` job's target labels for the manager's metrics endpoint."""
    config = queries.prometheus_config(objects)
    assert config is not None
    job = _job(config, "kueue")
    meta = queries.META
    discovered = {"__address__": "10.0.2.9:8443", f"{meta}namespace": KUEUE_NAMESPACE,
                  f"{meta}service_name": KUEUE_METRICS_SERVICE,
                  f"{meta}pod_name": "kueue-controller-manager-7c9d8-x2x4q"}
    target = queries.target_labels(job, discovered, config.get("global"))
    if target is None:
        raise LookupError("the kueue scrape job drops Kueue's metrics endpoint")
    return dict(queries.scraped_labels(target, dict(exposed), bool(job.get("honor_labels", False))) or {})


def series(name: str, labels: Mapping[str, str]) -> str:
    """A promtool input series selector: `name{k="v",...}` (values escaped as PromQL strings)."""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{body}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def pod_targets(pod: Mapping[str, Any], namespace: str, ip: str) -> list[dict[str, str]]:
    """What Kubernetes discovery (role pod) gives for `pod` (a full Pod, as verify/simulate/pods.py expands a
    workload's): one target per container port (Prometheus v3.6.0 discovery/kubernetes/pod.go `buildPod`)."""
    meta = queries.META
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name") or metadata.get("generateName") or "pod")
    targets = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            targets.append({f"{meta}namespace": namespace, f"{meta}pod_ip": ip, f"{meta}pod_ready": "true",
                            f"{meta}pod_phase": "Running", f"{meta}pod_node_name": "gpu-node-0",
                            f"{meta}pod_container_name": str(container.get("name")),
                            f"{meta}pod_container_port_number": str(port["containerPort"]),
                            f"{meta}pod_container_port_name": str(port.get("name", "")),
                            f"{meta}pod_container_port_protocol": str(port.get("protocol", "TCP")),
                            f"{meta}pod_container_init": "false",
                            "__address__": f"{ip}:{port['containerPort']}",
                            **queries._object_meta("pod", {**metadata, "name": name})})
    return targets


def pod_series_labels(objects: Sequence[ClusterObject], pod: Mapping[str, Any], namespace: str,
                      exposed: Mapping[str, str], ip: str = "10.1.0.5") -> dict[str, str] | None:
    """The stored labels of a series `pod` exposes, as the kubernetes-pods job keeps it; None when the job keeps
    none of the pod's targets (a pod without the scrape annotation)."""
    config = queries.prometheus_config(objects)
    assert config is not None
    job = _job(config, "kubernetes-pods")
    for discovered in pod_targets(pod, namespace, ip):
        target = queries.target_labels(job, discovered, config.get("global"))
        if target is not None:
            return dict(queries.scraped_labels(target, dict(exposed), bool(job.get("honor_labels", False)),
                                               job.get("metric_relabel_configs") or []) or {})
    return None
