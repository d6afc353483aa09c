"""Would it run? The rendered cluster (tools/cluster.py) simulated against the upstream behaviour of the pinned
versions, without a cluster: `simulate()` writes `build/plan/<stack>/simulation.json` and `make plan` fails on any
miss, naming the object, the rule and the fix.

Parts (each a module with `check(...) -> list[CheckResult]`):
- `pods`: every workload expanded into the Pods its controller creates (PyTorchJob, ElasticJob, ScaledJob → Job,
  Deployment, DaemonSet, StatefulSet, Job), with the controllers' injections;
- `admission`: Pod Security Standards (baseline / restricted, every control) per namespace label, ResourceQuota at
  the largest allowed scale, LimitRange defaults;
- `webhooks`: every fail-closed admission webhook: what it intercepts waits for its server, and no cluster-wide
  pod/workload webhook rests on one replica;
- `disruption`: every PriorityClass a pod names exists; no PodDisruptionBudget blocks a node drain;
- `runtime`: every pod that needs the NVIDIA container runtime (GPU pods, the device plugin, GFD, the MPS daemon)
  runs under it on the nodes it lands on (the nodes' default runtime, or its RuntimeClass's handler);
- `device_mounts`: no pod volume hides a mount the device plugin gives an MPS client (/dev/shm, the pipe directory);
- `platforms`: every image of a pod carries the architecture of the nodes it lands on (the mirror lock's record,
  the catalog's);
- `scheduling`: every pod fits a node group (labels, taints, allocatable minus kube-reserved and DaemonSets);
- `autoscaler`: scale from zero — the cluster-autoscaler's template node from the ASG tags only;
- `gangs`: `provisioned` — each gang under the atomic ProvisioningRequest check is one request of N pods that fits
  N template nodes within its group's maxSize, and the check is wired end to end; `topology` — each gang asking for a
  network domain gets one (flavor → Topology level → labelled nodes), with the level it used;
- `rendezvous`: every multi-node job's rendezvous host is reachable within its timeout at the stack's worst start
  skew, and the operator's restart accounting leaves room for one re-formed rendezvous;
- `storage`: who may write each volume against the pod's uid/gid/fsGroup;
- `queries`: the KEDA queries (verified against a real Prometheus by the test suite);
- `swarm`: a Swarm stack's planned services: placement against the labels README tells sites to set, GPUs
  reserved against `gpusPerNode`, one task per server, overlay and rendezvous wiring, restart policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conventions.images import Lock, upstream_of
from stack_config.derived import startup_bound_seconds
from stages import offline
from tools.cluster import ClusterObject, by_source
from tools.plan_record import Plan
from tools.simulate import (
    admission,
    autoscaler,
    claims,
    device_mounts,
    disruption,
    gangs,
    nodes,
    platforms,
    queries,
    queue,
    rendezvous,
    runtime,
    scheduling,
    storage,
    swarm,
    webhooks,
)
from tools.simulate.model import CheckResult, ExpandedPod, Finding
from tools.simulate.pods import expand_pods

__all__ = ["CheckResult", "ExpandedPod", "Finding", "simulate", "write"]


def simulate(plan: Plan, objects: list[ClusterObject]) -> dict[str, Any]:
    """Every check over the stack's rendered cluster; the content of simulation.json."""
    results: list[CheckResult] = []
    pods = expand_pods(objects, plan)
    results += admission.check(plan, objects, pods)
    results += disruption.check(objects, pods)
    results += webhooks.check(plan, objects, pods)
    # EKS's own add-on pods (aws-node...) are not in cluster.yaml but take room on every node. Queued jobs' pods
    # are scheduled as Kueue creates them: with their flavor's node labels and tolerations.
    expanded = [*queue.admitted_pods(objects, pods), *nodes.addon_pods(plan)]
    classes = runtime.runtime_classes(objects, nodes._mode(plan))
    groups = nodes.node_groups(plan, objects, expanded, classes)
    if groups:
        results.append(runtime.check(pods, groups, classes, nodes._lands))
        results.append(device_mounts.check(pods, groups, nodes._lands))
        results.append(platforms.check(pods, groups, nodes._lands, *_site_images(plan)))
        results.append(scheduling.check(expanded, groups))
        results.append(autoscaler.check(expanded, groups, objects))
    results += queue.check(objects, pods, groups)
    results += gangs.check(objects, pods, groups)
    results += rendezvous.check(objects, _startup_bound(plan))
    results += storage.check(plan, objects, pods)
    results += claims.check(plan, objects, pods, groups, nodes._lands, nodes._mode(plan) == "eks")
    results += queries.check(objects)
    results += swarm.check(plan)
    return {"stack": plan.stack, "objects": dict(sorted(by_source(objects).items())),
            "checks": {result.name: result.as_json() for result in results},
            "ok": all(not result.findings and result.passed == result.total for result in results)}


def _site_images(plan: Plan) -> tuple[Callable[[str], str | None], Lock | None]:
    """An offline stack's site reference → upstream image, and its mirror lock (None: online, or no lock yet)."""
    config = plan.config
    settings = getattr(getattr(config, "image", None), "offline", None)
    if settings is None:
        return (lambda image: None), None
    lock, _ = offline._read(config)
    pinned = {site: source for source, site in offline.site_images(config).refs.items()}
    return (lambda image: pinned.get(image) or upstream_of(image, settings.site_registry, settings.prefix)), lock


def _startup_bound(plan: Plan) -> int | None:
    """The stack's start-up bound (stack_config.derived.startup_bound_seconds); None without a Kubernetes config."""
    config = plan.config
    if config is None or getattr(config.cluster, "mode", "eks") == "swarm":
        return None
    return startup_bound_seconds(config)


def write(report: dict[str, Any], directory: Path) -> None:
    (directory / "simulation.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def summary(report: dict[str, Any]) -> str:
    """`objects by source; admitted N/N, scheduled N/N, ...` for the plan's progress line."""
    parts = [f"{name} {check['passed']}/{check['total']}" for name, check in report["checks"].items()]
    return ", ".join(parts) or "no checks"


def findings(report: dict[str, Any]) -> list[str]:
    return [f"{name}: {f['subject']}: {f['rule']} — fix: {f['fix']}"
            for name, check in report["checks"].items() for f in check["findings"]]
