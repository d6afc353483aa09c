"""What a change does to a stack's desired state: the offline plan at a git ref vs the working tree.

``python -m tools.plan_diff --stack dev --base origin/main`` (what ``make plan-diff`` runs) plans the stack
twice — from a temporary `git worktree` of BASE, with BASE's own code, and from the working tree — and prints, in
this order (`SECTIONS`):

1. **destructive changes**: every delete and replacement (marked *delete before replace* where the resource's
   ``deleteBeforeReplace`` option or its provider says so: `deletes_first`), with what runs on it now (a node
   group: the workloads the base plan's scheduling simulation places there) and whether it holds data (volumes,
   file systems, buckets, KMS keys, ECR repositories) or is ``protect``-ed / ``retainOnDelete``;
2. **resources**: added (``+``, with their key inputs), removed (``-``), renamed (``=>``: same inputs under a new
   name or parent), changed in place (``~``) and replaced (``+-``, naming the property that forces it, from
   ``verify.replacements``), with the changed fields as dotted paths (``old -> new``; multi-line YAML/JSON values as
   line diffs; list items that have a ``name`` — containers, env, volumes, ports — matched by name, not index).
   Fields a resource's ``ignoreChanges`` covers are left out, as Pulumi leaves them out, and so are ``dependsOn``
   changes (they order operations; they change nothing);
3. **cluster**: `build/plan/<stack>/cluster.yaml` (every object after `pulumi up`, charts rendered) per Helm
   release, operator manifest and the stack's own objects: objects added and removed, container images, RBAC
   rules, securityContext / host namespaces and Pod Security labels, and a count of the rest;
4. **outputs**, **versions** (providers' SDK pins, Helm charts, EKS add-ons, vendored manifests) and the head
   plan's **policy violations**.

Both plans go through the plan cache (verify/plan_cache.py): BASE is planned once per git tree and tool set and
then read back (a PR's base, diffed for every push and stack), and the working tree's plan is restored when its
inputs are unchanged since `make plan`. `GTP_PLAN_CACHE=off` plans both from scratch.

``--format plain`` (the default, for a terminal), ``--format markdown``, or ``--format json`` (the summary and the
sections, which `verify/pr_comment.py` assembles into the PR comment `pr.yml` posts). One
progress line per plan goes to stderr. Exit status: 0 clean, 1 the head plan has policy violations or failed, 2 an
unknown stack or ref. This is what a reviewer reads on a pull request; no credentials are involved.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify import cost
from verify.plan_record import COMPUTED, ROOT
from verify.replacements import forcing


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Absent()
"""A field one side of a comparison does not have (shows as `(absent)`)."""


# --- flattening and field changes --------------------------------------------------------------------------


IDENTITY_KEYS = ("name", "alert", "record", "key")
"""What names a list item, in order of preference: `name` (containers, env, volumes, ports, rule groups, ...),
`alert` and `record` (Prometheus rules), `key` (selector requirements, node affinity terms)."""
LABELLED_KEYS = ("alert", "record")
"""Identities completed by the item's `labels`, always (not only where the name repeats, so that the identity of a
rule is the same in both plans): one alert per workload differs only by its labels."""


def _names(items: list[Any]) -> list[str] | None:
    """The items' identities when every item is a mapping named by the same one of IDENTITY_KEYS, distinct within
    the list: such lists are matched by identity, so an insertion or a removal is one item added or removed, and a
    reordering no change at all, not every later item changed."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return None
    for key in IDENTITY_KEYS:
        names = [item.get(key) for item in items]
        if not all(isinstance(name, str) and name for name in names):
            continue
        if key in LABELLED_KEYS:
            names = [f"{name}{{{','.join(f'{k}={v}' for k, v in sorted((item.get('labels') or {}).items()))}}}"
                     for name, item in zip(names, items)]
        if len(set(names)) == len(names):
            return names  # type: ignore[return-value]
    return None


SET_VALUED = ("values",)
"""Lists of plain values that mean a set (a selector requirement's `values`: `In [a, b]` is `In [b, a]`)."""


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested inputs as ``{"a.b[0].c": leaf}`` (``a.containers[trainer].image`` for a list of named items);
    empty containers are leaves so they still show up."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        if prefix.rpartition(".")[2] in SET_VALUED and all(isinstance(item, (str, int, float)) for item in value):
            value = sorted(value, key=str)
        keys = _names(value) or [str(index) for index in range(len(value))]
        for key, item in zip(keys, value):
            out.update(flatten(item, f"{prefix}[{key}]"))
        return out
    return {prefix: value}


def _comparable(resource: Mapping[str, Any]) -> dict[str, Any]:
    # dependsOn is left out: it orders the engine's steps and changes nothing about the resource itself; so are
    # aliases: the URNs a resource was known by before (PlanDiff pairs them), not a change to it.
    options = {key: value for key, value in (resource.get("options") or {}).items() if key != "aliases"}
    return {"inputs": resource.get("inputs", {}), "options": options,
            "provider": resource.get("provider"), "parent": resource.get("parent")}


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    flat_old, flat_new = flatten(_comparable(old)), flatten(_comparable(new))
    for key in sorted(set(flat_old) | set(flat_new)):
        before, after = flat_old.get(key, MISSING), flat_new.get(key, MISSING)
        if before != after:
            yield key, before, after


def changed_leaves(before: Any, after: Any, drop_empty: bool = False) -> list[tuple[str, Any, Any]]:
    """Changed leaves of two values (MISSING where a side has none); `drop_empty`: an empty mapping or list counts
    as absent (`securityContext: {}` and none mean the same)."""
    flat_old, flat_new = flatten(before), flatten(after)
    if drop_empty:
        flat_old = {k: v for k, v in flat_old.items() if v not in ({}, [])}
        flat_new = {k: v for k, v in flat_new.items() if v not in ({}, [])}
    keys = sorted(set(flat_old) | set(flat_new))
    return [(key, flat_old.get(key, MISSING), flat_new.get(key, MISSING)) for key in keys
            if flat_old.get(key, MISSING) != flat_new.get(key, MISSING)]


def _show(value: Any) -> str:
    return "(absent)" if value is MISSING else json.dumps(value, sort_keys=True)


def _ignored(path: str, ignore_changes: list[str]) -> bool:
    """Whether Pulumi ignores `path` (``inputs.a.b[0]``) under `ignoreChanges` (``a.b``, ``a.b[*]``, ``a.*``)."""
    if not path.startswith("inputs."):
        return False
    bare = path.removeprefix("inputs.")
    for pattern in ignore_changes:
        regex = re.escape(pattern).replace(r"\[\*\]", r"\[[^\]]+\]").replace(r"\*", r"[^.\[]+")
        if re.fullmatch(rf"{regex}(?:[.\[].*)?", bare):
            return True
    return False


