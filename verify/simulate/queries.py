"""The KEDA Prometheus queries against the series Prometheus really stores for dcgm-exporter.

Plan time (`check`, no Prometheus needed): from the rendered cluster take the prometheus chart's `prometheus.yml`
(its ConfigMap) and dcgm-exporter's Service and DaemonSet; build the targets Kubernetes service discovery would
hand each scrape job for dcgm-exporter (`discovered_targets`, the `__meta_kubernetes_*` labels of Prometheus
v3.6.0 discovery/kubernetes/{endpoints,service,pod}.go); run every job's relabel rules unchanged (`relabel`, a
port of model/relabel/relabel.go `relabel`); merge the surviving target labels into dcgm-exporter's exposed series
as the scrape does (`scraped_labels`, scrape/scrape.go `mutateSampleLabels`); then evaluate each vector selector
of every ScaledObject/ScaledJob `prometheus` trigger against those series: it must select exactly the GPU series of
the scaled workload's pods, and none of a same-named pod in another namespace, another replica type or an idle GPU.

Test time (tests/simulate/test_prometheus.py): `offline_config` turns the same rendered `prometheus.yml` into one a
real Prometheus can load offline (kubernetes_sd_configs → static_configs carrying the same labels, relabel rules
untouched), the test serves `exposition` text and runs the exact trigger query through the HTTP API; `keda_value`
and `hpa_desired_replicas` are KEDA's and the HPA's arithmetic on the answer.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from verify.render import ClusterObject
from verify.simulate.model import CheckResult, Finding, Modeled

MODELS = (Modeled("TRAINING_OPERATOR_VERSION", "v1.9.4"), Modeled("KEDA.version", "2.20.2"))
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

CHECK = "queries"
KEDA_KINDS = ("ScaledObject", "ScaledJob")
META = "__meta_kubernetes_"
POD_LABELS = ("container", "namespace", "pod")
"""dcgm-exporter's pod attribution labels (with `pod_uid`), shown in a finding."""
DEFAULT_TOLERANCE = 0.1
"""kube-controller-manager `--horizontal-pod-autoscaler-tolerance` default."""


# ---------------------------------------------------------------- relabelling (Prometheus v3.6.0 model/relabel)


class RelabelError(ValueError):
    pass


def _regex_text(value: Any) -> str:
    # YAML reads `regex: true` as a boolean; Prometheus reads the scalar's text.
    if isinstance(value, bool):
        return "true" if value else "false"
    return "(.*)" if value is None else str(value)


def compile_regex(value: Any) -> re.Pattern[str]:
    """`relabel.NewRegexp`: `^(?s:<regex>)$` (RE2; Python's `re` with ASCII classes covers the syntax the charts
    use — a regex Python can't compile is an error naming it)."""
    text = _regex_text(value)
    try:
        return re.compile(f"^(?s:{text})$", re.ASCII)
    except re.error as error:
        raise RelabelError(f"relabel regex {text!r}: {error}") from error


