"""Prometheus alerting rules for GPU faults, hung training and a stuck queue: a pure function of the stack.

The rules land in the prometheus chart's `serverFiles."alerting_rules.yml"` (prometheus 27.39.0 values.yaml:813-816;
the server loads `/etc/config/alerting_rules.yml`, values.yaml:838-840), so `kubectl -n gpu-metrics port-forward` to
the server shows them firing under /alerts. No Alertmanager is installed (`alertmanager.enabled: false`): routing
alerts to people is a site's choice; the rules and their state are what the platform owns.

Every expression selects only series someone exports, with the labels they really carry (tests/gpu/
test_alert_rules.py proves it with `promtool test rules` on series built from the rendered cluster):
- dcgm-exporter's counters (`components.gpu_metrics.DCGM_COUNTERS`, the chart's `customMetrics`), scraped by the
  chart's `kubernetes-service-endpoints` job (honor_labels; `node` from the endpoint's pod);
- our trainer's prometheus-client gauges (images/trainer/trainer/telemetry.py `Metrics`), scraped by the
  `kubernetes-pods` job from the pod annotation (local rank 0 of each pod; pod labels become series labels by its
  `labelmap __meta_kubernetes_pod_label_(.+)`, so `app.kubernetes.io/name` arrives as `app_kubernetes_io_name`);
- Kueue v0.19.2's controller metrics (`KUEUE_METRICS`), scraped by the `kueue` job of `kueue_scrape_config`;
- `up`, which Prometheus itself writes for every target.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALERT_RULES_FILE = "alerting_rules.yml"
"""The chart's serverFiles key the rules go to (loaded by its default `rule_files`)."""

KUEUE_METRICS = frozenset({"kueue_pending_workloads", "kueue_admitted_workloads_total",
                           "kueue_admitted_active_workloads"})
"""The Kueue v0.19.2 series the rules and the dashboard read (kubernetes-sigs/kueue v0.19.2 pkg/metrics/metrics.go:
411-421 `PendingWorkloads` — `kueue_pending_workloads{cluster_queue, status, replica_role}`, a gauge; :525-531
`AdmittedWorkloadsTotal` — `kueue_admitted_workloads_total{cluster_queue, priority_class, replica_role}`, a counter;
:754-760 `AdmittedActiveWorkloads` — `kueue_admitted_active_workloads{cluster_queue, replica_role}`, a gauge;
subsystem `kueue`, pkg/constants/constants.go:24)."""

PROMETHEUS_METRICS = frozenset({"up"})
"""Series Prometheus writes itself for every scrape target (the scrape's health)."""

STALL_FLOOR_S = 300
"""A step counter flat for max(STALL_FLOOR_S, STALL_STEP_FACTOR × the median step time) is a stalled job."""
STALL_STEP_FACTOR = 10
STALL_STEP_WINDOW = "1h"
"""The window the median step time is taken over (and the last step time looked back for)."""
CHECKPOINT_AGE_FACTOR = 3
"""A checkpoint older than checkpointEvery × step time × CHECKPOINT_AGE_FACTOR alerts."""
IDLE_GPU_PERCENT = 5
"""A training pod's GPUs averaging below this utilisation (percent) for IDLE_FOR are idle."""
IDLE_FOR = "15m"
THROTTLE_FRACTION = 0.1
"""Thermal or power throttling for more than this fraction of the time (over 5 minutes, held 10 minutes) alerts."""

XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
"""dcgm-exporter's windowed XID count (tag 4.4.1-4.6.0, the chart's appVersion): one series per GPU and XID seen in
the last window, XID in label `xid`, value = how often (internal/pkg/collector/xid_collector.go:68-72,
expcollector.go:47-95); a GPU with none has one series without `xid`, value 0 (expcollector.go:96-99). Unlike
`DCGM_FI_DEV_XID_ERRORS` (the last XID, held until the exporter restarts) it returns to healthy by itself."""
XID_COUNT_WINDOW_MINUTES = 5
"""The count's window, passed as `DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE` in ms (pkg/cmd/app.go:234-240, default 5
minutes): the alert resolves this long after the last hardware XID."""
HARDWARE_XIDS: Mapping[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remap recorded",
    64: "ECC page retirement or row remap failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
"""XIDs that mean the GPU itself (memory, NVLink, bus, GSP firmware) is at fault: NVIDIA's Xid catalog
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, resolution buckets reset/drain/RMA rather than
restart the application). Application and driver-side XIDs are left out on purpose: 13, 31, 43, 45, 68, 109, which
NVIDIA/k8s-device-plugin v0.20.0 internal/rm/health.go:229-240 also ignores ("Application errors: the GPU should
still be healthy"); 45 comes with every killed CUDA process."""


@dataclass(frozen=True)
class GpuGroupExpectation:
    """The GPUs each node of a GPU node group should show."""

    group: str
    gpu_model: str
    """The catalog's model name (`A100`, `H100`, `L4`...), matched as a word of dcgm-exporter's `modelName`."""
    gpus_per_node: int


@dataclass(frozen=True)
class TrainedWorkload:
    """A workload running our trainer (its metrics are scraped; others' programs export none of ours)."""

    name: str
    """The workload's name: its pods carry `app.kubernetes.io/name: <name>`."""
    checkpoint_every: int
    """`workloads.<name>.checkpointEvery`: steps between checkpoints."""


@dataclass(frozen=True)
class AlertInputs:
    """What the rules' thresholds come from (all from the stack config)."""

    training_namespace: str
    gpu_groups: Sequence[GpuGroupExpectation] = ()
    workloads: Sequence[TrainedWorkload] = ()
    cluster_queue: str | None = None
    """The stack's Kueue ClusterQueue; None when Kueue is off (no queue rule)."""
    admission_budget: str = "30m"
    """`kueue.admissionBudget`: how long a gang may wait for admission (a Prometheus duration)."""
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels every alert carries (e.g. the stack's name)."""


def model_regex(model: str) -> str:
    """`model` as a whole word of dcgm-exporter's `modelName` (`L4` must not match `NVIDIA L40S`, `A100` not
    `A1000`). PromQL regexes are RE2 and fully anchored."""
    return f"(.*[^A-Za-z0-9])?{re.escape(model)}([^A-Za-z0-9].*)?"


def by_model(groups: Sequence[GpuGroupExpectation]) -> list[GpuGroupExpectation]:
    """One expectation per GPU model: dcgm-exporter's series name a node by its GPUs' model, not its group, so
    groups of one model with different GPU counts (g5.xlarge's 1 A10G, g5.12xlarge's 4) share the smallest count
    (a missing GPU on the wider group's nodes goes unseen until fewer remain than the narrowest has, instead of
    every narrow node alerting forever); the group label lists them all."""
    merged: dict[str, GpuGroupExpectation] = {}
    for group in groups:
        seen = merged.get(group.gpu_model)
        merged[group.gpu_model] = group if seen is None else GpuGroupExpectation(
            f"{seen.group},{group.group}", group.gpu_model, min(seen.gpus_per_node, group.gpus_per_node))
    return list(merged.values())


def _alert(name: str, expr: str, *, severity: str, summary: str, description: str, for_: str | None = None,
           labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": " ".join(expr.split())}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **dict(labels or {})}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def gpu_rules(inputs: AlertInputs) -> list[dict[str, Any]]:
    """Hardware faults dcgm-exporter sees: XID, uncorrectable ECC, retired/remapped memory, throttling, a GPU gone."""
    extra = inputs.extra_labels
    hardware_xids = "|".join(str(xid) for xid in sorted(HARDWARE_XIDS))
    meanings = ", ".join(f"{xid} {meaning}" for xid, meaning in sorted(HARDWARE_XIDS.items()))
    rules = [
        _alert("GpuXidError", f'{XID_COUNT_METRIC}{{xid=~"{hardware_xids}"}} > 0', severity="critical",
               labels=extra,
               summary="GPU {{ $labels.gpu }} on {{ $labels.node }} reported hardware XID {{ $labels.xid }} "
                       f"({{{{ $value }}}} times in the last {XID_COUNT_WINDOW_MINUTES} minutes)",
               description=f"A hardware XID ({meanings}; NVIDIA Xid catalog) means this GPU is faulty: drain the "
                           "node if it repeats; EKS node auto-repair acts on the node monitoring agent's "
                           "AcceleratedHardwareReady condition. Application XIDs (13, 31, 43, 45 for a killed "
                           f"process) never fire this; it resolves {XID_COUNT_WINDOW_MINUTES} minutes after the "
                           "last hardware XID."),
        _alert("GpuUncorrectableEccErrors", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", severity="critical",
               labels=extra,
               summary="GPU {{ $labels.gpu }} on {{ $labels.node }}: uncorrectable (double-bit) ECC errors",
               description="Double-bit ECC errors corrupt data: the job on this GPU must restart from a checkpoint "
                           "and the GPU needs a reset or replacement."),
        _alert("GpuMemoryRetirementPending",
               "DCGM_FI_DEV_RETIRED_PENDING > 0 or DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", severity="warning",
               labels=extra,
               summary="GPU {{ $labels.gpu }} on {{ $labels.node }} has memory pages pending retirement or a failed "
                       "row remap",
               description="Retired pages (pre-Ampere) take effect and row remapping (Ampere and later) is repaired "
                           "only after a GPU reset: drain the node; a failed remap means replace it."),
    ]
    for kind, metric in (("Thermal", "DCGM_FI_DEV_THERMAL_VIOLATION"), ("Power", "DCGM_FI_DEV_POWER_VIOLATION")):
        # The violation counters count microseconds throttled: rate()/1e6 is the fraction of time throttled.
        rules.append(_alert(
            f"Gpu{kind}Throttling", f"rate({metric}[5m]) / 1e6 > {THROTTLE_FRACTION:g}", for_="10m",
            severity="warning", labels=extra,
            summary=f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.node }}}} is {kind.lower()}-throttled "
                    f"{{{{ $value | humanizePercentage }}}} of the time",
            description=f"{kind} throttling slows the whole gang to this GPU's clock: check the node's cooling and "
                        "power cap (nvidia-smi -q -d PERFORMANCE)."))
    for group in by_model(inputs.gpu_groups):
        rules.append(_alert(
            "GpuMissingFromNode",
            f'count by (node) (DCGM_FI_DEV_GPU_TEMP{{modelName=~"{model_regex(group.gpu_model)}"}}) '
            f"< {group.gpus_per_node}",
            for_="5m", severity="critical", labels={**extra, "node_group": group.group},
            summary=f"Node {{{{ $labels.node }}}} of group {group.group} shows {{{{ $value }}}} of its "
                    f"{group.gpus_per_node} {group.gpu_model} GPUs",
            description="A GPU fell off the bus or failed to initialise (often XID 79): the device plugin no "
                        "longer offers it and multi-GPU pods can't start there. Replace the node."))
    rules.append(_alert(
        "DcgmExporterDown", 'up{job="kubernetes-service-endpoints", service="dcgm-exporter"} == 0', for_="5m",
        severity="warning", labels=extra,
        summary="dcgm-exporter on {{ $labels.node }} is not answering",
        description="Without it no GPU fault on this node is seen (the GPU rules above go silent)."))
    return rules


