"""A picture of a stack: `make plan` writes `build/plan/<stack>/overview.svg`, drawn by Graphviz's `dot`.

What it shows: the node groups (instance types × min..max nodes, GPUs per node, how they are shared, $/h per node
and in all), Kueue's ClusterQueues with each flavor's quota and the node group it stands for, the workloads and where
they land (their node group, their queue), and the shared storage they mount, and the stack's $/h with its fixed
charges. Built from the stack's parsed config, its cost document (verify/cost.py) and its rendered cluster
(cluster.yaml's Kueue objects), never from a running cluster.

Graphviz is a Debian package (`apt-get install graphviz`); without it the plan writes no SVG and says so in one line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import cluster_targets
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from verify import cost
from verify.plan_record import Plan
from verify.render import ClusterObject

SVG_NAME = "overview.svg"
NODE_GROUP_LABEL = "gtp.dev/node-group"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
COLOURS = {"group": "#dbeafe", "system": "#e5e7eb", "queue": "#fef3c7", "workload": "#dcfce7", "storage": "#fce7f3",
           "cost": "#f3f4f6"}
FONT_SIZE = 10
"""The boxes' font size, in points (SVG user units: dot writes 1 pt as 1 unit)."""

# Each character's advance width in thousandths of an em: DejaVu Sans, which is what Chromium draws the SVG's
# `Helvetica,sans-Serif` with on Debian (fontconfig's answer when no Helvetica is installed), measured there with
# getComputedTextLength() and rounded up. Helvetica, Arial and Liberation Sans are narrower, so a box sized by this
# table holds its text in the fonts browsers have. An upper bound held to Chromium by tests/test_overview.py (the
# one oracle); a character not listed counts as a full em, the widest listed. dot writes a line's leading spaces as
# no-break spaces (U+00A0), the width of a space.
_WIDTHS = {
    275: "'", 278: "ijl", 295: "IJ", 318: " \u00a0,.·", 337: "/:;\\|", 353: "f", 361: "-", 391: "()[]", 393: "t",
    401: "!", 412: "r", 460: '"', 500: "*_`–°", 521: "s", 525: "z", 531: "?", 550: "c", 558: "L", 576: "F",
    580: "k", 592: "vxy", 604: "P", 611: "TY", 612: "o", 613: "a", 616: "e", 632: "E", 634: "hnu",
    635: "Sbdgpq", 637: "0123456789${}µ", 656: "K", 685: "AV", 686: "XZ", 687: "B", 695: "R", 699: "C",
    732: "U", 749: "N", 752: "H", 771: "D", 775: "G", 780: "&", 788: "OQ", 818: "w", 838: "#+<=>^~×→≤≥±✓",
    863: "M", 951: "%", 975: "m", 989: "W", 1000: "@—…",
}
CHARACTER_WIDTHS = {character: width / 1000 for width, characters in _WIDTHS.items() for character in characters}
"""Character → its advance width in ems (an upper bound, see `_WIDTHS`)."""
ASCENT, DESCENT = 0.93, 0.25
"""How far a line's glyph box reaches above and below its baseline, in ems (Chromium's box of DejaVu Sans:
0.928 and 0.25)."""
MARGIN = 8
"""Points between a box's side and its text: dot's default node margin, 0.11 in (7.92 pt)."""


def text_width(text: str, font_size: float = FONT_SIZE) -> float:
    """An upper bound of `text`'s width drawn at `font_size` (points), from `CHARACTER_WIDTHS`."""
    return font_size * sum(CHARACTER_WIDTHS.get(character, 1.0) for character in text)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(*lines: str) -> str:
    # Left-justified lines (`\l`): the first is the name, alone, so the SVG names it as one <text> element.
    return '"' + "".join(line.replace("\\", "\\\\").replace('"', '\\"') + "\\l" for line in lines) + '"'


def box_width(lines: Iterable[str]) -> float:
    """The width in points a box needs for `lines` by `text_width`. dot sizes a box by its own measure of the text,
    made with whatever font its host has, not the browser's: the box is declared this wide instead. Left-justified
    lines start at the box's side plus the margin however wide dot thought them (a box's label spans the box,
    graphviz lib/common/shapes.c poly_init), so they end inside it."""
    return max(text_width(line) for line in lines) + 2 * MARGIN + 1


