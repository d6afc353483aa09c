"""MPS shared memory (issue 26 finding 4): the device plugin mounts the MPS daemon's /dev/shm into a shared-GPU
container; the pod's own /dev/shm emptyDir must not be mounted over it (verify/simulate/device_mounts.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.nvidia_device_plugin import DEVICE_PLUGIN_RESOURCES, device_plugin_values, mps_daemon_resources
from tests.conftest import plan_modified, plan_stack
from verify import render as gtp_cluster
from verify.simulate import device_mounts, simulate
from verify.simulate.model import ExpandedPod
from verify.simulate.nodes import NodeGroup, Sharing

MPS = Sharing("mps", 4, True, "nvidia.com/gpu.shared")


def _pod(mounts: list[dict[str, str]], resource: str = "nvidia.com/gpu.shared") -> ExpandedPod:
    container: dict[str, Any] = {"name": "pytorch", "resources": {"limits": {resource: "1"}}, "volumeMounts": mounts}
    return ExpandedPod(owner="Job training/mnist", source="stack", namespace="training",
                       pod={"spec": {"containers": [container]}})


def _check(pod: ExpandedPod, sharing: Sharing | None = MPS) -> device_mounts.CheckResult:
    group = NodeGroup(name="g6", role="gpu", labels={}, taints=[], allocatable={}, sharing=sharing)
    return device_mounts.check([pod], [group], lambda p, g: True)


def test_a_dev_shm_volume_in_an_mps_client_is_a_finding() -> None:
    result = _check(_pod([{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "tmp", "mountPath": "/tmp"}]))
    assert (result.passed, result.total) == (0, 1)
    assert "volume 'dshm' at /dev/shm hides /dev/shm" in result.findings[0].rule
    assert "can't reach the MPS server" in result.findings[0].rule


def test_a_volume_above_the_pipe_directory_is_a_finding() -> None:
    result = _check(_pod([{"name": "data", "mountPath": "/mps"}]))
    assert "hides /mps/nvidia.com/gpu.shared/pipe" in result.findings[0].rule


def test_an_mps_client_without_such_volumes_passes_and_other_pods_are_not_checked() -> None:
    assert _check(_pod([{"name": "tmp", "mountPath": "/tmp"}])).findings == []
    assert _check(_pod([{"name": "dshm", "mountPath": "/dev/shm"}], resource="nvidia.com/gpu")).total == 0
    whole = Sharing("time-slicing", 2, True, "nvidia.com/gpu.shared")
    assert _check(_pod([{"name": "dshm", "mountPath": "/dev/shm"}]), whole).total == 0


def test_dev_mps_pods_get_the_daemons_shm_and_simulate_clean() -> None:
    plan = plan_stack("dev")
    objects = gtp_cluster.render_cluster(plan)
    report = simulate(plan, objects)
    check = report["checks"]["device mounts"]
    assert check["total"] >= 2 and check["passed"] == check["total"] and report["ok"]
    job = next(o.obj for o in objects if o.kind == "ScaledJob")
    pod = job["spec"]["jobTargetRef"]["template"]["spec"]
    assert "dshm" not in {v["name"] for v in pod["volumes"]}
    assert all("/dev/shm" not in {m["mountPath"] for m in c["volumeMounts"]}
               for c in [*pod["containers"], *pod["initContainers"]])


def test_time_sliced_shared_pods_keep_their_dshm(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "dev", lambda c: c["gtp:gpu"]["sharing"].update(mode="time-slicing"))
    job = next(o.obj for o in gtp_cluster.render_cluster(plan) if o.kind == "ScaledJob")
    assert "dshm" in {v["name"] for v in job["spec"]["jobTargetRef"]["template"]["spec"]["volumes"]}


def test_the_mps_daemon_is_sized_from_the_nodes_gpus_and_clients() -> None:
    assert mps_daemon_resources(1, 4) == {"requests": {"cpu": "50m", "memory": "64Mi"},
                                          "limits": {"cpu": "1000m", "memory": "896Mi"}}
    assert mps_daemon_resources(8, 32)["limits"] == {"cpu": "4500m", "memory": "5376Mi"}
    values = device_plugin_values({}, "mps-4", {}, [], True, mps_node=(1, 4))
    assert values["resources"]["limits"]["memory"] == "896Mi"
    assert device_plugin_values({}, "none", {}, [], True)["resources"] == DEVICE_PLUGIN_RESOURCES
    plan = plan_stack("dev")
    daemon = next(o.obj for o in gtp_cluster.render_cluster(plan)
                  if o.kind == "DaemonSet" and o.name.endswith("mps-control-daemon"))
    ctr = next(c for c in daemon["spec"]["template"]["spec"]["containers"] if c["name"] == "mps-control-daemon-ctr")
    assert ctr["resources"]["limits"] == {"cpu": "1000m", "memory": "896Mi"}