_TEMPLATE = re.compile(r"\$(?:\$|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def expand(template: str, match: re.Match[str]) -> str:
    """Go `regexp.Regexp.ExpandString`: `$$` is `$`, `$1`/`${1}` a group by number, `$name` a named group (the
    longest run of letters, digits and `_`: `$1x` is the group named `1x`); an unknown group expands to ""."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(2)
        if name.isdigit():
            index = int(name)
            return (match.group(index) or "") if index <= (match.re.groups or 0) else ""
        return (match.groupdict().get(name) or "")

    return _TEMPLATE.sub(one, template)


_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def relabel(labels: Mapping[str, str], rules: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """`relabel.ProcessBuilder`: the rules in order; None when a rule drops the target. Empty values mean absent."""
    current = {k: v for k, v in labels.items() if v != ""}
    for rule in rules:
        action = str(rule.get("action", "replace")).lower()
        regex = compile_regex(rule.get("regex"))
        separator = str(rule.get("separator", ";"))
        replacement = str(rule.get("replacement", "$1"))
        target = str(rule.get("target_label", ""))
        value = separator.join(current.get(str(name), "") for name in rule.get("source_labels") or [])
        if action == "drop":
            if regex.match(value):
                return None
        elif action == "keep":
            if not regex.match(value):
                return None
        elif action == "dropequal":
            if current.get(target, "") == value:
                return None
        elif action == "keepequal":
            if current.get(target, "") != value:
                return None
        elif action == "replace":
            found = regex.match(value)
            if found is None:
                continue
            name = expand(target, found)
            if not _LABEL_NAME.match(name):
                continue
            result = expand(replacement, found)
            if result:
                current[name] = result
            else:
                current.pop(name, None)
        elif action in ("lowercase", "uppercase"):
            current[target] = value.lower() if action == "lowercase" else value.upper()
        elif action == "hashmod":
            digest = hashlib.md5(value.encode()).digest()
            current[target] = str(int.from_bytes(digest[8:], "big") % int(rule["modulus"]))
        elif action == "labelmap":
            for name, label_value in sorted(current.items()):
                if regex.match(name):
                    current[regex.sub(lambda m, replacement=replacement: expand(replacement, m), name)] = label_value
        elif action == "labeldrop":
            current = {k: v for k, v in current.items() if not regex.match(k)}
        elif action == "labelkeep":
            current = {k: v for k, v in current.items() if regex.match(k)}
        else:
            raise RelabelError(f"relabel action {action!r} is not one Prometheus 3.6 knows (replace, keep, drop, "
                               "keepequal, dropequal, hashmod, labelmap, labeldrop, labelkeep, lowercase, uppercase)")
        current = {k: v for k, v in current.items() if v != ""}
    return current


def target_labels(job: Mapping[str, Any], discovered: Mapping[str, str],
                  global_config: Mapping[str, Any] | None = None) -> dict[str, str] | None:
    """scrape/target.go `PopulateLabels`: job defaults, the job's relabel rules, `__meta_*` removed, `instance`
    defaulted to the address. None when dropped. (`__scheme__` etc. stay: they're internal, not series labels.)"""
    global_config = global_config or {}
    labels = dict(discovered)
    defaults = {"job": str(job["job_name"]),
                "__scrape_interval__": str(job.get("scrape_interval", global_config.get("scrape_interval", "1m"))),
                "__scrape_timeout__": str(job.get("scrape_timeout", global_config.get("scrape_timeout", "10s"))),
                "__metrics_path__": str(job.get("metrics_path", "/metrics")),
                "__scheme__": str(job.get("scheme", "http"))}
    for name, value in defaults.items():
        labels.setdefault(name, value)
    for name, values in (job.get("params") or {}).items():
        if values:
            labels.setdefault(f"__param_{name}", str(values[0]))
    kept = relabel(labels, job.get("relabel_configs") or [])
    if kept is None or not kept.get("__address__"):
        return None
    kept = {k: v for k, v in kept.items() if not k.startswith("__meta_")}
    kept.setdefault("instance", kept["__address__"])
    return kept


def scraped_labels(target: Mapping[str, str], exposed: Mapping[str, str], honor_labels: bool,
                   metric_relabel: Sequence[Mapping[str, Any]] = ()) -> dict[str, str] | None:
    """scrape/scrape.go `mutateSampleLabels`: a series' labels in the TSDB. `honor_labels: true` keeps the exposed
    value on a clash; false renames the exposed one `exported_<name>` (again while taken). Internal `__*` target
    labels are not attached to series."""
    series = dict(exposed)
    public = {k: v for k, v in target.items() if not k.startswith("__")}
    if honor_labels:
        for name, value in public.items():
            series.setdefault(name, value)
    else:
        clashes = sorted(((n, series[n]) for n in public if series.get(n)), key=lambda item: len(item[0]))
        series.update(public)
        for name, value in clashes:
            new = name
            while True:
                new = "exported_" + new
                if not series.get(new):
                    series[new] = value
                    break
    return relabel(series, metric_relabel) if metric_relabel else series


# ---------------------------------------------------------------- service discovery of dcgm-exporter


@dataclass(frozen=True)
class ExporterPod:
    """One dcgm-exporter pod (one per GPU node) as the DaemonSet would run it."""
    name: str
    ip: str
    node: str
    uid: str


@dataclass(frozen=True)
class Exporter:
    service: dict[str, Any]
    daemonset: dict[str, Any]
    counters: frozenset[str]
    """Metric names the exporter's counters file enables (uncommented lines of its ConfigMap)."""


def _sanitize(name: str) -> str:
    # util/strutil.SanitizeLabelName: every character outside [a-zA-Z0-9_] becomes `_`.
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _object_meta(prefix: str, metadata: Mapping[str, Any]) -> dict[str, str]:
    """discovery/kubernetes/kubernetes.go `addObjectMetaLabels`."""
    labels = {f"{META}{prefix}_name": str(metadata.get("name", ""))}
    for key, value in (metadata.get("labels") or {}).items():
        labels[f"{META}{prefix}_label_{_sanitize(key)}"] = str(value)
        labels[f"{META}{prefix}_labelpresent_{_sanitize(key)}"] = "true"
    for key, value in (metadata.get("annotations") or {}).items():
        labels[f"{META}{prefix}_annotation_{_sanitize(key)}"] = str(value)
        labels[f"{META}{prefix}_annotationpresent_{_sanitize(key)}"] = "true"
    return labels


def _pod_meta(exporter: Exporter, pod: ExporterPod) -> dict[str, str]:
    """discovery/kubernetes/pod.go `podLabels`: the DaemonSet's template metadata with the pod's name."""
    template_meta = dict(exporter.daemonset["spec"]["template"].get("metadata") or {}, name=pod.name)
    labels = {f"{META}pod_ip": pod.ip, f"{META}pod_ready": "true", f"{META}pod_phase": "Running",
              f"{META}pod_node_name": pod.node, f"{META}pod_host_ip": pod.ip, f"{META}pod_uid": pod.uid,
              f"{META}pod_controller_kind": "DaemonSet",
              f"{META}pod_controller_name": exporter.daemonset["metadata"]["name"]}
    labels.update(_object_meta("pod", template_meta))
    return labels


def _containers(exporter: Exporter) -> list[dict[str, Any]]:
    return list(exporter.daemonset["spec"]["template"]["spec"].get("containers") or [])


def _target_port(exporter: Exporter, port: Mapping[str, Any]) -> int:
    target = port.get("targetPort", port["port"])
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in _containers(exporter):
        for cport in container.get("ports") or []:
            if cport.get("name") == target:
                return int(cport["containerPort"])
    raise LookupError(f"Service {exporter.service['metadata']['name']} targetPort {target!r} names no container port")


def discovered_targets(exporter: Exporter, pods: Sequence[ExporterPod]) -> dict[str, list[dict[str, str]]]:
    """The labels Kubernetes SD gives each dcgm-exporter target, by role (Prometheus v3.6.0 discovery/kubernetes:
    endpoints.go `buildEndpoints` — one per ready pod address and Service port, with the Service's, the
    Endpoints object's (the endpoints controller copies the Service's labels) and the pod's labels; service.go
    `buildService` — one per Service port; pod.go `buildPod` — one per container port)."""
    service, namespace = exporter.service, exporter.service["metadata"]["namespace"]
    service_meta = {f"{META}namespace": namespace, **_object_meta("service", service["metadata"])}
    endpoints_meta = _object_meta("endpoints", {"name": service["metadata"]["name"],
                                                "labels": service["metadata"].get("labels") or {}})
    ports = service["spec"].get("ports") or []
    endpoints, services, pod_targets = [], [], []
    for pod in pods:
        for port in ports:
            number = _target_port(exporter, port)
            target = {**service_meta, **endpoints_meta, **_pod_meta(exporter, pod),
                      "__address__": f"{pod.ip}:{number}", f"{META}endpoint_port_name": str(port.get("name", "")),
                      f"{META}endpoint_port_protocol": str(port.get("protocol", "TCP")),
                      f"{META}endpoint_ready": "true", f"{META}endpoint_address_target_kind": "Pod",
                      f"{META}endpoint_address_target_name": pod.name, f"{META}endpoint_node_name": pod.node}
            for container in _containers(exporter):
                for cport in container.get("ports") or []:
                    if int(cport["containerPort"]) == number:
                        target.update({f"{META}pod_container_name": container["name"],
                                       f"{META}pod_container_image": str(container.get("image", "")),
                                       f"{META}pod_container_port_name": str(cport.get("name", "")),
                                       f"{META}pod_container_port_number": str(number),
                                       f"{META}pod_container_port_protocol": str(port.get("protocol", "TCP")),
                                       f"{META}pod_container_init": "false"})
            endpoints.append(target)
        for container in _containers(exporter):
            for cport in container.get("ports") or []:
                pod_targets.append({f"{META}namespace": namespace, **_pod_meta(exporter, pod),
                                    "__address__": f"{pod.ip}:{cport['containerPort']}",
                                    f"{META}pod_container_name": container["name"],
                                    f"{META}pod_container_image": str(container.get("image", "")),
                                    f"{META}pod_container_port_name": str(cport.get("name", "")),
                                    f"{META}pod_container_port_number": str(cport["containerPort"]),
                                    f"{META}pod_container_port_protocol": str(cport.get("protocol", "TCP")),
                                    f"{META}pod_container_init": "false"})
    for port in ports:
        services.append({**service_meta, "__address__": f"{service['metadata']['name']}.{namespace}.svc:{port['port']}",
                         f"{META}service_port_name": str(port.get("name", "")),
                         f"{META}service_port_number": str(port["port"]),
                         f"{META}service_port_protocol": str(port.get("protocol", "TCP")),
                         f"{META}service_type": str(service["spec"].get("type", "ClusterIP")),
                         f"{META}service_cluster_ip": str(service["spec"].get("clusterIP", "10.100.0.10"))})
    return {"endpoints": endpoints, "service": services, "pod": pod_targets}


def exporter_pods(count: int, address: str = "10.0.{}.17") -> list[ExporterPod]:
    return [ExporterPod(name=f"dcgm-exporter-{chr(97 + i) * 5}", ip=address.format(i + 1), node=f"gpu-node-{i}",
                        uid=f"00000000-0000-4000-8000-{i:012d}") for i in range(count)]


# ---------------------------------------------------------------- what dcgm-exporter exposes


@dataclass(frozen=True)
class GpuUse:
    """One GPU's series as dcgm-exporter 4.x exposes it with `DCGM_EXPORTER_KUBERNETES=true`."""
    gpu: int
    value: float
    namespace: str = ""
    pod: str = ""
    container: str = ""

    def labels(self, hostname: str) -> dict[str, str]:
        # dcgm-exporter tag 4.4.1-4.6.0 (the chart's appVersion 4.6.0), internal/pkg/rendermetrics/render_metrics.go
        # `gpuMetricsFormat`: gpu, UUID, pci_bus_id, device, modelName, Hostname, then the attributes in key order;
        # internal/pkg/transformation/kubernetes.go `Process` (+ const.go) adds `pod`, `namespace`, `container`,
        # `pod_uid` to a GPU a pod holds (`pod_name`/`pod_namespace` only with the non-default UseOldNamespace).
        uuid = hashlib.sha256(f"{hostname}/{self.gpu}".encode()).hexdigest()[:8]
        labels = {"gpu": str(self.gpu), "UUID": f"GPU-{uuid}-0000-0000-0000-000000000000",
                  "pci_bus_id": f"00000000:{0x10 + self.gpu:02X}:00.0",
                  "device": f"nvidia{self.gpu}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": hostname}
        if self.pod:
            labels.update({"container": self.container, "namespace": self.namespace, "pod": self.pod,
                           "pod_uid": hashlib.sha256(f"{self.namespace}/{self.pod}".encode()).hexdigest()[:32]})
        return labels


def exposition(metric: str, uses: Iterable[GpuUse], hostname: str, help_text: str = "GPU utilization (in %).") -> str:
    """dcgm-exporter's /metrics text for one metric (Prometheus text format 0.0.4, gauge)."""
    lines = [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
    for use in uses:
        body = ",".join(f'{k}="{v}"' for k, v in use.labels(hostname).items())
        lines.append(f"{metric}{{{body}}} {use.value:g}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- PromQL vector selectors


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op in ("=", "!="):
            return (actual == self.value) == (self.op == "=")
        found = re.fullmatch(f"(?s:{self.value})", actual) is not None  # PromQL regexes are fully anchored
        return found == (self.op == "=~")

    def __str__(self) -> str:
        return f'{self.name}{self.op}{json.dumps(self.value)}'


_SELECTOR = re.compile(r'([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{((?:[^{}"]|"(?:[^"\\]|\\.)*")*)\}')
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def selectors(query: str) -> list[list[Matcher]]:
    """Every `metric{...}` / `{...}` vector selector of a query, as matchers (the metric name as `__name__`)."""
    found = []
    for match in _SELECTOR.finditer(query):
        matchers = [Matcher("__name__", "=", match.group(1))] if match.group(1) else []
        body, position = match.group(2), 0
        while position < len(body.rstrip()):
            item = _MATCHER.match(body, position)
            if item is None:
                raise ValueError(f"query {query!r}: can't read the label matchers {body!r}")
            matchers.append(Matcher(item.group(1), item.group(2), json.loads(f'"{item.group(3)}"')))
            position = item.end()
        found.append(matchers)
    return found


# ---------------------------------------------------------------- the rendered cluster


def prometheus_config(objects: Iterable[ClusterObject]) -> dict[str, Any] | None:
    """The prometheus chart's rendered `prometheus.yml` (its server ConfigMap), parsed; None without one."""
    for item in objects:
        data = item.obj.get("data") or {}
        if item.kind == "ConfigMap" and item.source.startswith("chart ") and "prometheus.yml" in data:
            return yaml.safe_load(data["prometheus.yml"])
    return None


def dcgm_exporter(objects: Sequence[ClusterObject]) -> Exporter | None:
    """dcgm-exporter's rendered DaemonSet, the Service selecting its pods, and the counters its `-f` file enables."""
    for item in objects:
        if item.kind != "DaemonSet" or not any("dcgm-exporter" in str(c.get("image", ""))
                                               for c in item.obj["spec"]["template"]["spec"].get("containers") or []):
            continue
        pod_labels = item.obj["spec"]["template"]["metadata"].get("labels") or {}
        services = [s for s in objects if s.kind == "Service" and s.namespace == item.namespace
                    and (s.obj["spec"].get("selector") or {})
                    and all(pod_labels.get(k) == v for k, v in s.obj["spec"]["selector"].items())]
        if not services:
            continue
        counters: set[str] = set()
        for config in objects:
            if config.kind == "ConfigMap" and config.namespace == item.namespace and config.source == item.source:
                for text in (config.obj.get("data") or {}).values():
                    counters.update(line.split(",")[0].strip() for line in str(text).splitlines()
                                    if line.strip().startswith(("DCGM_FI_", "DCGM_EXP_")))
        return Exporter(service=services[0].obj, daemonset=item.obj, counters=frozenset(counters))
    return None


@dataclass(frozen=True)
class Trigger:
    """One `prometheus` trigger of a ScaledObject/ScaledJob, with what it scales."""
    owner: str
    namespace: str
    query: str
    threshold: float
    activation_threshold: float
    metric_type: str
    min_replicas: int
    max_replicas: int
    workload: str
    """`<kind> <name>` of the scaled workload."""
    pod_names: tuple[str, ...]
    """The scaled pods' names at the largest scale."""
    decoy_pods: tuple[str, ...]
    """Pods the query must not select: the job's other replica types, a job named with this one's name as prefix."""
    container: str
    scale_down_disabled: bool = False
    """The HPA's `behavior.scaleDown.selectPolicy` is `Disabled` (the ScaledObject's `advanced`)."""


def _replica_pods(job: str, replica_type: str, count: int) -> tuple[str, ...]:
    # kubeflow/trainer v1.9.4 pkg/core/utils.go `GenGeneralName`: <job>-<lowercased replica type>-<index>.
    return tuple(f"{job}-{replica_type.lower()}-{index}" for index in range(count))


def triggers(objects: Sequence[ClusterObject]) -> tuple[list[Trigger], list[str]]:
    """Every prometheus trigger, and one line for each KEDA object's other triggers (not queries)."""
    found, others = [], []
    by_name = {(o.kind, o.namespace, o.name): o for o in objects}
    for item in objects:
        if item.kind not in KEDA_KINDS:
            continue
        spec, namespace = item.obj.get("spec") or {}, item.namespace or "default"
        owner = f"{item.kind} {namespace}/{item.name}"
        if item.kind == "ScaledObject":
            ref = spec.get("scaleTargetRef") or {}
            kind, name = str(ref.get("kind", "Deployment")), str(ref.get("name"))
            minimum, maximum = int(spec.get("minReplicaCount", 0)), int(spec.get("maxReplicaCount", 100))
            target = by_name.get((kind, namespace, name))
            replica_specs = ((target.obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}) if target else {}
            pods = _replica_pods(name, "Worker", maximum) if kind == "PyTorchJob" else tuple(
                f"{name}-{i}" for i in range(maximum))
            # Other replica types of the job, and a job whose name starts with this one's.
            decoys = tuple(p for rtype in replica_specs if rtype != "Worker" for p in _replica_pods(name, rtype, 1))
            decoys += _replica_pods(f"{name}-v2", "Worker", 1) if kind == "PyTorchJob" else ()
            container = "pytorch" if kind == "PyTorchJob" else name
        else:
            kind, name = "Job", item.name
            minimum, maximum = int(spec.get("minReplicaCount", 0)), int(spec.get("maxReplicaCount", 100))
            pods = tuple(f"{name}-{index:05d}-x{index:04d}" for index in range(maximum))  # Job pods: generated names
            decoys = ()
            template = ((spec.get("jobTargetRef") or {}).get("template") or {}).get("spec") or {}
            container = str(((template.get("containers") or [{}])[0]).get("name", name))
        for trigger in spec.get("triggers") or []:
            metadata = trigger.get("metadata") or {}
            if trigger.get("type") != "prometheus":
                others.append(f"{owner}: trigger {trigger.get('type')} (not a Prometheus query)")
                continue
            found.append(Trigger(
                owner=owner, namespace=namespace, query=str(metadata.get("query", "")),
                threshold=float(metadata.get("threshold", 0)),
                activation_threshold=float(metadata.get("activationThreshold", 0)),
                metric_type=str(trigger.get("metricType", "AverageValue")),
                min_replicas=minimum, max_replicas=maximum, workload=f"{kind} {name}",
                pod_names=pods, decoy_pods=decoys, container=container,
                scale_down_disabled=((((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {})
                                      .get("behavior") or {}).get("scaleDown") or {}).get("selectPolicy")
                == "Disabled"))
    return found, others


# ---------------------------------------------------------------- the series a query sees


def scrape_jobs(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [job for job in config.get("scrape_configs") or [] if job.get("kubernetes_sd_configs")]


def _roles(job: Mapping[str, Any]) -> list[str]:
    return [str(sd.get("role")) for sd in job.get("kubernetes_sd_configs") or []]


def scraping_jobs(config: Mapping[str, Any], exporter: Exporter,
                  pods: Sequence[ExporterPod]) -> list[tuple[dict[str, Any], dict[str, str], dict[str, str]]]:
    """(job, discovered labels, target labels) of every dcgm-exporter target a job keeps after relabelling."""
    discovered = discovered_targets(exporter, pods)
    kept = []
    for job in scrape_jobs(config):
        for role in _roles(job):
            for labels in discovered.get(role, []):
                target = target_labels(job, labels, config.get("global"))
                if target is not None:
                    kept.append((job, labels, target))
    return kept


@dataclass
class Scenario:
    """The GPU series a query is checked against: the workload's pods, and pods it must not count."""
    wanted: list[GpuUse] = field(default_factory=list)
    unwanted: list[GpuUse] = field(default_factory=list)


def scenario(trigger: Trigger, other_namespace: str = "elsewhere") -> Scenario:
    """One GPU per scaled pod, plus: the same pod name in another namespace, each decoy pod (other replica types,
    a job with a longer name), an idle GPU (no pod attribution)."""
    result, gpu = Scenario(), 0
    for pod in trigger.pod_names:
        result.wanted.append(GpuUse(gpu, 90.0, trigger.namespace, pod, trigger.container))
        gpu += 1
    result.unwanted.append(GpuUse(gpu, 5.0, other_namespace, trigger.pod_names[0], trigger.container))
    for pod in trigger.decoy_pods:
        gpu += 1
        result.unwanted.append(GpuUse(gpu, 5.0, trigger.namespace, pod, trigger.container))
    result.unwanted.append(GpuUse(gpu + 1, 0.0))
    return result


def check(objects: Sequence[ClusterObject]) -> list[CheckResult]:
    """`queries` N/N: each prometheus trigger selects exactly its workload's dcgm series, as Prometheus stores them."""
    found, others = triggers(objects)
    if not found and not others:
        return []
    result = CheckResult(CHECK, details=list(others))
    if not found:
        return [result]
    config, exporter = prometheus_config(objects), dcgm_exporter(objects)
    for trigger in found:
        subject = f"{trigger.owner} query {trigger.query}"
        if config is None or exporter is None:
            result.record(False, Finding(subject, "no rendered Prometheus config or dcgm-exporter Service/DaemonSet "
                                         "to answer the query", "enable gpu metrics (prometheus and dcgm-exporter)"))
            continue
        problem = _query_problem(trigger, config, exporter)
        result.record(problem is None, None if problem is None else Finding(subject, *problem))
        if problem is None:
            result.details.append(f"{trigger.owner}: {trigger.query} selects the GPU series of {trigger.workload}'s "
                                  f"{len(trigger.pod_names)} pods and no other (verified)")
    return [result]


def _query_problem(trigger: Trigger, config: Mapping[str, Any], exporter: Exporter) -> tuple[str, str] | None:
    try:
        matchers = selectors(trigger.query)
    except ValueError as error:
        return str(error), "write the query's selectors as metric{label=\"value\", ...}"
    if not matchers:
        return "the query has no vector selector", "select the dcgm-exporter metric with label matchers"
    jobs = scraping_jobs(config, exporter, exporter_pods(1))
    if not jobs:
        return ("no scrape job of the rendered prometheus.yml keeps dcgm-exporter's targets",
                "annotate dcgm-exporter's Service prometheus.io/scrape: \"true\" (and port)")
    names = {m.value for sel in matchers for m in sel if m.name == "__name__" and m.op == "="}
    missing = sorted(n for n in names if n.startswith("DCGM_") and n not in exporter.counters)
    if missing:
        return (f"metric(s) {missing} are not enabled in dcgm-exporter's counters file",
                "enable them in the exporter's metrics ConfigMap or query an enabled one")
    cases = scenario(trigger)
    for job, _, target in jobs:
        def stored(use: GpuUse, job: Mapping[str, Any] = job, target: Mapping[str, str] = target) -> dict[str, str]:
            exposed = {"__name__": sorted(names)[0] if names else "DCGM_FI_DEV_GPU_UTIL", **use.labels("gpu-node-0")}
            return scraped_labels(target, exposed, bool(job.get("honor_labels", False)),
                                  job.get("metric_relabel_configs") or []) or {}

        for selector in matchers:
            wanted = [use for use in cases.wanted if not all(m.matches(stored(use)) for m in selector)]
            unwanted = [use for use in cases.unwanted if all(m.matches(stored(use)) for m in selector)]
            shown = ", ".join(str(m) for m in selector if m.name != "__name__")
            if wanted:
                sample = stored(wanted[0])
                pod_labels = {k: sample[k] for k in sorted(sample) if k.removeprefix("exported_") in POD_LABELS}
                return (f"selector {{{shown}}} misses the GPU series of {trigger.workload}'s pods as job "
                        f"{job['job_name']} stores them (honor_labels {bool(job.get('honor_labels', False))}), e.g. "
                        f"{pod_labels}",
                        "filter on the labels the stored series carry (dcgm-exporter's namespace/pod survive a "
                        "honor_labels job unchanged)")
            if unwanted:
                sample = stored(unwanted[0])
                return (f"selector {{{shown}}} also selects a GPU series not of {trigger.workload}'s pods: "
                        f"namespace={sample.get('namespace')!r} pod={sample.get('pod')!r}",
                        "filter on the workload's namespace and its pods' names")
    return None


# ---------------------------------------------------------------- a real Prometheus (tests)


def offline_config(config: Mapping[str, Any], exporter: Exporter, pods: Sequence[ExporterPod],
                interval: str = "1s") -> dict[str, Any]:
    """The rendered prometheus.yml for an offline Prometheus: every kubernetes_sd_configs job keeps its relabel
    rules byte for byte, its discovery becomes static_configs with the labels Kubernetes SD would give dcgm-exporter's
    targets of that role; credentials files of the in-cluster service account, rule files and non-Kubernetes jobs
    go (nothing to read offline); the global intervals shrink so a test waits seconds."""
    discovered = discovered_targets(exporter, pods)
    jobs = []
    for job in scrape_jobs(config):
        job = copy.deepcopy(job)
        roles = _roles(job)
        del job["kubernetes_sd_configs"]
        for key in ("bearer_token_file", "tls_config", "authorization", "scrape_interval", "scrape_timeout"):
            job.pop(key, None)
        job["static_configs"] = [{"targets": [labels["__address__"]],
                                  "labels": {k: v for k, v in labels.items() if k != "__address__"}}
                                 for role in roles for labels in discovered.get(role, [])]
        if job["static_configs"]:
            jobs.append(job)
    return {"global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "scrape_configs": jobs}


def keda_value(response: Mapping[str, Any], ignore_null_values: bool = True) -> float:
    """KEDA 2.20 pkg/scalers/prometheus_scaler.go `ExecutePromQuery`: an empty result is 0 (ignoreNullValues,
    default true) else an error; more than one element is an error; else the sample's value."""
    result = response["data"]["result"]
    if not result:
        if ignore_null_values:
            return 0.0
        raise ValueError("prometheus metrics 'prometheus' target may be lost, the result is empty")
    if len(result) > 1:
        raise ValueError("prometheus query returned multiple elements")
    return float(result[0]["value"][1])


def is_active(value: float, activation_threshold: float) -> bool:
    """KEDA's prometheus scaler `GetMetricsAndActivity`: active when value > activationThreshold."""
    return value > activation_threshold


def hpa_desired_replicas(*, metric_type: str, value: float, threshold: float, current: int, ready: int,
                         minimum: int, maximum: int, tolerance: float = DEFAULT_TOLERANCE,
                         scale_down_disabled: bool = False) -> int:
    """The replicas the HPA KEDA creates asks for (kubernetes pkg/controller/podautoscaler/replica_calculator.go):
    `Value` → `GetExternalMetricReplicas`: ratio = value/threshold, current kept within the tolerance, else
    ceil(ratio × ready pods); `AverageValue` → `GetExternalPerPodMetricReplicas`: ceil(value/threshold) unless
    value/(threshold × current) is within the tolerance. Then clamped to [min, max]; with scale-down disabled
    (horizontal.go `calculateScaleDownLimitWithBehaviors`: selectPolicy Disabled) never below the current count."""
    if metric_type == "Value":
        ratio = value / threshold
        if current and abs(1.0 - ratio) <= tolerance:
            desired = current
        else:
            desired = math.ceil(ratio * ready) if current else math.ceil(ratio)
    elif metric_type == "AverageValue":
        if current and abs(1.0 - value / (threshold * current)) <= tolerance:
            desired = current
        else:
            desired = math.ceil(value / threshold)
    else:
        raise ValueError(f"metricType {metric_type!r}: KEDA allows Value or AverageValue for prometheus")
    if scale_down_disabled and current:
        desired = max(desired, current)
    return max(minimum, min(maximum, desired))
