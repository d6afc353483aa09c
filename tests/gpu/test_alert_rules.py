"""The prod stack's alert rules, unit-tested with `promtool test rules` on the series the cluster really exports.

The rules are the rendered prometheus ConfigMap's `alerting_rules.yml`. Each scenario feeds promtool input series
whose names come from what is exported (dcgm-exporter's rendered counters file, the trainer's registry, Kueue's
metrics) and whose labels are what the rendered scrape jobs store (tests/gpu/alert_series.py), then checks which
series fire (`ALERTS{alertstate="firing"}`) and which don't. Thresholds the test expects come from the stack file
and the instance catalog, not from the code under test. A planted wrong metric name fails both the export check
and promtool. Every rendered alert rule also has a recovery scenario (`RECOVERIES`): it fires, its input returns to
healthy, and promtool's `alert_rule_test` finds no such alert afterwards; `missing_resolve_cases` refuses a rule
without one, so a new alert can't be added without proving it clears.

Needs `promtool` (Debian's `prometheus` package; `make test` installs it as root, else `make prometheus-local`).
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog.gpu_instances import GPU_INSTANCE_TYPES
from components.alert_rules import (
    HARDWARE_XIDS,
    XID_COUNT_METRIC,
    XID_COUNT_WINDOW_MINUTES,
    AlertInputs,
    metric_names,
    model_regex,
    unexported,
)
from components.kueue import cluster_queue_name
from conventions.names import training_namespace
from tests.conftest import ROOT, plan_stack
from tests.gpu import alert_series as alerts
from verify.render import ClusterObject, render_cluster
from verify.simulate import queries

pytestmark = pytest.mark.slow
STACK = "prod"
NS = training_namespace(STACK)
MODEL_NAMES = {"H100": "NVIDIA H100 80GB HBM3", "A100": "NVIDIA A100-SXM4-40GB", "A10G": "NVIDIA A10G",
               "L4": "NVIDIA L4", "L40S": "NVIDIA L40S", "T4G": "NVIDIA T4G"}
"""`modelName` as dcgm-exporter reports it (NVML's device name) for the catalog's models."""
_OBJECTS: list[ClusterObject] = []


def objects() -> list[ClusterObject]:
    if not _OBJECTS:
        _OBJECTS.extend(render_cluster(plan_stack(STACK)))
    return _OBJECTS


def stack_file() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("`promtool` is missing: run `make prometheus-local` (Debian's prometheus package; `make test` "
                    "installs it as root)")
    return found


# ---------------------------------------------------------------- scenarios: input series and expectations


def _firing(alert: str, **labels: str) -> str:
    body = ",".join([f'alertname="{alert}"', 'alertstate="firing"', *(f'{k}="{v}"' for k, v in labels.items())])
    return f"count(ALERTS{{{body}}})"


def _expect(alert: str, at: str, fires: bool, **labels: str) -> dict[str, Any]:
    return {"expr": _firing(alert, **labels), "eval_time": at,
            "exp_samples": [{"labels": "{}", "value": 1}] if fires else []}


def _resolved(alert: str, at: str) -> dict[str, Any]:
    """promtool's alert_rule_test: no `alert` of any labels firing at `at`."""
    return {"eval_time": at, "alertname": alert, "exp_alerts": []}


def _gpu(node: str, gpu: int, pod: str = "", namespace: str = NS, model: str | None = None,
         **extra: str) -> dict[str, str]:
    use = queries.GpuUse(gpu, 0.0, namespace if pod else "", pod, "pytorch" if pod else "")
    return alerts.dcgm_series_labels(objects(), use, node, MODEL_NAMES.get(model or ""), extra)


def _xid_count(node: str, gpu: int, xid: int | None, values: str) -> dict[str, str]:
    """dcgm-exporter's windowed XID count of one GPU: per XID seen in the window a series labelled `xid`, and one
    without `xid` (value 0) while none is (expcollector.go:85-99 at tag 4.4.1-4.6.0)."""
    window = {"window_size_in_ms": str(XID_COUNT_WINDOW_MINUTES * 60_000)}
    labels = _gpu(node, gpu, **window, **({"xid": str(xid)} if xid is not None else {}))
    return {"series": alerts.series(XID_COUNT_METRIC, labels), "values": values}


def _last_xid(node: str, gpu: int, values: str) -> dict[str, str]:
    return {"series": alerts.series("DCGM_FI_DEV_XID_ERRORS", _gpu(node, gpu)), "values": values}


def xid() -> dict[str, Any]:
    """GPU 0 reports XID 79 (fallen off the bus) and then 45s as its processes are killed: fires, naming 79 only.
    GPU 1 sees only application XIDs, a storm of 45s (killed processes) and 13/31/43, for 20 minutes, with the
    last-XID gauge stuck at 45: never fires."""
    alert, idle = "GpuXidError", "0 _x20"
    return {"name": alert, "series": [
        _xid_count("n0", 0, None, "0 0 _x19"), _xid_count("n0", 0, 79, "_ _ 1x5"),
        _xid_count("n0", 0, 45, "_ _ 4x5"), _last_xid("n0", 0, "0 0 79 45x18"),
        _xid_count("n0", 1, 45, "_ 3x20"), _xid_count("n0", 1, 13, "_ 1x20"), _xid_count("n0", 1, 31, "_ 2x20"),
        _xid_count("n0", 1, 43, "_ 1x20"), _xid_count("n0", 1, None, idle), _last_xid("n0", 1, "0 45x20")],
        "checks": [_expect(alert, "3m", True, node="n0", gpu="0", xid="79"),
                   _expect(alert, "3m", False, xid="45"), _expect(alert, "1m", False),
                   *(_expect(alert, at, False, gpu="1") for at in ("2m", "10m", "20m"))]}


def ecc() -> dict[str, Any]:
    return {"name": "GpuUncorrectableEccErrors", "series": [
        {"series": alerts.series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", _gpu("n0", 0)), "values": "0 0 0 2 2 2"},
        {"series": alerts.series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", _gpu("n0", 1)), "values": "0x6"},
        # Single-bit errors are corrected: many of them alone never fire.
        {"series": alerts.series("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", _gpu("n0", 1)), "values": "0+50x6"}],
        "checks": [_expect("GpuUncorrectableEccErrors", "4m", True, gpu="0"),
                   _expect("GpuUncorrectableEccErrors", "4m", False, gpu="1")]}


def retired() -> dict[str, Any]:
    return {"name": "GpuMemoryRetirementPending", "series": [
        {"series": alerts.series("DCGM_FI_DEV_RETIRED_PENDING", _gpu("n0", 0)), "values": "0 1 1 1"},
        {"series": alerts.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", _gpu("n0", 1)), "values": "0 0 1 1"},
        {"series": alerts.series("DCGM_FI_DEV_RETIRED_PENDING", _gpu("n0", 2)), "values": "0x4"},
        {"series": alerts.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", _gpu("n0", 2)), "values": "0x4"}],
        "checks": [_expect("GpuMemoryRetirementPending", "3m", True, gpu="0"),
                   _expect("GpuMemoryRetirementPending", "3m", True, gpu="1"),
                   _expect("GpuMemoryRetirementPending", "3m", False, gpu="2")]}


def throttling(kind: str, metric: str) -> dict[str, Any]:
    alert = f"Gpu{kind}Throttling"
    # Microseconds throttled per 1-minute sample: 30 % (18 s a minute) fires, 5 % (3 s) does not.
    return {"name": alert, "series": [
        {"series": alerts.series(metric, _gpu("n0", 0)), "values": "0+18000000x30"},
        {"series": alerts.series(metric, _gpu("n0", 1)), "values": "0+3000000x30"}],
        "checks": [_expect(alert, "25m", True, gpu="0"), _expect(alert, "25m", False, gpu="1"),
                   _expect(alert, "8m", False, gpu="0")]}  # held 10 minutes first


def gpu_missing() -> dict[str, Any]:
    """Per GPU group of the stack file: a node showing all its GPUs, and one missing a GPU."""
    items, checks = [], []
    for name, group in sorted(stack_file()["gtp:gpuNodeGroups"].items()):
        types = [GPU_INSTANCE_TYPES[t] for t in group["instanceTypes"]]
        expected, model = min(t.num_gpus for t in types), types[0].gpu_model
        for node, count in ((f"{name}-full", expected), (f"{name}-short", expected - 1)):
            for gpu in range(count):
                items.append({"series": alerts.series("DCGM_FI_DEV_GPU_TEMP", _gpu(node, gpu, model=model)),
                              "values": "40x10"})
        checks += [_expect("GpuMissingFromNode", "8m", True, node=f"{name}-short", node_group=name),
                   _expect("GpuMissingFromNode", "8m", False, node=f"{name}-full")]
    return {"name": "GpuMissingFromNode", "series": items, "checks": checks}


def exporter_down() -> dict[str, Any]:
    return {"name": "DcgmExporterDown", "series": [
        {"series": alerts.series("up", alerts.dcgm_up_labels(objects(), "n0")), "values": "1 1 0x10"},
        {"series": alerts.series("up", alerts.dcgm_up_labels(objects(), "n1")), "values": "1x12"}],
        "checks": [_expect("DcgmExporterDown", "9m", True, node="n0"),
                   _expect("DcgmExporterDown", "9m", False, node="n1")]}


def _trainer(workload: str, pod: str, rank: int = 0) -> dict[str, str]:
    return alerts.trainer_series_labels(objects(), workload, NS, pod, rank)


def stalled() -> dict[str, Any]:
    """Steps once a minute until minute 10, then: p-fast (2 s steps) stalls → fires after 5 min (the floor);
    p-slow (60 s median step) stalls → only after 10 × 60 s; p-stopped stops answering scrapes (SIGSTOP) and still
    fires; p-done finished (its target is gone) and p-ok keeps stepping: neither fires."""
    workload = sorted(stack_file()["gtp:workloads"])[0]
    items = []
    for pod, step_time, steps_after, up in (
            ("p-fast", "2x40", "600x30", "1x40"), ("p-slow", "60x40", "600x30", "1x40"),
            ("p-stopped", "2x10 stale", "stale", "1x10 0x30"), ("p-done", "2x10 stale", "stale", "1x10 stale"),
            ("p-ok", "2x40", "660+60x29", "1x40")):
        labels = _trainer(workload, pod)
        stamps = "0+60x10 " + steps_after
        items += [{"series": alerts.series("trainer_last_step_timestamp_seconds", labels), "values": stamps},
                  {"series": alerts.series("trainer_step_time_seconds", labels), "values": step_time},
                  {"series": alerts.series("up", alerts.trainer_up_labels(objects(), workload, NS, pod)),
                   "values": up}]
    alert = "TrainingStepStalled"
    return {"name": alert, "series": items, "checks": [
        _expect(alert, "14m", False, pod="p-fast"), _expect(alert, "16m", True, pod="p-fast"),
        _expect(alert, "16m", True, pod="p-stopped"),
        _expect(alert, "16m", False, pod="p-slow"), _expect(alert, "21m", True, pod="p-slow"),
        _expect(alert, "25m", False, pod="p-done"), _expect(alert, "25m", False, pod="p-ok")]}


def gpu_idle() -> dict[str, Any]:
    alert = "TrainingGpuIdle"
    items = [{"series": alerts.series("DCGM_FI_DEV_GPU_UTIL", _gpu("n0", gpu, pod)), "values": value}
             for gpu, pod, value in ((0, "idle-0", "1x30"), (1, "idle-0", "2x30"), (2, "busy-0", "90x30"))]
    items += [{"series": alerts.series("DCGM_FI_DEV_GPU_UTIL", _gpu("n0", 3)), "values": "0x30"},  # no pod
              {"series": alerts.series("DCGM_FI_DEV_GPU_UTIL", _gpu("n0", 4, "other-0", "elsewhere")),
               "values": "0x30"}]
    return {"name": alert, "series": items, "checks": [
        _expect(alert, "20m", True, pod="idle-0"), _expect(alert, "20m", False, pod="busy-0"),
        _expect(alert, "20m", False, namespace="elsewhere"), _expect(alert, "10m", False, pod="idle-0")]}


def checkpoint_age() -> dict[str, Any]:
    """Per trainer workload of the stack file: a pod whose checkpoints stopped at 0 while it steps checkpointEvery
    steps a minute (fires once 3 × checkpointEvery steps are unsaved, held 5 min), one that checkpoints every
    checkpointEvery steps (never)."""
    alert, items, checks = "TrainingCheckpointTooOld", [], []
    for name, workload in sorted(stack_file()["gtp:workloads"].items()):
        every = int(workload.get("checkpointEvery", 100))
        for pod, checkpoint in ((f"{name}-stuck", "0x20"), (f"{name}-saving", f"0+{every}x20")):
            labels = _trainer(name, pod)
            items += [{"series": alerts.series("trainer_step", labels), "values": f"0+{every}x20"},
                      {"series": alerts.series("trainer_last_checkpoint_step", labels), "values": checkpoint}]
        checks += [_expect(alert, "11m", True, pod=f"{name}-stuck", workload=name),
                   _expect(alert, "7m", False, pod=f"{name}-stuck"),
                   _expect(alert, "15m", False, pod=f"{name}-saving")]
    return {"name": alert, "series": items, "checks": checks}


def _minutes(duration: str) -> int:
    """A Prometheus duration (an alert's `for:`, `kueue.admissionBudget`) in minutes, read as Prometheus reads it."""
    return _seconds(duration) // 60


def kueue_pending() -> dict[str, Any]:
    """A gang pending with no admission for the stack's admission budget fires; pending while others are admitted
    (a queue that moves) and another ClusterQueue don't."""
    alert = "KueueGangPendingTooLong"
    budget = _minutes((stack_file().get("gtp:kueue") or {}).get("admissionBudget", "30m"))
    queue, length = cluster_queue_name(STACK), 3 * budget

    def kueue(metric: str, cq: str, **extra: str) -> str:
        return alerts.series(metric, alerts.kueue_series_labels(
            objects(), {"cluster_queue": cq, "replica_role": "leader", **extra}))

    items = [{"series": kueue("kueue_pending_workloads", queue, status="active"), "values": f"1x{length}"},
             {"series": kueue("kueue_pending_workloads", queue, status="inadmissible"), "values": f"0x{length}"},
             {"series": kueue("kueue_admitted_workloads_total", queue, priority_class="gtp-training"),
              "values": f"5x{length}"},
             {"series": kueue("kueue_pending_workloads", "moving", status="active"), "values": f"1x{length}"},
             {"series": kueue("kueue_admitted_workloads_total", "moving", priority_class="gtp-training"),
              "values": f"0+1x{length}"}]
    return {"name": alert, "series": items, "checks": [
        _expect(alert, f"{budget - 5}m", False, cluster_queue=queue),
        _expect(alert, f"{budget + 5}m", True, cluster_queue=queue),
        _expect(alert, f"{budget + 5}m", False, cluster_queue="moving")]}


SCENARIOS = (xid, ecc, retired, lambda: throttling("Thermal", "DCGM_FI_DEV_THERMAL_VIOLATION"),
             lambda: throttling("Power", "DCGM_FI_DEV_POWER_VIOLATION"), gpu_missing, exporter_down, stalled,
             gpu_idle, checkpoint_age, kueue_pending)


# ---------------------------------------------------------------- recoveries: fires, then healthy again, then gone


def _recovery(alert: str, series: list[dict[str, str]], fired: list[dict[str, Any]], resolved_at: str
              ) -> dict[str, Any]:
    return {"name": f"{alert} resolves", "series": series, "checks": fired,
            "alert_checks": [_resolved(alert, resolved_at)]}


def xid_recovers() -> dict[str, Any]:
    """XID 79 enters the window at minute 2 and leaves it 5 minutes later; the last-XID gauge keeps 79 for good
    (the issue: an alert on it never resolves)."""
    alert = "GpuXidError"
    return _recovery(alert, [_xid_count("n0", 0, None, "0 0 _x5 0x10"), _xid_count("n0", 0, 79, "_ _ 1x4 stale"),
                             _last_xid("n0", 0, "0 0 79x15")],
                     [_expect(alert, "3m", True, gpu="0", xid="79")], f"{XID_COUNT_WINDOW_MINUTES + 4}m")


def ecc_recovers() -> dict[str, Any]:
    """Two double-bit errors at minute 2, none after: clear once they leave the 10-minute increase window."""
    alert = "GpuUncorrectableEccErrors"
    return _recovery(alert, [{"series": alerts.series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", _gpu("n0", 0)),
                              "values": "0 0 2x20"}],
                     [_expect(alert, "4m", True, gpu="0")], "14m")


def retired_recovers() -> dict[str, Any]:
    """A GPU reset at minute 6 applies the pending retirement and clears the failed remap."""
    alert = "GpuMemoryRetirementPending"
    return _recovery(alert, [
        {"series": alerts.series("DCGM_FI_DEV_RETIRED_PENDING", _gpu("n0", 0)), "values": "0 1x4 0x10"},
        {"series": alerts.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", _gpu("n0", 1)), "values": "0 1x4 0x10"}],
        [_expect(alert, "3m", True, gpu="0"), _expect(alert, "3m", True, gpu="1")], "8m")


def throttling_recovers(kind: str, metric: str) -> dict[str, Any]:
    """Throttled 30 % of the time for 20 minutes, then not at all."""
    alert = f"Gpu{kind}Throttling"
    return _recovery(alert, [{"series": alerts.series(metric, _gpu("n0", 0)),
                              "values": "0+18000000x20 360000000x20"}],
                     [_expect(alert, "18m", True, gpu="0")], "28m")


def gpu_missing_recovers() -> dict[str, Any]:
    """Per GPU group of the stack file: a node's last GPU is missing for 10 minutes, then back."""
    items, fired = [], []
    for name, group in sorted(stack_file()["gtp:gpuNodeGroups"].items()):
        types = [GPU_INSTANCE_TYPES[t] for t in group["instanceTypes"]]
        expected, model = min(t.num_gpus for t in types), types[0].gpu_model
        for gpu in range(expected):
            items.append({"series": alerts.series("DCGM_FI_DEV_GPU_TEMP", _gpu(f"{name}-0", gpu, model=model)),
                          "values": "40x20" if gpu < expected - 1 else "_x10 40x10"})
        fired.append(_expect("GpuMissingFromNode", "8m", True, node=f"{name}-0", node_group=name))
    return _recovery("GpuMissingFromNode", items, fired, "12m")


def exporter_down_recovers() -> dict[str, Any]:
    alert = "DcgmExporterDown"
    return _recovery(alert, [{"series": alerts.series("up", alerts.dcgm_up_labels(objects(), "n0")),
                              "values": "1 1 0x10 1x10"}],
                     [_expect(alert, "9m", True, node="n0")], "14m")


def stalled_recovers() -> dict[str, Any]:
    """A step a minute, no step from minute 10 to 21 (fires after the 5-minute floor), then steps again."""
    alert, workload = "TrainingStepStalled", sorted(stack_file()["gtp:workloads"])[0]
    labels = _trainer(workload, "p-0")
    return _recovery(alert, [
        {"series": alerts.series("trainer_last_step_timestamp_seconds", labels),
         "values": "0+60x10 600x10 1260+60x10"},
        {"series": alerts.series("trainer_step_time_seconds", labels), "values": "2x32"},
        {"series": alerts.series("up", alerts.trainer_up_labels(objects(), workload, NS, "p-0")), "values": "1x32"}],
        [_expect(alert, "16m", True, pod="p-0")], "24m")


def gpu_idle_recovers() -> dict[str, Any]:
    alert = "TrainingGpuIdle"
    return _recovery(alert, [{"series": alerts.series("DCGM_FI_DEV_GPU_UTIL", _gpu("n0", 0, "idle-0")),
                              "values": "1x20 90x10"}],
                     [_expect(alert, "18m", True, pod="idle-0")], "23m")


def checkpoint_recovers() -> dict[str, Any]:
    """Per trainer workload: checkpoints stuck at step 0 (fires), then a checkpoint a minute from minute 13."""
    alert, items, fired = "TrainingCheckpointTooOld", [], []
    for name, workload in sorted(stack_file()["gtp:workloads"].items()):
        every = int(workload.get("checkpointEvery", 100))
        labels = _trainer(name, f"{name}-0")
        items += [{"series": alerts.series("trainer_step", labels), "values": f"0+{every}x30"},
                  {"series": alerts.series("trainer_last_checkpoint_step", labels),
                   "values": f"0x12 {13 * every}+{every}x17"}]
        fired.append(_expect(alert, "11m", True, pod=f"{name}-0", workload=name))
    return _recovery(alert, items, fired, "15m")


def kueue_recovers() -> dict[str, Any]:
    """The gang waits past the admission budget, then is admitted (pending 0, one more admission)."""
    alert = "KueueGangPendingTooLong"
    budget = _minutes((stack_file().get("gtp:kueue") or {}).get("admissionBudget", "30m"))
    queue = cluster_queue_name(STACK)

    def kueue(metric: str, **extra: str) -> str:
        return alerts.series(metric, alerts.kueue_series_labels(
            objects(), {"cluster_queue": queue, "replica_role": "leader", **extra}))

    return _recovery(alert, [
        {"series": kueue("kueue_pending_workloads", status="active"), "values": f"1x{budget + 10} 0x{budget}"},
        {"series": kueue("kueue_admitted_workloads_total", priority_class="gtp-training"),
         "values": f"5x{budget + 10} 6x{budget}"}],
        [_expect(alert, f"{budget + 5}m", True, cluster_queue=queue)], f"{budget + 13}m")


RECOVERIES = (xid_recovers, ecc_recovers, retired_recovers,
              lambda: throttling_recovers("Thermal", "DCGM_FI_DEV_THERMAL_VIOLATION"),
              lambda: throttling_recovers("Power", "DCGM_FI_DEV_POWER_VIOLATION"), gpu_missing_recovers,
              exporter_down_recovers, stalled_recovers, gpu_idle_recovers, checkpoint_recovers, kueue_recovers)


def promtool_tests(scenarios: Sequence[Callable[[], dict[str, Any]]] = SCENARIOS + RECOVERIES
                   ) -> list[dict[str, Any]]:
    """The `tests:` of promtool's test file, one per scenario."""
    tests = []
    for scenario in (make() for make in scenarios):
        test = {"name": scenario["name"], "interval": "1m", "input_series": scenario["series"],
                "promql_expr_test": scenario["checks"]}
        if scenario.get("alert_checks"):
            test["alert_rule_test"] = scenario["alert_checks"]
        tests.append(test)
    return tests


def run_promtool(rules: dict[str, Any], directory: Path, tests: list[dict[str, Any]] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    (directory / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (directory / "tests.yml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
         "tests": promtool_tests() if tests is None else tests}, sort_keys=False))
    return subprocess.run([promtool(), "test", "rules", str(directory / "tests.yml")], capture_output=True,
                          text=True, timeout=120, check=False)


def _seconds(duration: str) -> int:
    """A Prometheus duration (promtool's `eval_time`, an alert's `for:`) in seconds (model.ParseDuration)."""
    from conventions.durations import parse_prometheus_duration

    return parse_prometheus_duration(duration) // 10**9


def missing_resolve_cases(rules: dict[str, Any], tests: list[dict[str, Any]]) -> list[str]:
    """One line per rendered alert rule that no promtool test shows firing and then gone: a test whose
    `promql_expr_test` finds the rule firing (its alertname and the labels that tell it from same-named rules) and
    whose `alert_rule_test` expects no such alert (`exp_alerts: []`) at a later time."""
    all_rules = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    common = set.intersection(*(set(rule.get("labels", {}).items()) for rule in all_rules)) if all_rules else set()
    problems = []
    for rule in all_rules:
        alert = rule["alert"]
        own = {k: v for k, v in rule.get("labels", {}).items() if (k, v) not in common and k != "severity"}
        covered = False
        for test in tests:
            fired = [_seconds(c["eval_time"]) for c in test.get("promql_expr_test") or []
                     if c.get("exp_samples") and _fires(c["expr"], alert, own)]
            gone = [_seconds(c["eval_time"]) for c in test.get("alert_rule_test") or []
                    if c.get("alertname") == alert and c.get("exp_alerts") == []]
            covered = covered or any(after > before for before in fired for after in gone)
        if not covered:
            problems.append(f"{alert} {own or ''}".rstrip() + ": no promtool test shows it firing and then resolved "
                            "(add a scenario to RECOVERIES: its series fire, return to healthy, and an "
                            "alert_rule_test with exp_alerts: [] after)")
    return problems


def _fires(expr: str, alert: str, labels: dict[str, str]) -> bool:
    matchers = dict(re.findall(r'(\w+)="([^"]*)"', expr))
    return (expr.startswith("count(ALERTS{") and matchers.get("alertname") == alert
            and matchers.get("alertstate") == "firing" and labels.items() <= matchers.items())


@pytest.fixture(scope="module")
def rules() -> dict[str, Any]:
    found = alerts.rule_file(objects())
    assert found is not None, "the prod plan renders no alerting_rules.yml"
    return found


def _alert_names(rules: dict[str, Any]) -> set[str]:
    return {rule["alert"] for group in rules["groups"] for rule in group["rules"]}


# ---------------------------------------------------------------- the tests


def test_the_issue_s_alerts_are_rendered_and_each_has_a_scenario(rules: dict[str, Any]) -> None:
    wanted = {"GpuXidError", "GpuUncorrectableEccErrors", "GpuMemoryRetirementPending", "GpuThermalThrottling",
              "GpuPowerThrottling", "GpuMissingFromNode", "TrainingStepStalled", "TrainingGpuIdle",
              "KueueGangPendingTooLong", "TrainingCheckpointTooOld"}
    assert wanted <= _alert_names(rules)
    assert {scenario()["name"] for scenario in SCENARIOS} == _alert_names(rules)  # no rule without a test
    assert {scenario()["name"] for scenario in RECOVERIES} == {f"{name} resolves" for name in _alert_names(rules)}


def test_every_rule_selects_only_exported_metrics(rules: dict[str, Any]) -> None:
    exported = alerts.exported_metric_names(objects())
    assert {"trainer_step", "trainer_last_step_timestamp_seconds", "trainer_samples_total"} <= exported
    assert {"DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= exported
    assert unexported(rules, exported) == []


def test_a_planted_wrong_metric_name_is_refused(rules: dict[str, Any]) -> None:
    planted = copy.deepcopy(rules)
    planted["groups"][0]["rules"][0]["expr"] = planted["groups"][0]["rules"][0]["expr"].replace(
        "DCGM_EXP_XID_ERRORS_COUNT", "DCGM_EXP_XID_ERRORS_COUNTS")
    problems = unexported(planted, alerts.exported_metric_names(objects()))
    assert len(problems) == 1
    assert problems[0] == ("gtp-gpu/GpuXidError: ['DCGM_EXP_XID_ERRORS_COUNTS'] exported by nobody (not in "
                           "dcgm-exporter's counters, the trainer's metrics, Kueue's or Prometheus' own)")


def test_a_counter_left_out_of_the_exporters_file_is_refused(rules: dict[str, Any]) -> None:
    """The export list is the rendered counters file: without the chart's customMetrics (its default list has
    no ECC or throttling counters) the ECC and throttling rules select nothing."""
    rendered = objects()
    default_list = (ROOT / "vendor/charts/dcgm-exporter-4.6.0/templates/metrics-configmap.yaml").read_text()
    stripped = []
    for item in rendered:
        if item.kind == "ConfigMap" and "metrics" in (item.obj.get("data") or {}) and "dcgm" in item.source:
            obj = copy.deepcopy(item.obj)
            obj["data"]["metrics"] = default_list.split("{{- else }}")[1]
            item = ClusterObject(item.source, obj)
        stripped.append(item)
    problems = unexported(rules, alerts.exported_metric_names(stripped))
    assert any(p.startswith("gtp-gpu/GpuUncorrectableEccErrors: ['DCGM_FI_DEV_ECC_DBE_VOL_TOTAL']")
               for p in problems), problems
    assert any(p.startswith("gtp-gpu/GpuThermalThrottling") for p in problems), problems


def test_promtool_passes_every_scenario(rules: dict[str, Any], tmp_path: Path) -> None:
    result = run_promtool(rules, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_fails_on_a_planted_wrong_metric_name(rules: dict[str, Any], tmp_path: Path) -> None:
    planted = yaml.safe_load(yaml.safe_dump(rules).replace("trainer_last_step_timestamp_seconds",
                                                          "trainer_last_step_seconds"))
    result = run_promtool(planted, tmp_path)
    assert result.returncode != 0
    assert "TrainingStepStalled" in result.stdout + result.stderr


def test_every_rendered_alert_rule_has_a_resolve_case(rules: dict[str, Any]) -> None:
    assert missing_resolve_cases(rules, promtool_tests()) == []


def test_an_alert_added_without_a_resolve_case_is_refused(rules: dict[str, Any]) -> None:
    planted = copy.deepcopy(rules)
    new_rule = {**planted["groups"][1]["rules"][0], "alert": "TrainingSomethingNew"}
    planted["groups"][1]["rules"].append(new_rule)
    problems = missing_resolve_cases(planted, promtool_tests())
    assert problems == ["TrainingSomethingNew: no promtool test shows it firing and then resolved (add a scenario "
                        "to RECOVERIES: its series fire, return to healthy, and an alert_rule_test with "
                        "exp_alerts: [] after)"]
    # A check that only ever says "not firing" (or says "gone" before it fired) is no resolve case either.
    never_fired = [{**t, "promql_expr_test": [c for c in t["promql_expr_test"] if not c["exp_samples"]]}
                   for t in promtool_tests()]
    assert any(p.startswith("GpuXidError:") for p in missing_resolve_cases(rules, never_fired))


def test_promtool_sees_every_alert_resolve(rules: dict[str, Any], tmp_path: Path) -> None:
    result = run_promtool(rules, tmp_path, promtool_tests(RECOVERIES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_an_alert_on_the_last_xid_gauge_never_resolves_and_fires_on_xid_45(rules: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    """The rule issue 42 replaced: `DCGM_FI_DEV_XID_ERRORS` keeps the last XID until the exporter restarts, so an
    alert on it still fires after the XID left the window, and fires on a killed process's XID 45."""
    planted = copy.deepcopy(rules)
    planted["groups"][0]["rules"][0]["expr"] = "max_over_time(DCGM_FI_DEV_XID_ERRORS[5m]) > 0"
    result = run_promtool(planted, tmp_path, promtool_tests([xid, xid_recovers]))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "GpuXidError resolves" in output and 'alertname: GpuXidError' in output
    assert re.search(r'gpu=\\"1\\"\}\)", time: 10m', output), output  # the application-XID GPU fired


def test_hardware_xids_leave_out_application_xids() -> None:
    """NVIDIA/k8s-device-plugin v0.20.0 internal/rm/health.go:229-240 ignores these as application errors."""
    assert not {13, 31, 43, 45, 68, 109} & set(HARDWARE_XIDS)
    assert {48, 79, 94, 95} <= set(HARDWARE_XIDS)


def test_thresholds_follow_the_stack(rules: dict[str, Any]) -> None:
    config = stack_file()
    by_name = [rule for group in rules["groups"] for rule in group["rules"]]
    for name, workload in config["gtp:workloads"].items():
        rule = next(r for r in by_name if r["alert"] == "TrainingCheckpointTooOld"
                    and r["labels"]["workload"] == name)
        assert rule["expr"].endswith(f"> {3 * workload['checkpointEvery']}")
    for name, group in config["gtp:gpuNodeGroups"].items():
        rule = next(r for r in by_name if r["alert"] == "GpuMissingFromNode" and r["labels"]["node_group"] == name)
        assert rule["expr"].endswith(f"< {GPU_INSTANCE_TYPES[group['instanceTypes'][0]].num_gpus}")
    queue = next(r for r in by_name if r["alert"] == "KueueGangPendingTooLong")
    assert queue["for"] == (config.get("gtp:kueue") or {}).get("admissionBudget", "30m")


def test_groups_of_one_model_share_the_smallest_count() -> None:
    from components.alert_rules import GpuGroupExpectation, by_model, gpu_rules

    groups = [GpuGroupExpectation("small", "A10G", 1), GpuGroupExpectation("big", "A10G", 4),
              GpuGroupExpectation("h100", "H100", 8)]
    assert by_model(groups) == [GpuGroupExpectation("small,big", "A10G", 1), GpuGroupExpectation("h100", "H100", 8)]
    missing = [r for r in gpu_rules(AlertInputs(training_namespace="t", gpu_groups=groups))
               if r["alert"] == "GpuMissingFromNode"]
    assert [r["expr"].rsplit("< ", 1)[1] for r in missing] == ["1", "8"]


def test_model_names_match_whole_words() -> None:
    import re

    assert re.fullmatch(model_regex("L4"), "NVIDIA L4")
    assert not re.fullmatch(model_regex("L4"), "NVIDIA L40S")
    assert re.fullmatch(model_regex("A100"), "NVIDIA A100-SXM4-40GB")
    assert not re.fullmatch(model_regex("A10G"), "NVIDIA A100-SXM4-40GB")


def test_metric_names_skips_functions_labels_and_durations() -> None:
    expr = ('(time() - max_over_time(a_b{x="y"}[1h])) > on (namespace, pod) clamp_min(10 * quantile_over_time(0.5, '
            'c[5m]), 300) and on (pod) up{job="k"}')
    assert metric_names(expr) == {"a_b", "c", "up"}


def test_no_rules_without_prometheus_inputs() -> None:
    from components.alert_rules import alert_rules

    rules = alert_rules(AlertInputs(training_namespace="t"))
    assert "KueueGangPendingTooLong" not in _alert_names(rules)
    assert "GpuMissingFromNode" not in _alert_names(rules)