def _multiline(value: Any) -> list[str] | None:
    """A string value as lines when it is multi-line or a JSON document (pretty-printed); None otherwise."""
    if not isinstance(value, str):
        return None
    stripped = value.strip()
    if stripped[:1] in "{[":
        try:
            return json.dumps(json.loads(stripped), indent=2, sort_keys=True).splitlines()
        except ValueError:
            pass
    return value.splitlines() if "\n" in stripped else None


def _change_lines(path: str, before: Any, after: Any) -> list[str]:
    old_lines = [] if before is MISSING else _multiline(before)
    new_lines = [] if after is MISSING else _multiline(after)
    if old_lines is not None and new_lines is not None and (old_lines or new_lines):
        body = list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=2))[2:]
        return [f"    {path}:"] + [f"        {line}" for line in body]
    return [f"    {path}: {_show(before)} -> {_show(after)}"]


_KEY_INPUTS = 8


def _key_inputs(resource: Mapping[str, Any]) -> list[str]:
    """A new resource's scalar inputs, those that would force a replacement later (its identity) first."""
    flat = flatten(resource.get("inputs", {}))
    identity = set(forcing(resource["type"], list(flat)))
    shown = sorted(((path, value) for path, value in flat.items() if path and not isinstance(value, (dict, list))),
                   key=lambda item: (item[0] not in identity, item[0]))
    lines = [f"    {path}: {_show(value)}" for path, value in shown[:_KEY_INPUTS]]
    if len(shown) > _KEY_INPUTS:
        lines.append(f"    ... and {len(shown) - _KEY_INPUTS} more input(s)")
    return lines


_VERSION_PATH = re.compile(r"(?:^|\.)(?:version|addonVersion|clusterVersion|releaseVersion|directory|file|chart)$")


def version_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Version bumps of charts, add-ons, vendored manifests and the cluster, one line each."""
    lines = []
    for urn in sorted(set(old) & set(new)):
        for path, before, after in field_changes(old[urn], new[urn]):
            if path.startswith("inputs.") and _VERSION_PATH.search(path.removeprefix("inputs.")):
                lines.append(f"    {new[urn]['type']}  {new[urn]['name']}  {path.removeprefix('inputs.')}: "
                             f"{_show(before)} -> {_show(after)}")
    return lines


# --- the diff of two plans ---------------------------------------------------------------------------------


@dataclass
class PlanDiff:
    """Two plans (`resources.json` documents, with `cluster` and `placements` when the planner wrote them) and
    what changed between them; every section reads this."""

    base: Mapping[str, Any] | None
    head: Mapping[str, Any]
    provider_versions: list[str] = field(default_factory=list)
    old: dict[str, Mapping[str, Any]] = field(init=False)
    new: dict[str, Mapping[str, Any]] = field(init=False)
    added: list[str] = field(init=False)
    removed: list[str] = field(init=False)
    renamed: list[tuple[str, str]] = field(init=False)
    """(old URN, new URN) of resources with the same type and inputs under a new name or parent."""
    changed: list[tuple[str, list[tuple[str, Any, Any]]]] = field(init=False)
    replaced: dict[str, list[str]] = field(init=False)
    """URN → the changed inputs that force its replacement."""
    delete_first: dict[str, str] = field(init=False)
    """Replaced URN → why the old one is deleted before its replacement exists (the others are created first)."""

    def __post_init__(self) -> None:
        self.old = {r["urn"]: r for r in (self.base or {}).get("resources", [])}
        self.new = {r["urn"]: r for r in self.head.get("resources", [])}
        # A resource known by another URN in the base (its `aliases` option) is the same resource to the engine: its
        # old URN is read as its new one, so a rename with an alias shows as no change (pkg/v3
        # resource/deploy/step_generator.go:671-680 at 1b594989: the URN first, then its aliases, in the old state).
        for urn, resource in self.new.items():
            for alias in (resource.get("options") or {}).get("aliases") or []:
                if alias in self.old and alias not in self.new and urn not in self.old:
                    self.old[urn] = self.old.pop(alias)
        self.renamed = _renames(self.old, self.new)
        paired = {urn for pair in self.renamed for urn in pair}
        self.added = sorted(set(self.new) - set(self.old) - paired)
        self.removed = sorted(set(self.old) - set(self.new) - paired)
        self.changed = []
        for urn in sorted(set(self.old) & set(self.new)):
            ignore = list(self.new[urn].get("options", {}).get("ignoreChanges") or [])
            changes = [c for c in field_changes(self.old[urn], self.new[urn]) if not _ignored(c[0], ignore)]
            if changes:
                self.changed.append((urn, changes))
        replaced = {urn: [*forcing(self.new[urn]["type"], [path for path, _, _ in changes]),
                          *_replaced_on(self.new[urn], [path for path, _, _ in changes])]
                    for urn, changes in self.changed if self.new[urn].get("custom", True)}
        self.replaced = {urn: props for urn, props in replaced.items() if props}
        self.delete_first = self._delete_first()

    def _delete_first(self) -> dict[str, str]:
        """Replaced URN → why its old resource is deleted before the replacement is created (`deletes_first`), and
        every replaced resource that depends, directly or through others replaced, on one replaced that way: the
        engine deletes those dependents first (pkg/v3 resource/deploy/step_generator.go:2146-2170 and
        `calculateDependentReplacements` at v3.274.0; `make up-test` saw the readiness gate's auto-named Job deleted
        first because its fixed-name script was). A dependent the provider would replace only because a replaced
        resource's outputs turn unknown is not predicted here; `make up-test` compares with the engine's steps."""
        reasons = {urn: why for urn in self.replaced
                   if (why := deletes_first(self.old[urn], self.new[urn])) is not None}
        grew = True
        while grew:
            grew = False
            for urn in sorted(set(self.replaced) - set(reasons)):
                first = next((dep for dep in sorted(self.new[urn].get("dependsOn") or []) if dep in reasons), None)
                if first is not None:
                    reasons[urn] = f"it depends on {self.new[first]['name']}, which is deleted first"
                    grew = True
        return reasons

    def summary(self) -> str:
        renamed = f", {len(self.renamed)} to rename" if self.renamed else ""
        return (f"stack {self.head.get('stack')}: {len(self.added)} to add, "
                f"{len(self.changed) - len(self.replaced)} to change, {len(self.replaced)} to replace, "
                f"{len(self.removed)} to delete{renamed}")


def _replaced_on(resource: Mapping[str, Any], paths: list[str]) -> list[str]:
    """The changed input paths under the resource's own `replaceOnChanges` option (the engine replaces it)."""
    props = (resource.get("options") or {}).get("replaceOnChanges") or []
    bare = [path.removeprefix("inputs.") for path in paths if path.startswith("inputs.")]
    return [path for path in bare if any(path == p or path.startswith((p + ".", p + "[")) for p in props)]