def _node(identifier: str, lines: Iterable[str], colour: str) -> str:
    lines = list(lines)
    return (f'    {_quote(identifier)} [label={_label(*lines)}, fillcolor="{colour}", '
            f'width={box_width(lines) / 72:.3f}];')


def _sharing(config: Any, group: Any) -> str:
    sharing = getattr(group, "sharing", None) or getattr(getattr(config, "gpu", None), "sharing", None)
    if sharing is None or sharing.mode == "none":
        mig = getattr(group, "mig_strategy", "none")
        return "whole GPUs" + (f", MIG {mig}" if mig != "none" else "")
    return f"{sharing.mode} × {sharing.replicas} per GPU"


def _gpus(group: Any) -> str:
    types = [GPU_INSTANCE_TYPES[name] for name in group.instance_types if name in GPU_INSTANCE_TYPES]
    count = group.gpus_per_node or (min(t.num_gpus for t in types) if types else 0)
    model = group.gpu_model or (types[0].gpu_model if types else "GPU")
    return f"{count}× {model} per node" if count else "GPUs: as the site's nodes have them"


def price_line(group: Mapping[str, Any], priced: Mapping[str, Any]) -> str:
    """A node group's price as `verify.cost` has it: one node's on-demand $/h (of its dearest type when it has
    several) times its min..max nodes, `spot ≤` that, or billed by its reservation."""
    currency = priced["currency"]
    if group["hourly"] is None:
        where = group["pricesOf"] or priced["region"]
        return f"no on-demand price for {group['pricedType']} in {where}"
    per_node = f"{cost.unit_price(group['hourly'], currency)} per node"
    if len(group["instanceTypes"]) > 1:
        per_node += f" ({group['pricedType']})"
    elsewhere = f" ({group['pricesOf']} price)" if group["pricesOf"] != priced["region"] else ""
    if group["purchase"] == "reserved":
        return f"reserved: billed by the reservation; on-demand {per_node}{elsewhere}"
    in_all = f"{cost.money(group['atMin'], currency)}..{cost.money(group['atMax'], currency)}/h{elsewhere}"
    if group["purchase"] == "spot":
        return f"spot ≤ {per_node} × {group['minSize']}..{group['maxSize']} ≤ {in_all}"
    return f"{per_node} × {group['minSize']}..{group['maxSize']} = {in_all}"


def cost_lines(priced: Mapping[str, Any]) -> list[str] | None:
    """The stack's $/h at its groups' min and max sizes, nodes and fixed charges, each fixed charge or why it is not
    counted (`verify.cost.stack_cost`); None for a stack on your own servers."""
    if not priced["priced"]:
        return None
    currency = priced["currency"]

    def total(at: str, key: str) -> str:
        return ("≤ " if priced[f"spotAt{at}"] else "") + cost.money(priced[f"{key}{at}"], currency)

    lines = ["cost", f"{total('Min', 'totalAt')}..{total('Max', 'totalAt')}/h at min..max size",
             f"nodes {total('Min', 'at')}..{total('Max', 'at')}/h + fixed "
             f"{cost.unit_price(priced['fixedHourly'], currency)}"]
    if priced["reservedAtMax"] is not None:
        lines.append(f"+ reserved, on-demand {cost.money(priced['reservedAtMin'], currency)}.."
                     f"{cost.money(priced['reservedAtMax'], currency)}/h")
    for item in priced["fixed"]:
        count = f"{item['count']} " if item.get("unit") == "hour" and item["count"] > 1 else ""
        shown = f"{count}{item['what']}"
        lines.append(f"{shown}: not counted" if item["hourly"] is None
                     else f"{shown} {cost.unit_price(item['hourly'], currency)}")
    return lines


