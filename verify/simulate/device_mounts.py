"""`device mounts`: does a pod's own volume hide a mount its device plugin gives the container?

The NVIDIA device plugin v0.20.0 answers an MPS allocation with two mounts and an env variable
(internal/plugin/mps.go:74-91 `updateReponse`): the daemon's pipe directory at `/mps/<resource>/pipe`
(cmd/mps-control-daemon/mps/root.go:26 `ContainerRoot = /mps`, :40-42 `PipeDir`) with `CUDA_MPS_PIPE_DIRECTORY`
pointing there, and the daemon's shared memory at `/dev/shm` (cmd/mps-control-daemon/mps/daemon.go:195-197
`ShmDir`). The kubelet appends the pod's own volume mounts after the device plugin's (kubernetes
pkg/kubelet/kubelet_pods.go `GenerateRunContainerOptions`: `containerManager.GetResources` first, then `opts.Mounts =
append(opts.Mounts, mounts...)`), so a pod volume mounted at one of those paths, or at a directory above one, hides
it: the CUDA client then can't reach the MPS server and fails to create a context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verify.simulate.model import CheckResult, ExpandedPod, Finding, Modeled

MODELS = (Modeled("NVIDIA_DEVICE_PLUGIN.version", "0.20.0"),)
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

NAME = "device mounts"
MPS_ROOT = "/mps"
SHM_DIR = "/dev/shm"


def mps_mounts(resource: str) -> list[str]:
    """Container paths the plugin mounts for an MPS slice of `resource` (as advertised, e.g. nvidia.com/gpu.shared)."""
    return [f"{MPS_ROOT}/{resource}/pipe", SHM_DIR]


def shadowing(container: Mapping[str, Any], device_paths: list[str]) -> list[str]:
    """`volume → device path` for each of the container's mounts at, or above, a device path."""
    hits = []
    for mount in container.get("volumeMounts") or []:
        path = str(mount.get("mountPath") or "").rstrip("/") or "/"
        for device in device_paths:
            if device == path or device.startswith(path.rstrip("/") + "/"):
                hits.append(f"volume '{mount.get('name')}' at {mount.get('mountPath')} hides {device}")
    return hits


def _requests(container: Mapping[str, Any], resource: str) -> bool:
    resources = container.get("resources") or {}
    return any(resource in (resources.get(key) or {}) for key in ("requests", "limits"))


def check(pods: list[ExpandedPod], groups: list[Any], lands: Callable[[ExpandedPod, Any], bool]) -> CheckResult:
    """Every container that gets an MPS slice on a node group it may land on."""
    result = CheckResult(NAME)
    for group in groups:
        sharing = getattr(group, "sharing", None)
        if sharing is None or sharing.strategy != "mps":
            continue
        result.details.append(f"node group {group.name}: MPS slices of {sharing.resource} come with "
                              f"{', '.join(mps_mounts(sharing.resource))}")
        for pod in pods:
            if not lands(pod, group):
                continue
            spec = pod.pod.get("spec") or {}
            for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                if not _requests(container, sharing.resource):
                    continue
                hits = shadowing(container, mps_mounts(sharing.resource))
                result.record(not hits, Finding(
                    f"{pod.owner} container {container.get('name')} on node group {group.name}",
                    f"{'; '.join(hits)}: the device plugin mounts the MPS daemon's pipe directory and /dev/shm "
                    "there and the pod's volume is mounted over it, so the CUDA client can't reach the MPS server",
                    "don't mount a volume at /dev/shm (or above /mps) in a pod that requests an MPS slice "
                    "(components/training_pod.py PodShape.device_shm)") if hits else None)
    return result
