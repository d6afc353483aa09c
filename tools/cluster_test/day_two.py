"""Day two on the real control plane and operators: what a change to a running stack really does to its jobs.

Each scenario changes the stack's training objects as a merge would and applies them again, as `pulumi up` does;
they run one after another, each on what the one before left (`Scenarios.current`):
- `new image`: a merge that ships a new trainer image. Every container image of the training objects (the jobs and
  the runtimes their pods are built from, as `workload_kinds` finds their pod templates) is replaced by another
  digest.
- `pod count`: a merge that changes a job's size. Each job whose kind names its pod counts (`pod_counts`) runs one
  pod fewer in its largest role (never below one).
Then, for each standing job Kueue had admitted, the run watches for WATCH_SECONDS whether Kueue stopped and requeued
it (its Workload replaced or evicted) or it kept running, and how long until it was admitted again.

The answer is held to what the job's kind declares (`workload_kinds` `template_update`, which `make plan-diff`
prints beside the change): one declaration, one real answer (`compare.day_two_disagreements`).
"""

from __future__ import annotations

import copy
import json
import time
import urllib.error
from typing import Any

from components.kueue import QUEUE_LABEL
from tools.cluster_test.objects import OPERATOR_KINDS, identity
from workload_kinds import kind_of_resource

Run = Any
"""tools/cluster_test/run.py's `Run` (not imported: run.py calls this module)."""

NEW_IMAGE = "registry.invalid/gtp/trainer@sha256:" + "1" * 64
"""Another digest of the trainer image: kwok starts no container, so no registry needs to hold it."""
WATCH_SECONDS = 60.0
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


def with_one_pod_fewer(body: dict[str, Any]) -> dict[str, Any] | None:
    """`body` with one pod fewer in its largest role (its kind's `pod_counts`, set where the kind reads them: a
    PyTorchJob's `pytorchReplicaSpecs.<role>.replicas`); None when no role has more than one."""
    kind = kind_of_resource(body)
    if kind is None:
        return None
    roles = [(count, role) for role, count in kind.pod_counts(body).items() if isinstance(count, int) and count > 1]
    if not roles:
        return None
    count, role = max(roles)
    return kind.with_pod_count(body, role, count - 1)


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


class Scenarios:
    """The day-two scenarios of one run, each applied to what the one before left."""

    def __init__(self, run: Run):
        self.run = run
        self.current = {identity(item): item.obj for item in run.objects if kind_of_resource(item.obj) is not None}
        """Each training object as the cluster has it now (what the last scenario applied)."""

    def new_image(self) -> dict[str, dict[str, Any]]:
        images = {container["image"] for body in self.current.values() if (kind := kind_of_resource(body)) is not None
                  for container in kind.containers(body) if container.get("image")}
        return self.scenario(lambda body: with_new_image(body, images))

    def pod_count(self) -> dict[str, dict[str, Any]]:
        return self.scenario(with_one_pod_fewer)

    def scenario(self, change: Any) -> dict[str, dict[str, Any]]:
        """Job (`Kind namespace/name`) → what it declared, what really happened, and when."""
        run = self.run
        changes = [(who, changed) for who, body in self.current.items() if (changed := change(body)) is not None]
        changed_ids = {who for who, _ in changes}
        jobs = {}
        for who, body in self.current.items():
            kind = kind_of_resource(body)
            if kind is None or body.get("kind") != kind.resource_kind:
                continue
            if QUEUE_LABEL not in ((body.get("metadata") or {}).get("labels") or {}):
                continue
            if OPERATOR_KINDS.get(body["kind"]) not in run.operators and body["kind"] in OPERATOR_KINDS:
                continue  # its controller is not run here
            # A job whose own object or an object its pods are built from (a TrainJob's runtime) changed.
            if who in changed_ids or any(self.current[c].get("kind") in kind.template_kinds for c in changed_ids):
                jobs[who] = kind

        def workloads() -> dict[str, list[dict[str, Any]]]:
            owners = run.owners()
            mine: dict[str, list[dict[str, Any]]] = {who: [] for who in jobs}
            for workload in run.api.items(WORKLOAD_API, "Workload"):
                who = run.top_owner(workload, owners)
                if who in mine:
                    mine[who].append(workload)
            return mine

        before = {who: {w["metadata"]["uid"] for w in found if _admitted(w)} for who, found in workloads().items()}
        refused: dict[str, str] = {}
        deleted: dict[str, float] = {}
        changed_at: dict[str, float] = {}
        """When each object's change began: a job's requeue is timed from its own change."""
        # What `pulumi up` does with a kind's replace_on_changes and delete-before-replace: the old job goes first
        # (the API server refuses the update itself). Done before the in-place changes, so each of those is timed
        # alone.
        for who, changed in changes:
            kind = kind_of_resource(changed)
            if kind is not None and changed["kind"] == kind.resource_kind and kind.immutable_paths:
                changed_at[who] = time.monotonic()
                deleted[who] = round(replace(run, changed), 1)
        for who, changed in changes:
            changed_at.setdefault(who, time.monotonic())
            message = run.api.apply(changed)
            if message is not None:
                refused[who] = message
            else:
                self.current[who] = changed
        applied = sorted(changed_ids)
        started = time.monotonic()
        requeued: dict[str, float] = {}
        readmitted: dict[str, float] = {}
        while time.monotonic() - started < WATCH_SECONDS:
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
            entry: dict[str, Any] = {"declared": declared(kind), "changed objects": applied}
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
                entry["watched_s"] = WATCH_SECONDS
            result[who] = entry
        return result


UNSIGNED_IMAGE = "registry.invalid/gtp/unsigned@sha256:" + "2" * 64
"""An image no production stack lists: its pod must be refused by the stack's image policy."""


def image_policy(run: Run) -> dict[str, str]:
    """Each production image policy (a ValidatingAdmissionPolicy of the stack) → what the real API server answers a
    training pod that runs an unlisted image: one of the stack's own pod templates (so Pod Security, the LimitRange
    and the quota have nothing to object to) with its images swapped, created as a dry run (admission runs in full,
    nothing is stored: the policy is enforced where the cluster enforces it, not only by `tools.submit`)."""
    policies = [item for item in run.objects if item.kind == "ValidatingAdmissionPolicy"]
    if not policies:
        return {}
    template = next((t for item in run.objects if (kind := kind_of_resource(item.obj)) is not None
                     and item.kind == kind.resource_kind for t in kind.pod_templates(item.obj).values() if t), None)
    namespace = next((item.namespace for item in run.objects if kind_of_resource(item.obj) is not None
                      and item.namespace), None)
    if template is None or namespace is None:
        return {identity(item): "no training pod template to probe with" for item in policies}
    spec = copy.deepcopy(template.get("spec") or {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        container["image"] = UNSIGNED_IMAGE
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gtp-unsigned-probe", "namespace": namespace,
           "labels": dict((template.get("metadata") or {}).get("labels") or {})}, "spec": spec}
    try:
        run.api.request("POST", run.api.path("v1", "Pod", namespace) + "?dryRun=All", pod)
        answer = "accepted"
    except urllib.error.HTTPError as error:
        try:
            answer = "refused: " + str(json.loads(error.read()).get("message"))
        except ValueError:
            answer = f"refused: HTTP {error.code}"
    return {identity(item): answer for item in policies}


def run_all(run: Run) -> dict[str, dict[str, dict[str, Any]]]:
    """Every day-two scenario, in order: event → job → what it declared and what really happened."""
    scenarios = Scenarios(run)
    return {"new image": scenarios.new_image(), "pod count": scenarios.pod_count()}
