"""Day two on the real control plane and operators: what a change to a running stack really does to its jobs.

`new_image`: a merge that ships a new trainer image. Every container image of the stack's training objects (the jobs
and the runtimes their pods are built from, as `workload_kinds` finds their pod templates) is replaced by another
digest and the changed objects are applied again, as `pulumi up` does. Then, for each standing job Kueue had
admitted, the run watches for NEW_IMAGE_SECONDS whether Kueue stopped and requeued it (its Workload replaced or
evicted) or it kept running, and how long until it was admitted again.

The answer is held to what the job's kind declares (`workload_kinds` `template_update`, which `make plan-diff`
prints beside the change): one declaration, one real answer (`compare.day_two_disagreements`).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from components.kueue import QUEUE_LABEL
from tools.cluster_test.objects import OPERATOR_KINDS, identity
from workload_kinds import kind_of_resource

Run = Any
"""tools/cluster_test/run.py's `Run` (not imported: run.py calls this module)."""

NEW_IMAGE = "registry.invalid/gtp/trainer@sha256:" + "1" * 64
"""Another digest of the trainer image: kwok starts no container, so no registry needs to hold it."""
NEW_IMAGE_SECONDS = 60.0
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
REQUEUED = "requeued"
KEPT = "kept running"


def declared(kind: Any) -> str:
    """What the kind says a changed pod template does to a running job: `restart`, `keeps running` or `unknown`."""
    update = getattr(kind, "template_update", None)
    if update is None:
        return "unknown"
    return "restart" if update.restarts else "keeps running"


def with_new_image(body: dict[str, Any], images: set[str]) -> dict[str, Any] | None:
    """`body` with each of `images` in its pod templates replaced by NEW_IMAGE; None when it has none of them."""
    kind = kind_of_resource(body)
    if kind is None:
        return None
    changed = copy.deepcopy(body)
    found = False
    for container in kind.containers(changed):
        if container.get("image") in images:
            container["image"] = NEW_IMAGE  # type: ignore[index]  # the deep copy's own mappings
            found = True
    return changed if found else None


DELETE_SECONDS = 300.0
"""How long the harness waits for a replaced job to be gone. Pulumi waits for the deletion too, up to its own
timeout (10 minutes); a foreground deletion waits for the job's pods and Workload."""


def replace(run: Run, obj: dict[str, Any], seconds: float = DELETE_SECONDS) -> float:
    """Delete `obj` as pulumi-kubernetes does (foreground: its children first; v4.25.0
    provider/pkg/metadata/overrides.go:76) and wait until it is gone; the seconds it took."""
    metadata = obj["metadata"]
    path = run.api.path(obj["apiVersion"], obj["kind"], metadata.get("namespace"), metadata["name"])
    run.api.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                     "propagationPolicy": "Foreground"})
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        if not any(o["metadata"]["name"] == metadata["name"]
                   and o["metadata"].get("namespace") == metadata.get("namespace")
                   for o in run.api.items(obj["apiVersion"], obj["kind"])):
            return time.monotonic() - began
        time.sleep(0.5)
    raise RuntimeError(f"{obj['kind']} {metadata['name']} was not deleted within {seconds:.0f} s")


def _admitted(workload: dict[str, Any]) -> bool:
    return bool((workload.get("status") or {}).get("admission"))


def _evicted(workload: dict[str, Any]) -> bool:
    return any(c.get("type") == "Evicted" and c.get("status") == "True"
               for c in (workload.get("status") or {}).get("conditions") or [])


def new_image(run: Run) -> dict[str, dict[str, Any]]:
    """Job (`Kind namespace/name`) → what it declared, what really happened, and when."""
    jobs = {}
    for item in run.objects:
        kind = kind_of_resource(item.obj)
        if kind is None or item.kind != kind.resource_kind:
            continue
        if QUEUE_LABEL not in ((item.obj.get("metadata") or {}).get("labels") or {}):
            continue
        if OPERATOR_KINDS.get(item.kind) not in run.operators and item.kind in OPERATOR_KINDS:
            continue  # its controller is not run here
        jobs[identity(item)] = kind

    def workloads() -> dict[str, list[dict[str, Any]]]:
        owners = run.owners()
        mine: dict[str, list[dict[str, Any]]] = {who: [] for who in jobs}
        for workload in run.api.items(WORKLOAD_API, "Workload"):
            who = run.top_owner(workload, owners)
            if who in mine:
                mine[who].append(workload)
        return mine

    before = {who: {w["metadata"]["uid"] for w in found if _admitted(w)} for who, found in workloads().items()}
    images = {container["image"] for item in run.objects if (kind := kind_of_resource(item.obj)) is not None
              for container in kind.containers(item.obj) if container.get("image")}
    refused: dict[str, str] = {}
    deleted: dict[str, float] = {}
    changed_at: dict[str, float] = {}
    """When each object's change began: a job's requeue is timed from its own change."""
    changes = [(item, changed) for item in run.objects if (changed := with_new_image(item.obj, images)) is not None]
    # What `pulumi up` does with a kind's replace_on_changes and delete-before-replace: the old job goes first (the
    # API server refuses the update itself). Done before the in-place changes, so each of those is timed alone.
    for item, changed in changes:
        kind = kind_of_resource(item.obj)
        if kind is not None and item.kind == kind.resource_kind and kind.immutable_paths:
            changed_at[identity(item)] = time.monotonic()
            deleted[identity(item)] = round(replace(run, changed), 1)
    for item, changed in changes:
        changed_at.setdefault(identity(item), time.monotonic())
        message = run.api.apply(changed)
        if message is not None:
            refused[identity(item)] = message
    applied = [identity(item) for item, _ in changes]
    started = time.monotonic()
    requeued: dict[str, float] = {}
    readmitted: dict[str, float] = {}
    while time.monotonic() - started < NEW_IMAGE_SECONDS:
        for who, found in workloads().items():
            old = before[who]
            now = time.monotonic() - changed_at.get(who, started)
            gone = old and not any(w["metadata"]["uid"] in old and not _evicted(w) for w in found)
            if gone and who not in requeued:
                requeued[who] = now
            if who in requeued and who not in readmitted and any(
                    _admitted(w) and w["metadata"]["uid"] not in old for w in found):
                readmitted[who] = now
        if all(who in readmitted for who in jobs if before[who]):
            break
        time.sleep(1)
    result: dict[str, dict[str, Any]] = {}
    for who, kind in sorted(jobs.items()):
        entry: dict[str, Any] = {"declared": declared(kind), "changed objects": sorted(applied)}
        if who in deleted:
            entry["deleted_after_s"] = deleted[who]
        if refused:
            entry["observed"] = "refused: " + "; ".join(f"{k}: {v}" for k, v in sorted(refused.items()))
        elif not before[who]:
            entry["observed"] = "not admitted before the change"
        elif who in requeued:
            entry["observed"] = REQUEUED
            entry["requeued_after_s"] = round(requeued[who], 1)
            entry["admitted_again_after_s"] = round(readmitted[who], 1) if who in readmitted else None
        else:
            entry["observed"] = KEPT
            entry["watched_s"] = NEW_IMAGE_SECONDS
        result[who] = entry
    return result