def _pods(inputs: AlertInputs, workload: str | None = None) -> str:
    selector = f'namespace="{inputs.training_namespace}"'
    return selector + (f', app_kubernetes_io_name="{workload}"' if workload else "")


def training_rules(inputs: AlertInputs) -> list[dict[str, Any]]:
    """Hung or wasteful training: a flat step counter, idle GPUs, stale checkpoints, a gang stuck in the queue."""
    extra, ns = inputs.extra_labels, inputs.training_namespace
    pods = _pods(inputs)
    rules = [
        # trainer_last_step_timestamp_seconds is set at each step (and at start); max_over_time keeps its last
        # value when the rank stops answering (SIGSTOP, a wedged interpreter), and `and on up` restricts the alert
        # to pods whose target Prometheus still discovers (the kubernetes-pods job drops finished pods).
        _alert("TrainingStepStalled",
               f"(time() - max_over_time(trainer_last_step_timestamp_seconds{{{pods}}}[{STALL_STEP_WINDOW}])) "
               f"> on (namespace, pod) clamp_min({STALL_STEP_FACTOR} * quantile_over_time(0.5, "
               f"trainer_step_time_seconds{{{pods}}}[{STALL_STEP_WINDOW}]), {STALL_FLOOR_S}) "
               f'and on (namespace, pod) up{{job="kubernetes-pods", namespace="{ns}"}}',
               severity="critical", labels=extra,
               summary="{{ $labels.app_kubernetes_io_name }} pod {{ $labels.pod }}: no step for {{ $value "
                       "| humanizeDuration }}",
               description=f"The step counter is flat for longer than max({STALL_FLOOR_S} s, {STALL_STEP_FACTOR} × "
                           "the median step time): a hung collective or a stalled rank. The trainer's watchdog "
                           "(--watchdog-timeout) exits the process so the gang restarts from its last checkpoint; "
                           "if this fires, that restart is not happening."),
        _alert("TrainingGpuIdle",
               f'avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{{namespace="{ns}", pod!=""}}) < {IDLE_GPU_PERCENT}',
               for_=IDLE_FOR, severity="warning", labels=extra,
               summary="Training pod {{ $labels.pod }} holds GPUs at {{ $value }} % utilisation",
               description=f"Below {IDLE_GPU_PERCENT} % for {IDLE_FOR}: the pod holds GPUs it doesn't use (waiting "
                           "on data, on a peer, or hung)."),
    ]
    for workload in inputs.workloads:
        limit = CHECKPOINT_AGE_FACTOR * workload.checkpoint_every
        selector = _pods(inputs, workload.name)
        # Steps since the last complete checkpoint × step time > checkpointEvery × step time × 3 is the same as
        # steps since > 3 × checkpointEvery, without depending on a (noisy) step time.
        rules.append(_alert(
            "TrainingCheckpointTooOld",
            f"trainer_step{{{selector}}} - trainer_last_checkpoint_step{{{selector}}} > {limit}",
            for_="5m", severity="warning", labels={**extra, "workload": workload.name},
            summary=f"{workload.name} pod {{{{ $labels.pod }}}}: {{{{ $value }}}} steps since the last complete "
                    "checkpoint",
            description=f"checkpointEvery is {workload.checkpoint_every}: more than {CHECKPOINT_AGE_FACTOR} "
                        "intervals without a complete checkpoint means saves fail or hang; a restart now loses "
                        "that much work."))
    if inputs.cluster_queue:
        queue = f'cluster_queue="{inputs.cluster_queue}"'
        budget = inputs.admission_budget
        # Kueue exports counts per queue, not per workload's age: a queue with a workload pending for the whole
        # budget and not one admission in that time has a head-of-line gang waiting at least the budget.
        rules.append(_alert(
            "KueueGangPendingTooLong",
            f"max by (cluster_queue) (kueue_pending_workloads{{{queue}}}) > 0 "
            f"and on (cluster_queue) sum by (cluster_queue) (increase(kueue_admitted_workloads_total{{{queue}}}"
            f"[{budget}])) == 0",
            for_=budget, severity="warning", labels=extra,
            summary=f"ClusterQueue {inputs.cluster_queue}: {{{{ $value }}}} workload(s) pending, none admitted for "
                    f"{budget}",
            description="A gang waits for admission longer than kueue.admissionBudget: its quota is taken, the "
                        "node group can't grow (max size, capacity), or the workload asks more than the queue "
                        "has (kubectl -n <ns> describe workloads)."))
    return rules


