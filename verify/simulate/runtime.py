"""`runtime handlers`: does every pod that needs the NVIDIA container runtime get it on the nodes it lands on?

A pod runs under the handler of its RuntimeClass (`spec.runtimeClassName` → the RuntimeClass's `handler`), else
under containerd's default runtime of the node. The NVIDIA runtime is what injects the driver libraries and
devices: without it the device plugin finds no NVML (or Tegra) library and registers nothing, GFD labels nothing,
the MPS daemon can't start, and a training pod sees no GPU.

The nodes' side (`NodeGroup.default_runtime`, `NodeGroup.runtime_handlers`):
- EKS GPU node groups: the NVIDIA AMIs make `nvidia` containerd's default (awslabs/amazon-eks-ami nodeadm
  internal/containerd, `TestApplyInstanceTypeMixins`: an NVIDIA instance type gets `default_runtime_name =
  'nvidia'`);
- an adopted cluster's GPU nodes: `cluster.nodeDefaultRuntime` (default `runc`: k3s keeps runc as the default and
  adds the NVIDIA runtime it detects as an extra handler `nvidia`, k3s-io/k3s@080ec81
  pkg/agent/containerd/runtimes.go `findNvidiaContainerRuntimes`, k3s-io/k3s#8700).
The RuntimeClasses that exist: those in cluster.yaml, plus on an adopted cluster the `nvidia` one k3s ships
(k3s-io/k3s manifests/runtimes.yaml: `nvidia` → handler `nvidia`), the site precondition of docs/edge.md, "Edge
on k3s / Jetson". A pod naming a RuntimeClass that doesn't exist is refused at admission (the RuntimeClass
admission plugin).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from conventions.names import NVIDIA_RUNTIME_HANDLER
from stack_config.targets import traits_for
from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding

NAME = "runtime handlers"
NVIDIA_DAEMON_COMMANDS = ("nvidia-device-plugin", "gpu-feature-discovery", "mps-control-daemon")
"""The device-plugin chart's GPU agents (chart 0.20.0 templates/daemonset-*.yml `command`); NFD's worker reads
only PCI/sysfs and needs no NVIDIA runtime."""


def site_runtime_classes(mode: str) -> dict[str, str]:
    """What the cluster has before the stack adds any (`TargetTraits.site_runtime_classes`: an adopted k3s site's
    `nvidia`, k3s-io/k3s manifests/runtimes.yaml), the same fact the config rule on gpu.runtimeClassName reads."""
    return dict(traits_for(mode).site_runtime_classes)


def runtime_classes(objects: Iterable[ClusterObject], mode: str) -> dict[str, str]:
    """RuntimeClass name → handler: the site's (adopted clusters) overlaid by the stack's own objects."""
    classes = site_runtime_classes(mode)
    for item in objects:
        if item.kind == "RuntimeClass":
            classes[item.name] = str(item.obj.get("handler") or "")
    return classes


def _commands(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [str((c.get("command") or [""])[0]) for c in spec.get("containers") or []]


def needs_nvidia(pod: Mapping[str, Any]) -> str | None:
    """Why this pod needs the NVIDIA runtime (None: it doesn't)."""
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for key in ("requests", "limits"):
            for name in (container.get("resources") or {}).get(key) or {}:
                if str(name).startswith("nvidia.com/gpu"):
                    return f"requests {name}"
    for command in _commands(pod):
        if command in NVIDIA_DAEMON_COMMANDS:
            return f"runs {command}"
    return None


def handler(pod: Mapping[str, Any], default_runtime: str, classes: Mapping[str, str]) -> tuple[str | None, str]:
    """(the handler the pod runs under on a node with `default_runtime`, how it was chosen); handler None when its
    RuntimeClass doesn't exist (the pod is refused)."""
    name = (pod.get("spec") or {}).get("runtimeClassName")
    if not name:
        return default_runtime, f"no runtimeClassName: the node's default runtime '{default_runtime}'"
    if name not in classes:
        return None, f"RuntimeClass '{name}' does not exist"
    return classes[name], f"RuntimeClass '{name}' → handler '{classes[name]}'"


def runs_nvidia(pod: Mapping[str, Any], group: Any, classes: Mapping[str, str]) -> bool:
    used, _ = handler(pod, group.default_runtime, classes)
    return used == NVIDIA_RUNTIME_HANDLER and used in group.runtime_handlers


def check(pods: list[ExpandedPod], groups: list[Any], classes: Mapping[str, str],
          lands: Any) -> CheckResult:
    """Every pod that needs the NVIDIA runtime, on every GPU node group it may land on (`lands(pod, group)`)."""
    result = CheckResult(NAME)
    for group in groups:
        if group.role != "gpu":
            continue
        result.details.append(f"node group {group.name}: default runtime '{group.default_runtime}', handlers "
                              f"{sorted(group.runtime_handlers)}")
    for pod in pods:
        why = needs_nvidia(pod.pod)
        if why is None:
            continue
        for group in groups:
            if group.role != "gpu" or not lands(pod, group):
                continue
            used, how = handler(pod.pod, group.default_runtime, classes)
            ok = used == NVIDIA_RUNTIME_HANDLER and used in group.runtime_handlers
            result.record(ok, None if ok else Finding(
                f"{pod.owner} on node group {group.name}",
                f"it {why} but runs without the NVIDIA runtime ({how}; the nodes' handlers "
                f"{sorted(group.runtime_handlers)}): no driver libraries, so no GPU is advertised or visible",
                f"set gpu.runtimeClassName to a RuntimeClass with handler '{NVIDIA_RUNTIME_HANDLER}' (k3s ships "
                f"'nvidia'; gpu.createRuntimeClass creates it elsewhere), or make the NVIDIA runtime the nodes' "
                f"default (cluster.nodeDefaultRuntime: nvidia)"))
    return result