def _renames(old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Removed and added resources of one type whose inputs are the same once the old name reads as the new one
    (a renamed resource, or one moved under a renamed component): pairs, each resource in at most one."""
    removed = sorted(set(old) - set(new))
    added = sorted(set(new) - set(old))
    by_type: dict[str, list[str]] = {}
    for urn in added:
        by_type.setdefault(new[urn]["type"], []).append(urn)
    dumped = {urn: json.dumps(new[urn].get("inputs", {}), sort_keys=True) for urn in added}
    pairs = []
    for urn in removed:
        before = old[urn]
        inputs = json.dumps(before.get("inputs", {}), sort_keys=True)
        for candidate in by_type.get(before["type"], []):
            after = new[candidate]
            renamed = inputs.replace(before["name"], after["name"]) if before["name"] else inputs
            if renamed == dumped[candidate] and \
                    before.get("custom", True) == after.get("custom", True):
                pairs.append((urn, candidate))
                by_type[before["type"]].remove(candidate)
                break
    return pairs


@dataclass
class Section:
    """One part of the output: a title (None: lines printed right under the summary line) and plain-text lines
    (indented lines belong to the unindented one above them). `style`: how markdown shows it, a `diff` block or a
    bulleted `list`."""

    title: str | None
    lines: list[str]
    style: str = "block"


# --- destructive changes -----------------------------------------------------------------------------------

STATEFUL = {
    "aws:ebs/volume:Volume": "an EBS volume: its data",
    "aws:efs/fileSystem:FileSystem": "an EFS file system: its files",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "an FSx for Lustre file system: its files",
    "aws:fsx/ontapFileSystem:OntapFileSystem": "an FSx for ONTAP file system: its files",
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem": "an FSx for OpenZFS file system: its files",
    "aws:s3/bucket:Bucket": "an S3 bucket: its objects",
    "aws:s3/bucketV2:BucketV2": "an S3 bucket: its objects",
    "aws:kms/key:Key": "a KMS key: everything encrypted with it becomes unreadable",
    "aws:ecr/repository:Repository": "an ECR repository: its images",
    "aws:eks/cluster:Cluster": "the EKS cluster: every workload and object in it",
    "kubernetes:core/v1:PersistentVolume": "a PersistentVolume: its data, unless its reclaim policy is Retain",
    "kubernetes:core/v1:PersistentVolumeClaim": "a PersistentVolumeClaim: its volume, when its class deletes on "
                                                "release",
    "kubernetes:core/v1:Namespace": "a Namespace: every object in it",
}
"""Resource types whose deletion loses data or everything inside (what a reviewer must not miss), and what."""

NODE_GROUP_TYPES = ("aws:eks/nodeGroup:NodeGroup",)
NODE_GROUP_LABEL = "gtp.dev/node-group"


def _node_group(resource: Mapping[str, Any]) -> str | None:
    """The simulation's name of the node group `resource` provides (its `gtp.dev/node-group` label), if any."""
    if resource["type"] not in NODE_GROUP_TYPES:
        return None
    labels = (resource.get("inputs") or {}).get("labels") or {}
    return labels.get(NODE_GROUP_LABEL) or resource["name"].removesuffix("-nodes").removeprefix("eks-")


def _running_on(resource: Mapping[str, Any], placements: Mapping[str, Any]) -> str | None:
    group = _node_group(resource)
    if group is None:
        return None
    found = placements.get(group)
    if found is None:
        return f"node group {group}: what runs there is unknown (the base plan has no scheduling simulation)"
    workloads = list(found.get("workloads", []))
    daemons = found.get("daemonsets")
    parts = workloads or ["no workload"]
    if daemons:
        parts.append(f"{daemons} DaemonSet pod(s) per node")
    return f"runs there now: {'; '.join(parts)}"


def _data_notes(resource: Mapping[str, Any]) -> list[str]:
    options = resource.get("options") or {}
    notes = []
    if resource["type"] in STATEFUL:
        notes.append(f"holds data: {STATEFUL[resource['type']]}")
    if options.get("protect"):
        notes.append("protected: `pulumi up` refuses to delete it until `protect` is lifted")
    if options.get("retainOnDelete"):
        notes.append("retainOnDelete: Pulumi forgets it, the cloud resource stays (and may collide with its "
                     "replacement)")
    return notes


def deletes_first(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why Pulumi deletes `old` before creating its replacement `new`, or None (it creates the new one first):
    - the `deleteBeforeReplace` resource option (the engine honours it for every provider);
    - a Kubernetes object with a fixed name, kept in the same namespace: pulumi-kubernetes' Diff sets
      DeleteBeforeReplace when "the new version of that object MUST have the same name" — replaces, not autonamed
      (`metadata.name` given), same name, same namespace (pulumi/pulumi-kubernetes
      provider/pkg/provider/provider.go, `Diff`)."""
    if (new.get("options") or {}).get("deleteBeforeReplace"):
        return "deleteBeforeReplace option"
    if new["type"].startswith("kubernetes:") and not new["type"].startswith("kubernetes:helm.sh/"):
        before = (old.get("inputs") or {}).get("metadata") or {}
        after = (new.get("inputs") or {}).get("metadata") or {}
        if after.get("name") and after.get("name") == before.get("name") and \
                after.get("namespace") == before.get("namespace"):
            return "a Kubernetes object's fixed name"
    return None


IMAGE_BUILD_TYPES = ("docker:index/image:Image",)
"""Resources whose change is a new training image (its tag carries the content hash: components/image_spec.py)."""
IMAGE_COMPONENT_TYPES = ("gtp:image:TrainingImage",)
"""Components whose recorded `contentTag` is the known part of their image's name: a change of it (a Dockerfile-only
change, whose image reference stays `<computed>`) is a new image of every image build under them."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class TemplateChange:
    """A running job's pod template changes (a container, or the image it is built from) and what that does."""

    why: str
    """`pod count` (a replica count changed), `pod template` (a container changed in the plan) or `new image` (its
    image build changed; the reference itself is only known at `up`)."""
    restarts: bool | None
    """The running job is stopped and restarted (destructive); False: it keeps running; None: not known here."""
    effect: str


def _template_parts(kind: Any, body: Mapping[str, Any]) -> Any:
    """What Kueue compares of a running job's pod sets with its Workload (kueue v0.19.2
    pkg/util/equality/podset.go:41-63): the pod counts, the containers (with what the kind overrides them with) and
    the tolerations."""
    return [kind.pod_counts(body), kind.containers(body),
            [((t or {}).get("spec") or {}).get("tolerations") for t in kind.pod_templates(body).values()]]


def image_builds(diff: PlanDiff) -> set[str]:
    """The image builds whose image changes: changed themselves, or under a component whose content tag changed."""
    changed = {urn for urn, _ in diff.changed}
    components = {urn for urn in changed if diff.new[urn]["type"] in IMAGE_COMPONENT_TYPES}
    return {urn for urn, record in diff.new.items() if record["type"] in IMAGE_BUILD_TYPES
            and (urn in changed or record.get("parent") in components)}


def template_changes(diff: PlanDiff) -> dict[str, TemplateChange]:
    """URN → what happens to each standing job (a workload kind's resource, in both plans, not replaced) whose pod
    template changes — in its own body, through the image build it runs, or through the template object it is
    built from (a TrainJob's ClusterTrainingRuntime, which Kueue reads at reconcile: kueue v0.19.2
    pkg/controller/jobs/trainjob/trainjob_controller.go:155,199-209) — by the kind's own declaration (workload_kinds
    `template_update`)."""
    from workload_kinds import kind_of_resource

    builds = image_builds(diff)
    from policy.gtp_policy.graph import StackIndex

    index = StackIndex(list(diff.new.values()))  # the engine's order: dependsOn (components expanded), parents

    def upstream(urn: str) -> set[str]:
        return {str(record.get("urn")) for record in index.upstream(diff.new[urn])}
    why: dict[str, str] = {}
    for urn in sorted(set(diff.old) & set(diff.new)):
        old, new = diff.old[urn].get("inputs") or {}, diff.new[urn].get("inputs") or {}
        kind = kind_of_resource(new)
        if kind is None or urn in diff.replaced:
            continue
        if kind.pod_counts(old) != kind.pod_counts(new):
            why[urn] = "pod count"
        elif _template_parts(kind, old) != _template_parts(kind, new):
            why[urn] = "pod template"
        elif builds & upstream(urn) and any(c.get("image") == COMPUTED for c in kind.containers(new)):
            why[urn] = "new image"
    found: dict[str, TemplateChange] = {}
    for urn in sorted(set(diff.old) & set(diff.new)):
        new = diff.new[urn].get("inputs") or {}
        kind = kind_of_resource(new)
        if kind is None or new.get("kind") != kind.resource_kind or urn in diff.replaced:
            continue
        reason = why.get(urn) or next((f"{why[dep]} of {diff.new[dep]['name']}"
                                       for dep in sorted(diff.new[urn].get("dependsOn") or []) if dep in why), None)
        if reason is None:
            continue
        update = kind.template_update
        queued = QUEUE_LABEL in ((new.get("metadata") or {}).get("labels") or {})
        if update is None or (update.needs_queue and not queued):
            found[urn] = TemplateChange(reason, None, f"what {kind.resource_kind}'s controller does to a running job "
                                                      "with a changed pod template is not known here: expect its "
                                                      "pods to restart")
        else:
            found[urn] = TemplateChange(reason, update.restarts, update.effect)
    return found


def destructive_section(diff: PlanDiff) -> Section | None:
    """Deletes and replacements first, each with what it takes down."""
    placements = (diff.base or {}).get("placements") or {}
    lines: list[str] = []
    entries = [("-", "delete", urn, diff.old[urn], []) for urn in diff.removed]
    entries += [("+-", "replace", urn, diff.new[urn], props) for urn, props in diff.replaced.items()]
    entries += [("=>", "rename", old, diff.old[old], []) for old, new in diff.renamed
                if _data_notes(diff.old[old]) or _node_group(diff.old[old])]
    restarts = {urn: change for urn, change in template_changes(diff).items() if change.restarts is not False}
    entries += [("~", "restart", urn, diff.new[urn], []) for urn in restarts]
    for sign, verb, urn, resource, props in sorted(entries, key=lambda e: (e[2], e[0])):
        before = diff.old.get(urn, resource)
        notes = []
        first = diff.delete_first.get(urn) if verb == "replace" else None
        if first:
            verb = "replace, DELETE BEFORE REPLACE"
            notes.append(f"the old one is deleted before its replacement exists ({first}): what runs on it stops "
                         "first")
        elif verb == "replace":
            notes.append("the replacement is created first, then the old one is deleted")
        elif verb == "rename":
            notes.append("Pulumi deletes and re-creates it unless the new one has `aliases` naming the old URN")
        elif verb == "restart":
            change = restarts[urn]
            verb = f"running job restarts ({change.why})" if change.restarts else f"running job ({change.why})"
            notes.append(change.effect)
        forced = f" ({', '.join(props)})" if props else ""
        lines.append(f"{sign} {resource['type']}  {resource['name']}  {verb}{forced}")
        lines.extend(f"    {note}" for note in notes)
        running = _running_on(before, placements)
        if running:
            lines.append(f"    {running}")
        lines.extend(f"    {note}" for note in _data_notes(before))
        if verb.startswith(("delete", "replace")):
            lines.extend(f"    {note}" for note in crd_notes(diff, before))
    return Section("destructive changes", lines, style="list") if lines else None


MANIFEST_TYPES = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")
"""Resources that apply a manifest file (an operator's, vendored): their objects are the rendered ones of `operator
<file>` in the plan's cluster objects."""
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def crd_notes(diff: PlanDiff, resource: Mapping[str, Any]) -> list[str]:
    """What deleting `resource` takes with it beyond its own objects: the CustomResourceDefinitions it holds (its
    own, or those of the manifest it applies, from the base plan's cluster objects), whose deletion makes the API
    server delete every object of their kinds in the cluster, a team's own included (its finalizer
    `customresourcecleanup.apiextensions.k8s.io`: k8s.io/apiextensions-apiserver v0.34.12
    pkg/controller/finalizer/crd_finalizer.go:155,181 `deleteInstances`), unless the new plan keeps them elsewhere."""
    inputs = resource.get("inputs") or {}
    if resource.get("type") == CRD_TYPE:
        crds = [inputs]
    elif resource.get("type") in MANIFEST_TYPES and isinstance(inputs.get("file"), str):
        source = f"operator {inputs['file']}"
        crds = [item.obj for item in (diff.base or {}).get("cluster") or []
                if item.source == source and item.obj.get("kind") == "CustomResourceDefinition"]
    else:
        return []
    kept = {(item.obj.get("metadata") or {}).get("name") for item in diff.head.get("cluster") or []
            if item.obj.get("kind") == "CustomResourceDefinition"}
    gone = sorted({str((crd.get("metadata") or {}).get("name")): ((crd.get("spec") or {}).get("names") or {}).get(
        "kind") for crd in crds if (crd.get("metadata") or {}).get("name") not in kept}.items())
    if not gone:
        return []
    return [f"deletes {len(gone)} CustomResourceDefinition(s): {', '.join(name for name, _ in gone)}: the API server "
            f"then deletes every {', '.join(str(kind) for _, kind in gone)} in the cluster, those teams created "
            "included"]


# --- resources ---------------------------------------------------------------------------------------------


def resources_section(diff: PlanDiff) -> Section | None:
    lines: list[str] = []
    kept = {urn: change for urn, change in template_changes(diff).items() if change.restarts is False}
    for urn in diff.added:
        lines.append(f"+ {diff.new[urn]['type']}  {diff.new[urn]['name']}")
        if diff.new[urn].get("custom", True):
            lines.extend(_key_inputs(diff.new[urn]))
    for urn in diff.removed:
        lines.append(f"- {diff.old[urn]['type']}  {diff.old[urn]['name']}")
    for old, new in diff.renamed:
        parent = "" if diff.old[old].get("parent") == diff.new[new].get("parent") else " (new parent)"
        lines.append(f"=> {diff.new[new]['type']}  {diff.old[old]['name']} -> {diff.new[new]['name']}{parent}")
    for urn, changes in diff.changed:
        resource = diff.new[urn]
        if urn in diff.replaced:
            order = "; deleted before the replacement is created" if urn in diff.delete_first else ""
            lines.append(f"+- {resource['type']}  {resource['name']}  (replace: {', '.join(diff.replaced[urn])} "
                         f"forces a new resource{order})")
        else:
            lines.append(f"~ {resource['type']}  {resource['name']}")
        lines.extend(_item_lines(changes, diff.old[urn], resource))
        if urn in kept:
            lines.append(f"    running jobs: {kept.pop(urn).effect}")
    for urn, change in kept.items():  # a new image only: the job's own inputs are the same until `up` builds it
        lines.append(f"~ {diff.new[urn]['type']}  {diff.new[urn]['name']}  ({change.why}, known at up)")
        lines.append(f"    running jobs: {change.effect}")
    return Section(None, lines) if lines else None


_ITEM = re.compile(r"\[([^\[\]]+)\](?=[.\[]|$)")
"""A list item in a flattened path: `[3]`, or its identity (`[trainer]`, `[TrainingCheckpointTooOld{...}]`)."""
"""A path into a numbered list item (named items, `[trainer]`, are matched by name and never collapse)."""


def _item_lines(changes: list[tuple[str, Any, Any]], old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A resource's changed fields, with list items (objects) that are gone (or new) as a whole shown as one line:
    per run of indexes (`inputs.networkInterfaces[16..31]: 16 items removed`), or per item matched by its identity
    (`...rules[TrainingCheckpointTooOld{...}]: item removed`), instead of one line per field; a scalar item keeps its
    own line with its value."""
    flat = {"old": flatten(_comparable(old)), "new": flatten(_comparable(new))}
    whole: dict[tuple[str, str], set[str]] = {}
    rest = []
    for path, before, after in changes:
        if (before is MISSING) != (after is MISSING):
            side = "new" if after is MISSING else "old"
            # the outermost list item this field is in that the other side lacks as a whole
            gone = next((match for match in _ITEM.finditer(path) if match.end() < len(path)
                         and not any(key == path[:match.end()] or key.startswith((path[:match.end()] + ".",
                                                                                  path[:match.end()] + "["))
                                     for key in flat[side])), None)
            if gone is not None:
                whole.setdefault((path[:gone.start()], "removed" if after is MISSING else "added"), set()).add(
                    gone.group(1))
                continue
        rest.append((path, before, after))
    lines = []
    for (path, what), items in sorted(whole.items()):
        indexes = sorted(int(item) for item in items if item.isdigit())
        runs: list[list[int]] = []
        for index in indexes:
            if runs and index == runs[-1][-1] + 1:
                runs[-1].append(index)
            else:
                runs.append([index])
        for run in runs:
            span = f"[{run[0]}]" if len(run) == 1 else f"[{run[0]}..{run[-1]}]"
            lines.append(f"    {path}{span}: {len(run)} item{'s' if len(run) > 1 else ''} {what}")
        lines.extend(f"    {path}[{item}]: item {what}" for item in sorted(items) if not item.isdigit())
    for path, before, after in rest:
        lines.extend(_change_lines(path, before, after))
    return lines


# --- the rendered cluster ----------------------------------------------------------------------------------

_HASH = re.compile(r"-[0-9a-f]{12}$")
_VERSION = re.compile(r"-v?\d[\w.]*$")


def cluster_group(source: str) -> str:
    """The unit a cluster object is compared within, the same across a version bump: `release <ns>/<name>` for a
    chart's objects (the chart directory carries the version), `operator <name>` for an operator manifest
    (`build/kueue/prod/kueue-v0.19.2-<hash>.yaml` → `operator kueue`), `stack` for the program's own objects."""
    if source.startswith("chart ") and " release " in source:
        return "release " + source.rsplit(" release ", 1)[1]
    if source.startswith("operator "):
        stem = Path(source.split(" ", 1)[1]).name.removesuffix(".yaml").removesuffix(".yml")
        return "operator " + _VERSION.sub("", _HASH.sub("", stem))
    return source


def _object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = obj.get("metadata") or {}
    return str(obj.get("kind")), str(metadata.get("namespace") or ""), str(metadata.get("name"))


def _label(key: tuple[str, str, str]) -> str:
    kind, namespace, name = key
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def _pod_specs(node: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every pod spec (a mapping with a `containers` list) in an object, with its dotted path."""
    if isinstance(node, Mapping):
        if isinstance(node.get("containers"), list):
            yield path, node
            return
        for key, value in node.items():
            yield from _pod_specs(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _pod_specs(value, f"{path}[{index}]")


def _role(path: str) -> str:
    """A short name for the pod spec at `path` in an object with several (`pytorchReplicaSpecs.Worker`)."""
    parts = [p for p in re.split(r"[.\[\]]", path) if p and p not in {"spec", "template", "jobTemplate"}
             and not p.isdigit()]
    return parts[-1] if parts else "pod"


def _containers(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    specs = list(_pod_specs(obj))
    out: dict[str, Mapping[str, Any]] = {}
    for path, spec in specs:
        prefix = f"{_role(path)}/" if len(specs) > 1 else ""
        for field_name in ("initContainers", "containers", "ephemeralContainers"):
            for container in spec.get(field_name) or []:
                if isinstance(container, Mapping):
                    out[f"{prefix}{container.get('name')}"] = container
    return out


_HOST_FIELDS = ("hostNetwork", "hostPID", "hostIPC", "hostUsers", "securityContext")


def _pod_security_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    specs = list(_pod_specs(obj))
    out: dict[str, Any] = {}
    for path, spec in specs:
        prefix = f"{_role(path)} " if len(specs) > 1 else ""
        for name in _HOST_FIELDS:
            if name in spec:
                out[f"{prefix}pod {name}"] = spec[name]
    for name, container in _containers(obj).items():
        if "securityContext" in container:
            out[f"container {name} securityContext"] = container["securityContext"]
    return out


def _split_image(reference: str) -> tuple[str, str]:
    """`host/path:tag@digest` → (`host/path`, `tag@digest`)."""
    name, at, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    else:
        tag = ""
    return name, tag + (at + digest if at else "")


def _without_host(repository: str) -> str:
    first, _, rest = repository.partition("/")
    return rest if rest and ("." in first or ":" in first or first == "localhost") else repository


def _image_change(before: Any, after: Any) -> str:
    """An image change; same repository: `repo: old-tag -> new-tag` (the registry host left out, it didn't move)."""
    if isinstance(before, str) and isinstance(after, str):
        (old_repo, old_tag), (new_repo, new_tag) = _split_image(before), _split_image(after)
        if old_repo == new_repo:
            return f"{_without_host(new_repo)}: {old_tag or '(no tag)'} -> {new_tag or '(no tag)'}"
    return f"{_show(before)} -> {_show(after)}"


def _rule(rule: Mapping[str, Any]) -> str:
    parts = []
    for key in ("apiGroups", "resources", "resourceNames", "nonResourceURLs", "verbs"):
        if rule.get(key):
            values = ",".join('""' if value == "" else str(value) for value in rule[key])
            parts.append(f"{key} {values}")
    return " ".join(parts) or "(empty rule)"


_PSA = "pod-security.kubernetes.io/"


def _psa_labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    if obj.get("kind") != "Namespace":
        return {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {key: value for key, value in labels.items() if key.startswith(_PSA)}


def _object_changes(key: tuple[str, str, str], before: Mapping[str, Any],
                    after: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The reviewer's lines for one changed object, and whether they covered everything that changed."""
    label = _label(key)
    lines: list[str] = []
    old_containers, new_containers = _containers(before), _containers(after)
    images: dict[str, list[str]] = {}  # one line per distinct image change, naming its containers
    for name in sorted(set(old_containers) | set(new_containers)):
        if name not in new_containers:
            lines.append(f"- container  {label}  {name} ({old_containers[name].get('image')})")
        elif name not in old_containers:
            lines.append(f"+ container  {label}  {name} ({new_containers[name].get('image')})")
        elif old_containers[name].get("image") != new_containers[name].get("image"):
            change = _image_change(old_containers[name].get("image"), new_containers[name].get("image"))
            images.setdefault(change, []).append(name)
    for change, names in images.items():
        lines.append(f"~ image  {label}  {change} (container{'s' if len(names) > 1 else ''} {', '.join(names)})")
    for path, was, now in changed_leaves(_pod_security_fields(before), _pod_security_fields(after), drop_empty=True):
        lines.append(f"~ security  {label}  {path}: {_show(was)} -> {_show(now)}")
    if key[0] in {"Role", "ClusterRole"}:
        old_rules = [_rule(rule) for rule in before.get("rules") or []]
        new_rules = [_rule(rule) for rule in after.get("rules") or []]
        lines += [f"- rbac  {label}  {rule}" for rule in old_rules if rule not in new_rules]
        lines += [f"+ rbac  {label}  {rule}" for rule in new_rules if rule not in old_rules]
        if before.get("aggregationRule") != after.get("aggregationRule"):
            lines.append(f"~ rbac  {label}  aggregationRule: {_show(before.get('aggregationRule'))} -> "
                         f"{_show(after.get('aggregationRule'))}")
    if key[0] in {"RoleBinding", "ClusterRoleBinding"}:
        for path, was, now in changed_leaves({"roleRef": before.get("roleRef"), "subjects": before.get("subjects")},
                                       {"roleRef": after.get("roleRef"), "subjects": after.get("subjects")}):
            lines.append(f"~ rbac  {label}  {path}: {_show(was)} -> {_show(now)}")
    for path, was, now in changed_leaves(_psa_labels(before), _psa_labels(after)):
        lines.append(f"~ pod security  {label}  {path}: {_show(was)} -> {_show(now)}")
    covered = not _rest_changes(before, after)
    return lines, covered


def _strip_reviewed(obj: Mapping[str, Any]) -> Any:
    """`obj` without what the reviewer's lines already cover (images, security fields, rules, PSA labels)."""
    copy = json.loads(json.dumps(obj))
    for _, spec in _pod_specs(copy):
        for name in _HOST_FIELDS:
            spec.pop(name, None)
        for field_name in ("initContainers", "containers", "ephemeralContainers"):
            for container in spec.get(field_name) or []:
                if isinstance(container, dict):
                    container.pop("image", None)
                    container.pop("securityContext", None)
    if copy.get("kind") in {"Role", "ClusterRole"}:
        copy.pop("rules", None)
        copy.pop("aggregationRule", None)
    if copy.get("kind") in {"RoleBinding", "ClusterRoleBinding"}:
        copy.pop("roleRef", None)
        copy.pop("subjects", None)
    labels = (copy.get("metadata") or {}).get("labels")
    if copy.get("kind") == "Namespace" and isinstance(labels, dict):
        for key in [k for k in labels if k.startswith(_PSA)]:
            del labels[key]
    return copy


def _rest_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return [path for path, _, _ in changed_leaves(_strip_reviewed(before), _strip_reviewed(after))]


_OTHER_FIELDS = 6


def _generalized(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "[]", path)


def cluster_changes(base: list[Any] | None, head: list[Any] | None) -> list[str]:
    """The reviewer's view of two `cluster.yaml`s (lists of `verify.render.ClusterObject`), per release/operator."""
    groups: dict[str, dict[str, Any]] = {}
    for side, objects in (("old", base or []), ("new", head or [])):
        for item in objects:
            group = groups.setdefault(cluster_group(item.source), {"old": {}, "new": {}, "sources": {}})
            group[side][_object_key(item.obj)] = item.obj
            group["sources"].setdefault(side, item.source)
    lines: list[str] = []
    for name in sorted(groups, key=lambda g: (g != "stack", g)):
        group = groups[name]
        old, new = group["old"], group["new"]
        body: list[str] = []
        for sign, keys, side in (("+", sorted(set(new) - set(old)), new), ("-", sorted(set(old) - set(new)), old)):
            by_kind: dict[str, list[str]] = {}
            for key in keys:
                shown = f"{key[1]}/{key[2]}" if key[1] else key[2]
                psa = _psa_labels(side[key]).get(_PSA + "enforce")
                by_kind.setdefault(key[0], []).append(shown + (f" (pod security enforce: {psa})" if psa else ""))
            body += [f"{sign} {kind}  {', '.join(names)}" for kind, names in sorted(by_kind.items())]
        others: list[str] = []
        fields: list[str] = []
        for key in sorted(set(old) & set(new)):
            if old[key] == new[key]:
                continue
            object_lines, covered = _object_changes(key, old[key], new[key])
            body += object_lines
            if not covered:
                others.append(_label(key))
                fields += [_generalized(path) for path in _rest_changes(old[key], new[key])]
        if others:
            distinct = list(dict.fromkeys(fields))
            more = f", ... {len(distinct) - _OTHER_FIELDS} more" if len(distinct) > _OTHER_FIELDS else ""
            what = others[0] if len(others) == 1 else f"{len(others)} objects"
            body.append(f"~ other  {what}: {', '.join(distinct[:_OTHER_FIELDS])}{more}")
        if body:
            sources = group["sources"]
            moved = ""
            if sources.get("old") and sources.get("new") and sources["old"] != sources["new"]:
                moved = f" ({sources['old'].split(' ')[1]} -> {sources['new'].split(' ')[1]})"
            elif not sources.get("old"):
                moved = " (new)"
            elif not sources.get("new"):
                moved = " (removed)"
            lines.append(f"{name}{moved}:")
            lines += [f"    {line}" for line in body]
    return lines


def cluster_section(diff: PlanDiff) -> Section | None:
    if "cluster" not in diff.head:
        return None
    lines = cluster_changes((diff.base or {}).get("cluster"), diff.head.get("cluster"))
    return Section(f"cluster (build/plan/{diff.head.get('stack')}/cluster.yaml)", lines) if lines else None


# --- outputs, versions, violations -------------------------------------------------------------------------


def outputs_section(diff: PlanDiff) -> Section | None:
    changes = list(field_changes({"inputs": (diff.base or {}).get("outputs", {})},
                                 {"inputs": diff.head.get("outputs", {})}))
    lines = [f"{path.removeprefix('inputs.')}: {_show(before)} -> {_show(after)}" for path, before, after in changes]
    return Section("outputs", lines) if lines else None


def versions_section(diff: PlanDiff) -> Section | None:
    lines = [line.removeprefix("    ") for line in
             list(diff.provider_versions) + version_changes(diff.old, diff.new)]
    return Section("versions", lines) if lines else None


def cost_section(diff: PlanDiff) -> Section | None:
    """The $/h change at the node groups' min and max sizes, from each plan's cost.json (verify/cost.py)."""
    lines = cost.delta((diff.base or {}).get("cost"), diff.head.get("cost"))
    if not lines:
        return None
    return Section("cost", [lines[0].removeprefix("cost: "), *(line.removeprefix("  ") for line in lines[1:])])


def violations_section(diff: PlanDiff) -> Section | None:
    violations = list(diff.head.get("violations") or [])
    return Section(f"policy violations ({len(violations)})", violations) if violations else None


SECTIONS: list[Callable[[PlanDiff], Section | None]] = [
    destructive_section, resources_section, cluster_section, cost_section, outputs_section, versions_section,
    violations_section,
]
"""What a plan diff shows, in order; a new section is one function added here."""


# --- rendering ---------------------------------------------------------------------------------------------

FORMATS = ("plain", "markdown", "json")


def _plain(summary: str, sections: list[Section]) -> str:
    lines = [summary]
    for section in sections:
        if section.title is None:
            lines += section.lines
        else:
            lines.append(f"{section.title}:")
            lines += [f"    {line}" for line in section.lines]
    return "\n".join(lines)


def markdown_section(section: Section) -> list[str]:
    """One section as markdown: its bold title, then a bulleted list or a `diff` block. In a `diff` block GitHub
    colours a line by its first character (`+` added, `-` deleted, `!` changed): a replacement (`+-`) gets `! `
    in front so it reads as the change it is, not as an addition."""
    title = section.title or "resources"
    out = [f"**{title[:1].upper()}{title[1:]}**" + (" :warning:" if section.style == "list" else ""), ""]
    if section.style == "list":
        for line in section.lines:
            stripped = line.lstrip(" ")
            depth = (len(line) - len(stripped)) // 4
            out.append(f"{'  ' * depth}- `{stripped}`" if depth == 0 else f"{'  ' * depth}- {stripped}")
    else:
        out += ["````diff", *(f"! {line}" if line.startswith("+- ") else line for line in section.lines), "````"]
    return out


def _markdown(summary: str, sections: list[Section]) -> str:
    stack, _, counts = summary.partition(": ")
    out = [f"**{stack}**: {counts}"]
    for section in sections:
        out += ["", *markdown_section(section)]
    return "\n".join(out)


def _json(summary: str, sections: list[tuple[str, Section]]) -> str:
    """What `verify/pr_comment.py` reads per stack: the summary line and each section with the name of the
    `SECTIONS` function that built it (`destructive`, `resources`, ...)."""
    return json.dumps({"summary": summary, "sections": [
        {"kind": kind, "title": section.title, "lines": section.lines, "style": section.style}
        for kind, section in sections]})


def diff_plans(base: Mapping[str, Any] | None, head: Mapping[str, Any],
               provider_versions: list[str] | None = None, fmt: str = "plain") -> str:
    """A readable diff of two `resources.json` documents (base None: the stack is new), `SECTIONS` in order."""
    diff = PlanDiff(base, head, list(provider_versions or []))
    built = [(build.__name__.removesuffix("_section"), section) for build in SECTIONS
             if (section := build(diff)) is not None]
    if fmt == "json":
        return _json(diff.summary(), built)
    return (_markdown if fmt == "markdown" else _plain)(diff.summary(), [section for _, section in built])


# --- planning a tree ---------------------------------------------------------------------------------------

_FITS = re.compile(r"^(?P<owner>.+) ×(?P<count>\d+): fits (?P<groups>.+)$")
_GROUP = re.compile(r"^node group (?P<name>\S+) \(.*?; (?P<daemons>\d+) DaemonSet pod\(s\)")


def placements(simulation: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per node group, what the plan's scheduling simulation (`simulation.json`, check `scheduled`) places there:
    ``{"h100": {"workloads": ["PyTorchJob training-prod/gpt-pretrain Worker ×4"], "daemonsets": 6}}``."""
    details = ((simulation.get("checks") or {}).get("scheduled") or {}).get("details") or []
    out: dict[str, dict[str, Any]] = {}
    for line in details:
        group = _GROUP.match(line)
        if group:
            out.setdefault(group["name"], {"workloads": []})["daemonsets"] = int(group["daemons"])
            continue
        fits = _FITS.match(line)
        if fits:
            for name in fits["groups"].split(", "):
                out.setdefault(name, {"workloads": []})["workloads"].append(f"{fits['owner']} ×{fits['count']}")
    return out


_PIN = re.compile(r"^\s*(pulumi[-_a-z]*)\s*==\s*([^\s;#]+)", re.IGNORECASE | re.MULTILINE)


def provider_pins(tree: Path) -> dict[str, str]:
    """The Pulumi SDK and provider pins in `tree`'s requirements.txt (what decides the provider plugins)."""
    path = tree / "requirements.txt"
    return {name.lower(): version for name, version in _PIN.findall(path.read_text())} if path.exists() else {}


def pin_changes(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    return [f"    {name}: {old.get(name, '(absent)')} -> {new.get(name, '(absent)')}"
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def stacks_to_diff(base: str, root: Path = ROOT) -> list[str]:
    """Every stack of the working tree and of `base` (a stack the change deletes is diffed too: "removed"), from
    the stack files themselves (`stacks/Pulumi.<stack>.yaml`): what CI diffs, never a hand-written list."""
    from verify.plan import known_stacks

    # `<ref> stacks/`: nothing (not an error) when BASE has no stacks/ yet; an unknown ref fails.
    listed = subprocess.run(["git", "ls-tree", "--name-only", base, "stacks/"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.split()
    names = [Path(path).name for path in listed]
    at_base = [name[len("Pulumi."):-len(".yaml")] for name in names
               if name.startswith("Pulumi.") and name.endswith(".yaml")]
    return sorted(set(known_stacks(root)) | set(at_base))


def plan_tree(tree: Path, stack: str, out: Path) -> dict[str, Any] | None:
    """Plan `stack` with the code in `tree`; None if the stack doesn't exist there. The document is the plan's
    `resources.json` with `cluster` (cluster.yaml's objects) and `placements` (from simulation.json) when the
    planner wrote them."""
    if not (tree / "stacks" / f"Pulumi.{stack}.yaml").exists():
        return None
    # Refs from before the tools/ package kept the planner at gtp/plan.py.
    module = "tools.plan" if (tree / "tools" / "plan.py").exists() else "gtp.plan"
    result = subprocess.run([sys.executable, "-m", module, "--stack", stack, "--out", str(out), "--quiet"],
                            cwd=tree, capture_output=True, text=True, check=False)
    path = out / stack / "resources.json"
    if not path.exists():  # validation failures still write the plan; config errors don't
        raise RuntimeError(f"planning {stack} in {tree} failed:\n{result.stderr.strip()}")
    plan = json.loads(path.read_text())
    if (out / stack / "cluster.yaml").exists():
        from verify import render as cluster

        plan["cluster"] = cluster.load((out / stack / "cluster.yaml").read_text())
    if (out / stack / "simulation.json").exists():
        plan["placements"] = placements(json.loads((out / stack / "simulation.json").read_text()))
    plan["cost"] = cost.read(out / stack)  # the $/h at min and max size (verify/cost.py), for cost_section
    if result.returncode:  # invalid objects or policy violations: the planner lists them as "  - ..." lines
        plan["violations"] = [line.strip()[2:] for line in result.stderr.splitlines()
                              if line.startswith("  - ")] or [result.stderr.strip().splitlines()[-1]]
    return plan


def base_plan(tree: str, base: str, stack: str, scratch: Path) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """`stack`'s plan document at BASE and BASE's provider pins: planned once per git tree and tool set, then read
    from the plan cache (verify/plan_cache.py `tree_key`), so a PR's base is planned once, not on every diff. On a
    miss BASE is checked out in a temporary `git worktree` and planned with its own code."""
    from verify import plan_cache
    from verify import render as cluster

    digest = plan_cache.tree_key(tree, stack)
    found, stored = plan_cache.load_document(digest)
    if found:
        print(f"plan-diff: {stack} at {base}: planned before (tree {tree[:12]}), read from the plan cache",
              file=sys.stderr, flush=True)
        plan = stored["plan"]
        if plan is not None and "cluster" in plan:  # stored as cluster.yaml's text, read back as plan_tree does
            plan["cluster"] = cluster.load(plan["cluster"])
        return plan, stored["pins"]
    worktree = scratch / "base"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(worktree), base], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    try:
        plan = plan_tree(worktree, stack, scratch / "base-plan")
        pins = provider_pins(worktree)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False,
                       capture_output=True)
    stored_plan = plan if plan is None or "cluster" not in plan else {**plan, "cluster": cluster.dump(plan["cluster"])}
    plan_cache.store_document(digest, {"plan": stored_plan, "pins": pins})
    return plan, pins


def _progress(stack: str, where: str, plan: Mapping[str, Any] | None, started: float) -> None:
    """The one line per plan on stderr (a plan takes seconds to a minute: never a silent terminal)."""
    if plan is None:
        what = "no such stack"
    else:
        what = f"{len(plan.get('resources', []))} resources"
        if "cluster" in plan:
            what += f", {len(plan['cluster'])} cluster objects"
    print(f"plan-diff: {stack} at {where}: {what} in {time.perf_counter() - started:.1f} s", file=sys.stderr,
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan_diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", help="the stack to diff (required unless --list-stacks)")
    parser.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main or HEAD~1")
    parser.add_argument("--format", choices=FORMATS, default="plain",
                        help="plain text (default, for a terminal), markdown, or json (what the PR comment reads: "
                             "verify/pr_comment.py)")
    parser.add_argument("--list-stacks", action="store_true",
                        help="print the stacks to diff (the working tree's and BASE's stack files), one a line")
    args = parser.parse_args(argv)
    from verify.plan import known_stacks

    if args.list_stacks:
        try:
            print("\n".join(stacks_to_diff(args.base)))
        except subprocess.CalledProcessError as error:
            print(f"error: can't read stacks/ at {args.base!r}: {error.stderr.strip()}", file=sys.stderr)
            return 2
        return 0
    if not args.stack:
        parser.error("--stack is required (or --list-stacks)")

    try:
        tree = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{tree}}"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except subprocess.CalledProcessError:
        print(f"error: can't check out {args.base!r}: not a commit of this repository", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gtp-plan-diff-") as tmp:
        try:
            started = time.perf_counter()
            base, base_pins = base_plan(tree, args.base, args.stack, Path(tmp))
            _progress(args.stack, args.base, base, started)
            started = time.perf_counter()
            head = plan_tree(ROOT, args.stack, Path(tmp) / "head-plan")
            _progress(args.stack, "the working tree", head, started)
        except (RuntimeError, subprocess.CalledProcessError) as error:
            print(f"error: {getattr(error, 'stderr', None) or error}", file=sys.stderr)
            return 1
    providers = pin_changes(base_pins, provider_pins(ROOT))
    if head is None and base is None:
        print(f"error: no stack {args.stack!r} at {args.base} or in the working tree "
              f"(stacks: {', '.join(known_stacks(ROOT))})", file=sys.stderr)
        return 2
    if head is None:
        removed = f"stack {args.stack}: removed in the working tree"
        print(_json(removed, []) if args.format == "json" else removed)
        return 0
    print(diff_plans(base, head, providers, args.format))
    return 1 if head.get("violations") else 0
