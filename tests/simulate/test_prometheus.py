"""Each KEDA prometheus trigger of the prod stack, run through a REAL Prometheus.

The server loads the prometheus chart's rendered `prometheus.yml` (relabel rules untouched; Kubernetes discovery
replaced by static targets with the labels it would give dcgm-exporter's pods, `queries.offline_config`), scrapes
HTTP servers that speak dcgm-exporter 4.x's exposition with pod attribution, and answers the ScaledObject's exact
query over its HTTP API. The job's relabelling rewrites the address to the Service annotation's port (9400), so
each fake exporter listens on its own loopback address at that port, like a pod IP.

Needs the `prometheus` binary: `make test` installs it as root (tools.system_packages); else `make
prometheus-local`. That is Debian's package (2.42 on bookworm) while the chart deploys v3.6.0; the parts this
exercises agree between them: scrape.go `mutateSampleLabels` (honor_labels) is the same code, and relabel.go
`NewRegexp` differs only in 3.x's `(?s:` (`.` also matches a newline), which none of the chart's rules or these label
values can tell apart. Old failure #5 (the query filtered on `exported_namespace`/`exported_pod`) is
`test_the_old_exported_labels_query_returns_nothing`.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import random
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import plan_variant
from verify.render import ClusterObject, render_cluster
from verify.simulate import queries

pytestmark = pytest.mark.slow
METRIC = "DCGM_FI_DEV_GPU_UTIL"
OLD_QUERY = ('avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="training-prod",'
             'exported_pod=~"gpt-pretrain-worker-[0-9]+"})')
_OBJECTS: list[ClusterObject] = []


def prod_objects() -> list[ClusterObject]:
    if not _OBJECTS:
        _OBJECTS.extend(render_cluster(plan_variant("prod-keda")))
    return _OBJECTS


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("the `prometheus` binary is missing: run `make prometheus-local` (installs Debian's prometheus "
                    "package; `make test` does it as root)")
    return found


class Exporter(http.server.ThreadingHTTPServer):
    """A fake dcgm-exporter pod: /metrics serves `text`, which a test may replace between scrapes."""

    text = ""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.text.encode()  # type: ignore[attr-defined]
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _serve_on_loopback(port: int) -> tuple[Exporter, str]:
    """An exporter on a free 127.x.y.z:<port> (Linux routes all of 127/8 to lo)."""
    for _ in range(50):
        address = f"127.{random.randint(1, 254)}.{random.randint(0, 254)}.{random.randint(1, 254)}"
        try:
            server = Exporter((address, port), _Handler)
        except OSError:
            continue
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, address
    raise RuntimeError(f"no free loopback address for port {port}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Server:
    url: str
    exporters: list[Exporter]
    pods: list[queries.ExporterPod]
    config: dict[str, Any]

    def get(self, path: str, **params: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(params)}", timeout=5) as answer:
            return json.load(answer)

    def query(self, promql: str) -> dict[str, Any]:
        answer = self.get("/api/v1/query", query=promql)
        assert answer["status"] == "success", answer
        return answer

    def wait_for(self, promql: str, predicate, timeout: float = 30.0) -> dict[str, Any]:
        deadline, answer = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            answer = self.query(promql)
            if predicate(answer):
                return answer
            time.sleep(0.25)
        raise AssertionError(f"{promql} never satisfied the condition; last answer {answer}; targets "
                             f"{self.get('/api/v1/targets')}")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    binary = prometheus_binary()
    objects = prod_objects()
    exporter = queries.dcgm_exporter(objects)
    config = queries.prometheus_config(objects)
    assert exporter is not None and config is not None
    port = int(exporter.service["metadata"]["annotations"]["prometheus.io/port"])
    servers = [_serve_on_loopback(port) for _ in range(2)]
    pods = [dataclasses.replace(pod, ip=address)
            for pod, (_, address) in zip(queries.exporter_pods(len(servers)), servers, strict=True)]
    test_config = queries.offline_config(config, exporter, pods)
    directory = tmp_path_factory.mktemp("prometheus")
    (directory / "prometheus.yml").write_text(yaml.safe_dump(test_config, sort_keys=False))
    listen = f"127.0.0.1:{_free_port()}"
    process = subprocess.Popen(
        [binary, f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
         f"--web.listen-address={listen}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=(directory / "prometheus.log").open("w"))
    server = Server(f"http://{listen}", [s for s, _ in servers], pods, test_config)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus didn't start: {(directory / 'prometheus.log').read_text()}")
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)
        for exporter_server in server.exporters:
            exporter_server.shutdown()


def _trigger() -> queries.Trigger:
    found, _ = queries.triggers(prod_objects())
    assert len(found) == 1, found
    return found[0]


def _publish(server: Server, per_node: list[list[queries.GpuUse]]) -> None:
    for exporter, pod, uses in zip(server.exporters, server.pods, per_node, strict=True):
        exporter.text = queries.exposition(METRIC, uses, pod.node)


def _workload(trigger: queries.Trigger, utilizations: list[list[float]]) -> list[list[queries.GpuUse]]:
    """Node 0 runs workers 0..1, node 1 runs worker 2 (two GPUs each), plus GPU series the query must ignore:
    the same pod name in another namespace, the decoy pods (another job named gpt-pretrain-v2), and an idle GPU
    without a pod."""
    workers = trigger.pod_names[:3]
    uses: list[list[queries.GpuUse]] = [[], []]
    gpu = {0: 0, 1: 0}
    for index, (pod, values) in enumerate(zip(workers, utilizations, strict=True)):
        node = 0 if index < 2 else 1
        for value in values:
            uses[node].append(queries.GpuUse(gpu[node], value, trigger.namespace, pod, trigger.container))
            gpu[node] += 1
    uses[1].append(queries.GpuUse(gpu[1], 3.0, "training-dev", workers[0], trigger.container))
    assert trigger.decoy_pods
    for offset, decoy in enumerate(trigger.decoy_pods, start=1):
        uses[1].append(queries.GpuUse(gpu[1] + offset, 7.0, trigger.namespace, decoy, trigger.container))
    uses[1].append(queries.GpuUse(gpu[1] + len(trigger.decoy_pods) + 1, 0.0))
    return uses


def test_prometheus_keeps_exactly_the_targets_the_python_relabelling_predicts(prometheus: Server) -> None:
    """The plan-time relabelling (queries.relabel) agrees with Prometheus' own on every job and target."""
    objects = prod_objects()
    expected = {(job["job_name"], target["__address__"]): {k: v for k, v in target.items() if not k.startswith("__")}
                for job, _, target in queries.scraping_jobs(queries.prometheus_config(objects),
                                                            queries.dcgm_exporter(objects), prometheus.pods)}
    deadline, active = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        active = prometheus.get("/api/v1/targets", state="active")["data"]["activeTargets"]
        if active:
            break
        time.sleep(0.25)
    actual = {(t["scrapePool"], t["discoveredLabels"]["__address__"]): t["labels"] for t in active}
    assert set(expected) == {("kubernetes-service-endpoints", f"{pod.ip}:9400") for pod in prometheus.pods}
    assert actual == expected  # same targets, same labels after relabelling
    dropped = prometheus.get("/api/v1/targets", state="dropped")["data"]["droppedTargets"]
    assert dropped, "the other Kubernetes jobs (pods, services, apiservers, slow endpoints) drop dcgm-exporter"