def alert_rules(inputs: AlertInputs) -> dict[str, Any]:
    """The rule file (`groups:`) for the chart's `serverFiles."alerting_rules.yml"`."""
    return {"groups": [{"name": "gtp-gpu", "rules": gpu_rules(inputs)},
                       {"name": "gtp-training", "rules": training_rules(inputs)}]}


_FUNCTIONS = frozenset({
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "count_over_time", "day_of_month", "day_of_week", "delta", "deriv", "exp", "floor", "histogram_quantile",
    "holt_winters", "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time", "ln", "log2",
    "log10", "max_over_time", "min_over_time", "predict_linear", "present_over_time", "quantile_over_time", "rate",
    "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time",
    "sum_over_time", "time", "timestamp", "vector", "avg", "count", "count_values", "group", "max", "min",
    "quantile", "stddev", "stdvar", "sum", "topk", "bottomk", "and", "or", "unless", "by", "without", "on",
    "ignoring", "group_left", "group_right", "bool", "offset", "inf", "nan"})
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers that are not PromQL functions, operators or keywords,
    after dropping string literals, label matchers `{...}`, ranges `[...]` and grouping label lists."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)", text):
        word = match.group(1)
        if word.lower() not in _FUNCTIONS and not re.fullmatch(r"\d+[smhdwy]", word):
            names.add(word)
    return names


def unexported(rules: Mapping[str, Any], exported: set[str] | frozenset[str]) -> list[str]:
    """One line per rule whose expression selects a metric not in `exported` (empty: every rule can fire)."""
    problems = []
    for group in rules.get("groups") or []:
        for rule in group.get("rules") or []:
            missing = sorted(metric_names(str(rule["expr"])) - set(exported))
            if missing:
                problems.append(f"{group['name']}/{rule.get('alert') or rule.get('record')}: {missing} "
                                "exported by nobody (not in dcgm-exporter's counters, the trainer's metrics, "
                                "Kueue's or Prometheus' own)")
    return problems