def node_group_lines(config: Any, priced: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """Node group name → its label lines (the EKS system group first, as `system`), with its price when the cost
    document `priced` (`verify.cost.stack_cost`) has one."""
    groups: dict[str, list[str]] = {}
    cluster = config.cluster
    if cluster_targets.for_config(config).provisions_in_aws:
        system = cluster.system_node_group
        groups["system"] = ["system", f"{' | '.join(system.instance_types)} × {system.min_size}..{system.max_size}",
                            "CPU: operators, add-ons"]
    for name, group in sorted(config.gpu_node_groups.items()):
        types = " | ".join(group.instance_types) or "the site's nodes"
        capacity = getattr(group, "capacity_type", "ON_DEMAND")
        groups[name] = [name, f"{types} × {group.min_size}..{group.max_size}"
                        + (f" ({capacity.lower().replace('_', ' ')})" if group.instance_types else "")
                        + (f", reserved {group.capacity_reservation_id}" if group.capacity_reservation_id else ""),
                        _gpus(group), _sharing(config, group)]
    if priced and priced["priced"]:
        for group in priced["groups"]:
            if group["name"] in groups:
                groups[group["name"]].append(price_line(group, priced))
    return groups


def workload_lines(name: str, workload: Any, scaling: Iterable[str] = ()) -> list[str]:
    """A workload's label lines; `scaling`: what KEDA scales it on (`keda_lines`)."""
    scale = (f"{workload.elastic.min_nodes}..{workload.elastic.max_nodes} nodes" if workload.elastic
             else f"{workload.num_nodes} node(s)")
    gpus = f"{workload.gpus_per_node} GPU(s) per node" if workload.gpus_per_node else "every GPU of its nodes"
    shared = ", shared GPUs" if workload.gpu_resource == "shared" else ""
    return [name, f"{workload.kind}: {scale}, {gpus}{shared}", *scaling]


SCALED_UNITS = {"PyTorchJob": "workers"}
"""A ScaledObject target's kind → what its `/scale` subresource counts (PyTorchJob's: Worker replicas)."""


def _trigger(trigger: Mapping[str, Any], per: str) -> str:
    """One KEDA trigger as its rendered metadata says: `avg DCGM_FI_DEV_GPU_UTIL > 85`, `SQS queue, a job per
    message`, else its type."""
    metadata = trigger.get("metadata") or {}
    if trigger.get("type") == "prometheus":
        query = str(metadata.get("query", ""))
        metric = re.search(r"[A-Za-z_:][A-Za-z0-9_:]*(?=\s*\{)", query)
        aggregation = re.match(r"\s*(\w+)\s*\(", query)
        shown = " ".join(filter(None, [aggregation and aggregation[1], metric[0] if metric else query]))
        # KEDA's default metricType for prometheus is AverageValue: the value is divided by the replica count.
        average = trigger.get("metricType", "AverageValue") == "AverageValue"
        return f"{shown} > {metadata.get('threshold')}" + (f" per {per.removesuffix('s')}" if average else "")
    if trigger.get("type") == "aws-sqs-queue":
        length = str(metadata.get("queueLength", "5"))  # KEDA's default (keda-docs scalers/aws-sqs.md)
        return f"SQS queue, a {per.removesuffix('s')} per {'message' if length == '1' else length + ' messages'}"
    return f"{trigger.get('type')} trigger"


def keda_lines(objects: Iterable[ClusterObject]) -> dict[str, list[str]]:
    """Workload object name → what KEDA scales it on, read from its rendered ScaledJob (named as the workload) or
    ScaledObject (targeting it): `KEDA: SQS queue, a job per message → 0..4 jobs`."""
    found: dict[str, list[str]] = {}
    for item in objects:
        spec = item.obj.get("spec") or {}
        if item.kind == "ScaledJob":
            target, per, never_in = item.name, "jobs", False
        elif item.kind == "ScaledObject":
            reference = spec.get("scaleTargetRef") or {}
            target, per = str(reference.get("name")), SCALED_UNITS.get(str(reference.get("kind")), "replicas")
            behavior = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior") or {}
            never_in = (behavior.get("scaleDown") or {}).get("selectPolicy") == "Disabled"
        else:
            continue
        # KEDA's defaults when unset: minReplicaCount 0, maxReplicaCount 100.
        replicas = f"{spec.get('minReplicaCount', 0)}..{spec.get('maxReplicaCount', 100)} {per}"
        triggers = " or ".join(_trigger(trigger, per) for trigger in spec.get("triggers") or [])
        found.setdefault(target, []).append(f"KEDA: {triggers} → {replicas}" + (", never scaled in" if never_in
                                                                               else ""))
    return found


def queues(objects: Iterable[ClusterObject]) -> tuple[dict[str, list[str]], dict[str, set[str]], dict[str, str]]:
    """ClusterQueue → label lines; ClusterQueue → the node groups of its flavors; `<namespace>/<LocalQueue>` →
    its ClusterQueue."""
    flavors: dict[str, str] = {}
    cluster_queues: dict[str, Mapping[str, Any]] = {}
    local: dict[str, str] = {}
    for item in objects:
        body, kind = item.obj, item.obj.get("kind")
        metadata = body.get("metadata") or {}
        if kind == "ResourceFlavor":
            group = ((body.get("spec") or {}).get("nodeLabels") or {}).get(NODE_GROUP_LABEL)
            flavors[metadata.get("name", "")] = group or ""
        elif kind == "ClusterQueue":
            cluster_queues[metadata.get("name", "")] = body.get("spec") or {}
        elif kind == "LocalQueue":
            local[f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"] = str(
                (body.get("spec") or {}).get("clusterQueue", ""))
    lines: dict[str, list[str]] = {}
    groups: dict[str, set[str]] = {}
    for name, spec in sorted(cluster_queues.items()):
        lines[name] = [name, "Kueue ClusterQueue"]
        groups[name] = set()
        for resource_group in spec.get("resourceGroups") or []:
            for flavor in resource_group.get("flavors") or []:
                # Accelerators (GPUs, EFA) on one line, cpu/memory/disk on the next: a line per flavor is too wide.
                quotas = [(str(r["name"]), r.get("nominalQuota")) for r in flavor.get("resources") or []]
                devices = [f"{key} {value}" for key, value in quotas if "/" in key]
                basics = [f"{key} {value}" for key, value in quotas if "/" not in key]
                lines[name].append(f"flavor {flavor.get('name')}: {', '.join(devices) or 'no accelerators'}")
                if basics:
                    lines[name].append(f"    {', '.join(basics)}")
                if flavors.get(flavor.get("name", "")):
                    groups[name].add(flavors[flavor["name"]])
    return lines, groups, local


def _workload_queue(objects: Iterable[ClusterObject], local: Mapping[str, str]) -> dict[str, str]:
    """Workload object name → the ClusterQueue its queue label names."""
    found = {}
    for item in objects:
        metadata = item.obj.get("metadata") or {}
        queue = (metadata.get("labels") or {}).get(QUEUE_LABEL)
        if queue and f"{metadata.get('namespace', '')}/{queue}" in local:
            found[str(metadata.get("name"))] = local[f"{metadata.get('namespace', '')}/{queue}"]
    return found


def storage_lines(config: Any) -> list[str] | None:
    storage = config.storage
    if storage.kind == "none":
        return None
    where = {"nfs": f"{storage.nfs_server}:{storage.nfs_path}", "host-path": str(storage.host_path),
             "existing": f"StorageClass {storage.existing_storage_class}"}.get(storage.kind, f"{storage.size_gib} GiB")
    return ["storage", f"{storage.kind}: {where}", f"mounted at {storage.mount_path}"]


def overview_dot(plan: Plan, objects: list[ClusterObject]) -> str:
    """The stack's overview as a Graphviz DOT document (pure: no Graphviz needed)."""
    config = plan.config
    out = [f"digraph {_quote(plan.stack)} {{",
           f'    graph [rankdir=LR, fontname="Helvetica", fontsize=12, label={_quote(f"stack {plan.stack}")}, '
           'labelloc=t, nodesep=0.3, ranksep=0.8];',
           '    node [shape=box, style="rounded,filled", fontname="Helvetica", '
           f'fontsize={FONT_SIZE}, margin="{MARGIN / 72:.3f},0.055"];',
           '    edge [fontname="Helvetica", fontsize=9, color="#555555"];']
    priced = cost.stack_cost(config)
    groups = node_group_lines(config, priced)
    costs = cost_lines(priced)
    cluster_queues, queue_groups, local = queues(objects)
    storage = storage_lines(config)
    by_object = _workload_queue(objects, local)

    def subgraph(name: str, title: str, nodes: list[str]) -> None:
        if nodes:
            out.extend([f"  subgraph {_quote('cluster_' + name)} {{", f"    label={_quote(title)}; style=dashed;",
                        *nodes, "  }"])

    scaled = keda_lines(objects)
    subgraph("workloads", "workloads", [_node(f"workload/{name}",
                                              workload_lines(name, workload, scaled.get(workload.name or name, ())),
                                              COLOURS["workload"])
                                        for name, workload in sorted(config.workloads.items())])
    subgraph("queues", "queues and quotas", [_node(f"queue/{name}", lines, COLOURS["queue"])
                                            for name, lines in cluster_queues.items()])
    subgraph("nodes", "node groups", [_node(f"group/{name}", lines,
                                            COLOURS["group" if name in config.gpu_node_groups else "system"])
                                      for name, lines in groups.items()])
    if storage:
        out.append(_node("storage", storage, COLOURS["storage"]))
    if costs:
        out.append(_node("cost", costs, COLOURS["cost"]))
    for name, workload in sorted(config.workloads.items()):
        if workload.node_group in groups:
            out.append(f'    {_quote("workload/" + name)} -> {_quote("group/" + workload.node_group)} '
                       '[label="runs on"];')
        queue = by_object.get(workload.name or name) or by_object.get(name)
        if queue in cluster_queues:
            out.append(f'    {_quote("workload/" + name)} -> {_quote("queue/" + queue)} [label="queued in", '
                       'style=dashed];')
        if storage and getattr(workload, "checkpoints", "keep") != "none":
            out.append(f'    {_quote("workload/" + name)} -> "storage" [label="checkpoints", style=dotted];')
    for queue in cluster_queues:
        for group in sorted(queue_groups.get(queue, ())):
            if group in groups:
                out.append(f'    {_quote("queue/" + queue)} -> {_quote("group/" + group)} [label="flavor", '
                           'style=dashed];')
    out.append("}")
    return "\n".join(out) + "\n"


def render_svg(dot_text: str, *, dot: str = "dot", timeout_s: float = 30) -> bytes:
    """The SVG `dot -Tsvg` draws; FileNotFoundError when Graphviz is missing, RuntimeError when dot fails."""
    binary = shutil.which(dot)
    if binary is None:
        raise FileNotFoundError(2, "not found", dot)
    done = subprocess.run([binary, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout_s,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dot exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[-500:]}")
    return done.stdout


class Drawing:
    """`dot` drawing overview.svg in the background (the plan validates meanwhile); `finish()` waits for it."""

    def __init__(self, plan: Plan, objects: list[ClusterObject], directory: Path, *, dot: str = "dot") -> None:
        self.started = time.perf_counter()
        self.target = directory / SVG_NAME
        self.partial = directory / (SVG_NAME + ".partial")
        source = directory / "overview.dot"
        source.write_text(overview_dot(plan, objects))
        self.target.unlink(missing_ok=True)  # a stale picture would contradict the plan
        binary = shutil.which(dot)
        self.process = None if binary is None else subprocess.Popen(
            [binary, "-Tsvg", "-o", str(self.partial), str(source)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def finish(self, timeout_s: float = 30) -> str:
        """The one progress line: the SVG written, or why not (the plan never fails for its picture)."""
        if self.process is None:
            return (f"{SVG_NAME}: not drawn: Graphviz's `dot` is not installed (sudo apt-get install graphviz); "
                    "overview.dot written")
        waited = time.perf_counter()
        try:
            _, errors = self.process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            return f"{SVG_NAME}: not drawn: dot took over {timeout_s:.0f} s"
        if self.process.returncode != 0:
            self.partial.unlink(missing_ok=True)
            message = errors.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return f"{SVG_NAME}: not drawn: dot exited {self.process.returncode}: {message[0]}"
        self.partial.replace(self.target)
        # What the picture added to the plan: dot ran while the plan was validated, so only the wait counts.
        return (f"{SVG_NAME} in {time.perf_counter() - self.started:.2f} s, "
                f"{(time.perf_counter() - waited) * 1000:.0f} ms of it waited for")


def write(plan: Plan, objects: list[ClusterObject], directory: Path, *, dot: str = "dot") -> str:
    """Write `overview.svg` (and `overview.dot`) into `directory` and wait for it; the one line saying what happened.
    Never fails: without Graphviz the line says what to install and no SVG is written."""
    return Drawing(plan, objects, directory, dot=dot).finish()
