"""Edge on k3s/Jetson (issue 18): sharing only as verified on Jetson, no DCGM there, and the edge stack itself."""

from __future__ import annotations

import pytest

from stack_config.derived import dcgm_exporter_enabled
from tests.conftest import plan_stack
from tests.test_config import BASE, EXISTING, parse, problems_of, with_
from verify import render as cluster


def test_time_slicing_shares_a_jetson_gpu() -> None:
    raw = with_(EXISTING, "gpu.sharing", {"mode": "time-slicing", "replicas": 4})
    config = parse(with_(raw, "workloads.train.gpuResource", "shared"))
    assert config.sharing_for("orin").mode == "time-slicing"


@pytest.mark.parametrize(("path", "where"), [
    ("gpu.sharing", "gpu.sharing.mode"),
    ("gpuNodeGroups.orin.sharing", "gpuNodeGroups.orin.sharing.mode"),
])
def test_mps_is_refused_on_jetson(path: str, where: str) -> None:
    problems = problems_of(with_(EXISTING, path, {"mode": "mps", "replicas": 4}))
    assert [p for p in problems if p.startswith(where)] == [
        f"{where}: 'mps' is not verified on Jetson (Orin, node group 'orin'); use time-slicing to share its GPU, "
        "or none (allowed: none, time-slicing)"]


def test_mps_stays_allowed_on_server_gpus() -> None:
    config = parse(with_(with_(BASE, "gpu.sharing", {"mode": "mps", "replicas": 4}), "workloads.train.gpuResource",
                         "shared"))
    assert config.sharing_for("train").mode == "mps"


def test_dcgm_is_off_by_default_on_jetson_and_on_elsewhere() -> None:
    assert dcgm_exporter_enabled(parse(EXISTING)) is False
    assert dcgm_exporter_enabled(parse(BASE)) is True
    assert dcgm_exporter_enabled(parse(with_(BASE, "gpu.metrics.dcgmExporter", False))) is False


def test_dcgm_turned_on_for_jetson_is_refused() -> None:
    problems = problems_of(with_(EXISTING, "gpu.metrics.dcgmExporter", True))
    assert "gpu.metrics.dcgmExporter: true, but DCGM does not support Jetson (Orin); set it to false (Prometheus " \
           "still scrapes the trainer's own metrics)" in problems


def test_the_edge_cluster_runs_no_dcgm_exporter_and_its_workers_take_whole_gpus() -> None:
    plan = plan_stack("edge")
    objects = cluster.render_cluster(plan)
    assert not [o for o in objects if "dcgm-exporter" in o.source]
    releases = [r.inputs["chart"] for r in plan.by_type(cluster.HELM_RELEASE)]
    assert all("dcgm" not in chart for chart in releases)
    assert plan.config.sharing_for("orin").mode == "none"