def test_the_scaledobject_query_returns_the_workers_average_and_keda_scales_by_it(prometheus: Server) -> None:
    trigger = _trigger()
    utilization = [[100.0, 96.0], [98.0, 94.0], [92.0, 90.0]]
    _publish(prometheus, _workload(trigger, utilization))
    expected = sum(sum(v) for v in utilization) / 6
    answer = prometheus.wait_for(trigger.query, lambda a: a["data"]["result"]
                                 and float(a["data"]["result"][0]["value"][1]) == pytest.approx(expected))
    value = queries.keda_value(answer)
    assert value == pytest.approx(95.0)  # the decoys (3 %, 7 %, 0 %) would pull any wider selection down
    assert queries.is_active(value, trigger.activation_threshold)
    assert trigger.metric_type == "Value"
    ratio = value / trigger.threshold
    desired = queries.hpa_desired_replicas(metric_type=trigger.metric_type, value=value, threshold=trigger.threshold,
                                           current=3, ready=3, minimum=trigger.min_replicas,
                                           maximum=trigger.max_replicas)
    assert (ratio > 1 + queries.DEFAULT_TOLERANCE
            and desired == min(trigger.max_replicas, -(-3 * value // trigger.threshold)))
    assert desired == 4

    # Utilization falls to 40 % (a checkpoint, an input stall): the recommendation is ceil(3 × 40/threshold) = 2,
    # but the ScaledObject disables scale-down, so the running job keeps its 3 workers (no restart).
    _publish(prometheus, _workload(trigger, [[40.0, 40.0]] * 3))
    answer = prometheus.wait_for(trigger.query, lambda a: a["data"]["result"]
                                 and float(a["data"]["result"][0]["value"][1]) == pytest.approx(40.0))
    low = {"metric_type": trigger.metric_type, "value": queries.keda_value(answer), "threshold": trigger.threshold,
           "current": 3, "ready": 3, "minimum": trigger.min_replicas, "maximum": trigger.max_replicas}
    assert queries.hpa_desired_replicas(**low) == 2
    assert trigger.scale_down_disabled and queries.hpa_desired_replicas(**low, scale_down_disabled=True) == 3


def test_the_old_exported_labels_query_returns_nothing(prometheus: Server) -> None:
    """Old failure #5: with honor_labels the series carry dcgm-exporter's own namespace/pod, so the old query is
    empty; KEDA reads an empty result as 0 and the job could never scale out."""
    trigger = _trigger()
    _publish(prometheus, _workload(trigger, [[99.0, 99.0]] * 3))
    prometheus.wait_for(trigger.query, lambda a: a["data"]["result"]
                        and float(a["data"]["result"][0]["value"][1]) == pytest.approx(99.0))
    old = prometheus.query(OLD_QUERY)
    assert old["data"]["result"] == []
    stored = prometheus.query(f'count({METRIC}{{exported_namespace!=""}}) or vector(0)')
    assert float(stored["data"]["result"][0]["value"][1]) == 0  # no series has exported_* labels at all
    value = queries.keda_value(old)
    assert value == 0 and not queries.is_active(value, trigger.activation_threshold)
    assert queries.hpa_desired_replicas(metric_type=trigger.metric_type, value=value, threshold=trigger.threshold,
                                        current=3, ready=3, minimum=trigger.min_replicas,
                                        maximum=trigger.max_replicas) == trigger.min_replicas
    # ... and the plan-time check reports it.
    problem = queries._query_problem(dataclasses.replace(trigger, query=OLD_QUERY),
                                     queries.prometheus_config(prod_objects()), queries.dcgm_exporter(prod_objects()))
    assert problem is not None and "misses the GPU series" in problem[0]


def test_the_stored_series_carry_dcgm_exporters_pod_labels_and_the_targets_labels(prometheus: Server) -> None:
    trigger = _trigger()
    _publish(prometheus, _workload(trigger, [[50.0, 50.0]] * 3))
    answer = prometheus.wait_for(f'{METRIC}{{pod="{trigger.pod_names[0]}",namespace="{trigger.namespace}"}}',
                                 lambda a: len(a["data"]["result"]) == 2)
    labels = answer["data"]["result"][0]["metric"]
    assert labels["container"] == trigger.container and labels["job"] == "kubernetes-service-endpoints"
    assert labels["service"] == "dcgm-exporter" and "pod_uid" in labels and "exported_namespace" not in labels
    idle = prometheus.query(f'{METRIC}{{pod=""}}')["data"]["result"]
    assert [s["metric"]["namespace"] for s in idle] == ["nvidia-device-plugin"]  # the target's label fills the gap


def test_the_config_prometheus_loaded_keeps_the_rendered_relabel_rules_exactly(prometheus: Server) -> None:
    rendered = {job["job_name"]: job["relabel_configs"]
                for job in queries.scrape_jobs(queries.prometheus_config(prod_objects()))}
    tested = {job["job_name"]: job["relabel_configs"] for job in prometheus.config["scrape_configs"]}
    assert tested and all(tested[name] == rendered[name] for name in tested)
    assert "kubernetes-service-endpoints" in tested
    loaded = yaml.safe_load(prometheus.get("/api/v1/status/config")["data"]["yaml"])
    assert {job["job_name"] for job in loaded["scrape_configs"]} == set(tested)


def test_a_missing_binary_fails_naming_the_make_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="make prometheus-local"):
        prometheus_binary()

