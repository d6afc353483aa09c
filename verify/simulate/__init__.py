"""Would it run? The rendered cluster (verify/render.py) simulated against the upstream behaviour of the pinned
versions, without a cluster: `simulate()` writes `build/plan/<stack>/simulation.json` and `make plan` fails on any
miss, naming the object, the rule and the fix.

`World` is what the checks read, built once per plan; `CHECKS` is the registry: one `SimulationCheck` per part, each
run as `check(world) -> list[CheckResult]`, in this order. A new check is a module and one line there. The parts:
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
  network domain gets one (flavor → Topology level → labelled nodes), with the level it used; a `required` domain
  is an assumption (below);
- `rendezvous`: every multi-node job's rendezvous host is reachable within its timeout at the stack's worst start
  skew, and the operator's restart accounting leaves room for one re-formed rendezvous;
- `storage`: who may write each volume against the pod's uid/gid/fsGroup;
- `queries`: the KEDA queries (verified against a real Prometheus by the test suite);
- `swarm`: a Swarm stack's planned services: placement against the labels docs/swarm.md tells sites to set, GPUs
  reserved against `gpusPerNode`, one task per server, overlay and rendezvous wiring, restart policy.

A fact only the running cluster knows is never a pass: a check states it as an `Assumption` (`CheckResult.assume`),
listed under the check's `assumptions` in simulation.json and on the plan's `assumed:` lines; it is neither counted
in `total` nor a finding, so it does not fail the plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conventions.images import Lock, upstream_of
from stack_config.derived import startup_bound_seconds
from stack_config.targets import IN_AWS, ON_SWARM
from stages import air_gap
from verify.plan_record import Plan
from verify.render import ClusterObject, by_source
from verify.simulate import (
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
from verify.simulate.model import Assumption, CheckResult, ExpandedPod, Finding
from verify.simulate.pods import expand_pods

__all__ = ["CHECKS", "Assumption", "CheckResult", "ExpandedPod", "Finding", "SimulationCheck", "World", "simulate",
           "write"]


@dataclass(frozen=True)
class World:
    """What the checks read: the plan, its rendered cluster, the pods its controllers make and the nodes they land on,
    built once per plan (`build_world`)."""

    plan: Plan
    objects: list[ClusterObject]
    pods: list[ExpandedPod]
    """Every pod the rendered cluster's controllers create (verify/simulate/pods.py)."""
    expanded: list[ExpandedPod]
    """The pods as the scheduler sees them: queued jobs' pods with their Kueue flavor's labels and tolerations, plus
    EKS's own add-on pods (aws-node...), which are not in cluster.yaml but take room on every node."""
    classes: Any
    """The cluster's RuntimeClasses (verify/simulate/runtime.py `runtime_classes`)."""
    groups: list[nodes.NodeGroup]
    """The node groups pods can land on; empty when the plan has none (a Swarm, or nothing to place)."""

    @property
    def eks(self) -> bool:
        return nodes._mode(self.plan) in IN_AWS


def build_world(plan: Plan, objects: list[ClusterObject]) -> World:
    pods = expand_pods(objects, plan)
    expanded = [*queue.admitted_pods(objects, pods), *nodes.addon_pods(plan)]
    classes = runtime.runtime_classes(objects, nodes._mode(plan))
    return World(plan, objects, pods, expanded, classes, nodes.node_groups(plan, objects, expanded, classes))


@dataclass(frozen=True)
class SimulationCheck:
    """One part of the simulation: `run(world)` gives its results (none when it has nothing to look at)."""

    module: str
    run: Callable[[World], list[CheckResult]]


def _on_nodes(check: Callable[[World], CheckResult]) -> Callable[[World], list[CheckResult]]:
    """A check of where pods land: it has results only where there are node groups."""
    return lambda world: [check(world)] if world.groups else []


