"""Every dashboard query, checked like the alert rules: against what is exported and the pods the stacks run.

For the committed stacks, which run all four Kubernetes workload kinds between them (prod: PyTorchJob and TrainJob;
dev: PyTorchJob and ScaledJob; edge: ElasticJob), each training pod as verify/simulate/pods.py expands it (the
operators' and controllers' own labels included) exports the trainer's gauges with the labels the rendered
kubernetes-pods scrape job stores. Every per-job panel query then runs on those series in `promtool test rules`'
PromQL engine and must give exactly one row per workload of the stack file, named by the workload; and a real
Prometheus loading the rendered kubernetes-pods job scrapes fake pods serving the trainer's real /metrics text and
answers every per-job query with one row per workload. The old
queries (a pod-name regex that knew PyTorchJob's and DLRover's names only) are kept here to show the check fails
on them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.alert_rules import unexported
from components.gpu_metrics import DASHBOARD_FILE
from tests.conftest import ROOT, plan_stack
from tests.gpu import alert_series as alerts
from verify.render import render_cluster
from verify.simulate.pods import expand_pods

pytestmark = pytest.mark.slow
STACKS = ("prod", "dev", "edge")
KINDS = ("PyTorchJob", "TrainJob", "ElasticJob", "ScaledJob")
OLD_REGEX = '"(.+?)-(master|worker|edljob-worker|edljob-chief)-[0-9]+"'
OLD_STEP_TIME = ('avg by (namespace, training_job) (label_replace(trainer_step_time_seconds{namespace=~"$namespace"}, '
                 f'"training_job", "$1", "pod", {OLD_REGEX}))')


def panels() -> list[dict[str, Any]]:
    return json.loads(DASHBOARD_FILE.read_text())["panels"]


def expressions() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def grafana(expr: str) -> str:
    """Grafana's substitution of the dashboard's variables at "All" (`allValue: .*`)."""
    return expr.replace("$namespace", ".*").replace("$node", ".*")


def per_job_panels() -> list[str]:
    return [t["expr"] for p in panels() for t in p["targets"] if "trainer_" in t["expr"]]


def workloads(stack: str) -> dict[str, str]:
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {name: w.get("kind", "pytorchjob") for name, w in (config.get("gtp:workloads") or {}).items()}


def training_series(stack: str) -> list[dict[str, str]]:
    """The stored labels of `trainer_step_time_seconds` of every expanded training pod of the stack."""
    plan = plan_stack(stack)
    objects = render_cluster(plan)
    found = []
    for index, pod in enumerate(expand_pods(objects, plan)):
        if pod.owner.split()[0] not in (*KINDS, "Job") or not pod.namespace.startswith("training-"):
            continue
        labels = alerts.pod_series_labels(objects, pod.pod, pod.namespace, {"rank": "0"}, ip=f"10.1.0.{index + 1}")
        if labels is not None:
            found.append({"owner": pod.owner, **labels})
    return found


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("`promtool` is missing: run `make prometheus-local` (Debian's prometheus package)")
    return found


def evaluate(series: list[dict[str, str]], exprs: list[str], expected: list[list[dict[str, Any]]],
             directory: Path) -> subprocess.CompletedProcess[str]:
    inputs = [{"series": alerts.series(metric, {k: v for k, v in labels.items() if k != "owner"}), "values": "2x5"}
              for labels in series for metric in ("trainer_step_time_seconds", "trainer_samples_per_second",
                                                  "trainer_last_checkpoint_step")]
    tests = [{"interval": "1m", "input_series": inputs, "promql_expr_test": [
        {"expr": grafana(expr), "eval_time": "2m", "exp_samples": rows} for expr, rows in zip(exprs, expected)]}]
    (directory / "rules.yml").write_text("groups: []\n")
    (directory / "tests.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "tests": tests}))
    return subprocess.run([promtool(), "test", "rules", str(directory / "tests.yml")], capture_output=True, text=True,
                          timeout=120, check=False)


def _value(expr: str, pods: int) -> float:
    return 2.0 * pods if expr.startswith("sum") else 2.0


@pytest.mark.parametrize("stack", STACKS)
def test_every_per_job_panel_shows_each_workload_of_every_kind(stack: str, tmp_path: Path) -> None:
    series = training_series(stack)
    kinds = {labels["owner"].split()[0] for labels in series}
    names = workloads(stack)
    assert {labels["app_kubernetes_io_name"] for labels in series} == set(names), series
    namespace = series[0]["namespace"]
    exprs = per_job_panels()
    expected = []
    for expr in exprs:
        label = re.search(r"by \(namespace, (\w+)\)", expr)
        assert label and label.group(1) == "app_kubernetes_io_name", expr
        expected.append([{"labels": f'{{namespace="{namespace}",app_kubernetes_io_name="{name}"}}',
                          "value": _value(expr, sum(1 for s in series if s["app_kubernetes_io_name"] == name))}
                         for name in sorted(names)])
    result = evaluate(series, exprs, expected, tmp_path)
    assert result.returncode == 0, f"kinds {sorted(kinds)}\n{result.stdout}{result.stderr}"


def test_the_stacks_cover_every_kubernetes_workload_kind() -> None:
    kinds = {labels["owner"].split()[0] for stack in STACKS for labels in training_series(stack)}
    assert set(KINDS) <= kinds


def test_the_old_pod_name_regex_misses_trainjob_and_scaledjob_pods(tmp_path: Path) -> None:
    """The check fails on the old query: TrainJob pods (<job>-node-0-0-x) and a ScaledJob's Job pods (generated
    names) match no branch of its regex, so those workloads have no row."""
    for stack, got in (("prod", 'got: {namespace="training-prod"} 2E+00, {namespace="training-prod", '
                                 'training_job="gpt-pretrain"} 2E+00'), ("dev", None)):
        series = training_series(stack)
        names = workloads(stack)
        namespace = series[0]["namespace"]
        expected = [[{"labels": f'{{namespace="{namespace}",training_job="{name}"}}', "value": 2.0}
                     for name in sorted(names)]]
        result = evaluate(series, [OLD_STEP_TIME], expected, tmp_path)
        assert result.returncode != 0
        if got:  # the TrainJob's pods fell into a row without a job name
            assert got in result.stderr, result.stderr


def test_every_dashboard_query_reads_exported_metrics() -> None:
    objects = render_cluster(plan_stack("prod"))
    exported = alerts.exported_metric_names(objects)
    as_rules = {"groups": [{"name": "dashboard", "rules": [{"alert": f"panel-{i}", "expr": grafana(e)}
                                                          for i, e in enumerate(expressions())]}]}
    assert unexported(as_rules, exported) == []
    planted = {"groups": [{"name": "dashboard", "rules": [{"alert": "p", "expr": "DCGM_FI_DEV_POWER_USAGES"}]}]}
    assert unexported(planted, exported) == [
        "dashboard/p: ['DCGM_FI_DEV_POWER_USAGES'] exported by nobody (not in dcgm-exporter's counters, the "
        "trainer's metrics, Kueue's or Prometheus' own)"]


def test_kueue_xid_and_power_panels_exist() -> None:
    titles = {panel["title"]: [t["expr"] for t in panel["targets"]] for panel in panels()}
    assert any("kueue_pending_workloads" in e for e in titles["Kueue pending workloads"])
    assert any("kueue_admitted_active_workloads" in e for e in titles["Kueue admitted workloads"])
    assert any("DCGM_FI_DEV_XID_ERRORS" in e for e in titles["XID errors"])
    assert any("DCGM_FI_DEV_POWER_USAGE" in e for e in titles["GPU power and power throttling"])


def test_a_real_prometheus_scraping_the_trainers_answers_every_per_job_panel(tmp_path: Path) -> None:
    """The rendered kubernetes-pods job (relabel rules untouched; discovery replaced by the static targets pod
    discovery would give each expanded training pod of prod, dev and edge) scrapes fake pods serving the trainer's
    real /metrics text (its `Metrics` registry) on their own loopback addresses; each per-job panel query, sent to
    that Prometheus, has one row per workload of the three stacks."""
    import copy
    import time

    from tests.simulate.test_prometheus import Server, _free_port, _serve_on_loopback, prometheus_binary
    from trainer.telemetry import Metrics
    from verify.simulate import queries

    binary = prometheus_binary()
    objects = render_cluster(plan_stack("prod"))
    job = copy.deepcopy(next(j for j in queries.prometheus_config(objects)["scrape_configs"]
                             if j["job_name"] == "kubernetes-pods"))
    for key in ("kubernetes_sd_configs", "bearer_token_file", "tls_config", "authorization", "scrape_interval",
                "scrape_timeout"):
        job.pop(key, None)
    servers, static, expected = [], [], set()
    for stack in STACKS:
        plan = plan_stack(stack)
        for pod in expand_pods(render_cluster(plan), plan):
            if pod.owner.split()[0] not in KINDS or not pod.namespace.startswith("training-"):
                continue
            server, address = _serve_on_loopback(9464)
            metrics = Metrics(0, rank=len(servers), serve=False)
            metrics.observe_step(10, 0.5, 8)
            metrics.observe_checkpoint(10)
            server.text = metrics.exposition()
            servers.append(server)
            name = pod.pod["metadata"]["labels"]["app.kubernetes.io/name"]
            expected.add((pod.namespace, name))
            static += [{"targets": [t["__address__"]], "labels": {k: v for k, v in t.items() if k != "__address__"}}
                       for t in alerts.pod_targets(pod.pod, pod.namespace, address)]
    assert {n for _, n in expected} == {n for s in STACKS for n in workloads(s)}
    job["static_configs"] = static
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [job]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    listen = f"127.0.0.1:{_free_port()}"
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address={listen}",
                                "--log.level=warn"], stdout=subprocess.DEVNULL,
                               stderr=(tmp_path / "prometheus.log").open("w"))
    server = Server(f"http://{listen}", servers, [], config)
    try:
        deadline = time.monotonic() + 60
        for expr in per_job_panels():
            rows: set[tuple[str, str]] = set()
            while time.monotonic() < deadline:
                try:
                    answer = server.query(grafana(expr))
                    rows = {(r["metric"].get("namespace", ""), r["metric"].get("app_kubernetes_io_name", ""))
                            for r in answer["data"]["result"]}
                except OSError:
                    rows = set()
                if rows == expected:
                    break
                time.sleep(0.5)
            assert rows == expected, (expr, rows, (tmp_path / "prometheus.log").read_text()[-2000:])
    finally:
        process.terminate()
        process.wait(timeout=10)
        for exporter in servers:
            exporter.shutdown()