CHECKS: tuple[SimulationCheck, ...] = (
    SimulationCheck("admission", lambda w: admission.check(w.plan, w.objects, w.pods)),
    SimulationCheck("disruption", lambda w: disruption.check(w.objects, w.pods)),
    SimulationCheck("webhooks", lambda w: webhooks.check(w.plan, w.objects, w.pods)),
    SimulationCheck("runtime", _on_nodes(lambda w: runtime.check(w.pods, w.groups, w.classes, nodes._lands))),
    SimulationCheck("device_mounts", _on_nodes(lambda w: device_mounts.check(w.pods, w.groups, nodes._lands))),
    SimulationCheck("platforms", _on_nodes(
        lambda w: platforms.check(w.pods, w.groups, nodes._lands, *_site_images(w.plan)))),
    SimulationCheck("scheduling", _on_nodes(lambda w: scheduling.check(w.expanded, w.groups))),
    SimulationCheck("autoscaler", _on_nodes(lambda w: autoscaler.check(w.expanded, w.groups, w.objects))),
    SimulationCheck("queue", lambda w: queue.check(w.objects, w.pods, w.groups)),
    SimulationCheck("gangs", lambda w: gangs.check(w.objects, w.pods, w.groups)),
    SimulationCheck("rendezvous", lambda w: rendezvous.check(w.objects, _startup_bound(w.plan))),
    SimulationCheck("storage", lambda w: storage.check(w.plan, w.objects, w.pods)),
    SimulationCheck("claims", lambda w: claims.check(w.plan, w.objects, w.pods, w.groups, nodes._lands, w.eks)),
    SimulationCheck("queries", lambda w: queries.check(w.objects)),
    SimulationCheck("swarm", lambda w: swarm.check(w.plan)),
)


def simulate(plan: Plan, objects: list[ClusterObject]) -> dict[str, Any]:
    """Every check over the stack's rendered cluster; the content of simulation.json."""
    world = build_world(plan, objects)
    results = [result for check in CHECKS for result in check.run(world)]
    return {"stack": plan.stack, "objects": dict(sorted(by_source(objects).items())),
            "checks": {result.name: result.as_json() for result in results},
            "ok": all(not result.findings and result.passed == result.total for result in results)}


def _site_images(plan: Plan) -> tuple[Callable[[str], str | None], Lock | None]:
    """An air-gapped stack's site reference → upstream image, and its mirror lock (None: online, or no lock yet)."""
    config = plan.config
    settings = getattr(getattr(config, "image", None), "air_gap", None)
    if settings is None:
        return (lambda image: None), None
    lock, _ = air_gap._read(config)
    pinned = {site: source for source, site in air_gap.site_images(config).refs.items()}
    return (lambda image: pinned.get(image) or upstream_of(image, settings.site_registry, settings.prefix)), lock


def _startup_bound(plan: Plan) -> int | None:
    """The stack's start-up bound (stack_config.derived.startup_bound_seconds); None without a Kubernetes config."""
    config = plan.config
    if config is None or getattr(config.cluster, "mode", "eks") in ON_SWARM:
        return None
    return startup_bound_seconds(config)


def write(report: dict[str, Any], directory: Path) -> None:
    (directory / "simulation.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def summary(report: dict[str, Any]) -> str:
    """`admitted N/N, scheduled N/N, topology N/N (+K assumed), ...` for the plan's progress line."""
    parts = [f"{name} {check['passed']}/{check['total']}"
             + (f" (+{len(check['assumptions'])} assumed)" if check.get("assumptions") else "")
             for name, check in report["checks"].items()]
    return ", ".join(parts) or "no checks"


def assumptions(report: dict[str, Any]) -> list[str]:
    """One line per assumption (`Assumption.line`), prefixed with its check: what the plan could not check."""
    return [f"{name}: {Assumption(**entry).line()}"
            for name, check in report["checks"].items() for entry in check.get("assumptions") or []]


def findings(report: dict[str, Any]) -> list[str]:
    return [f"{name}: {f['subject']}: {f['rule']} — fix: {f['fix']}"
            for name, check in report["checks"].items() for f in check["findings"]]
