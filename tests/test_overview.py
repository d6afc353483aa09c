"""The stack picture `make plan` draws (verify/overview.py): a real Graphviz SVG for every committed stack, naming
every node group and workload, and looked at in a real headless Chromium (a screenshot that is not blank and shows
the node groups' colour; every text measured by Chromium's layout inside its box, which holds the width table the
fast tier checks the same boxes with).

Needs Graphviz's `dot` and `chromium` (Debian packages `graphviz`, `chromium`): `make test` installs them as root
(tools.system_packages).
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ElementTree
import zlib
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from components import keda_scaling
from tests.conftest import plan_stack, plan_variant
from verify import cost, overview
from verify import render as cluster
from verify.plan import ROOT, known_stacks

STACKS = known_stacks(ROOT)
SVG = "{http://www.w3.org/2000/svg}"
MAX_WINDOW = (4000, 3000)


def _need(binary: str, package: str) -> str:
    found = shutil.which(binary)
    if found is None:
        pytest.fail(f"`{binary}` is missing: `make test` installs it as root (tools.system_packages), else "
                    f"`sudo apt-get install {package}`")
    return found


@cache
def _objects(stack: str) -> list[cluster.ClusterObject]:
    return cluster.render_cluster(plan_stack(stack))


@cache
def _svg(stack: str) -> bytes:
    _need("dot", "graphviz")
    return overview.render_svg(overview.overview_dot(plan_stack(stack), _objects(stack)))


def _texts(svg: bytes) -> list[str]:
    root = ElementTree.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [" ".join("".join(element.itertext()).split()) for element in root.iter(f"{SVG}text")]


@pytest.mark.parametrize("stack", STACKS)
def test_the_svg_parses_and_names_every_node_group_and_workload(stack):
    config = plan_stack(stack).config
    texts = _texts(_svg(stack))
    expected = [*config.gpu_node_groups, *config.workloads]
    if config.cluster.mode == "eks":
        expected.append("system")
    assert expected and [name for name in expected if name not in texts] == [], texts
    for name, group in config.gpu_node_groups.items():
        size = f"× {group.min_size}..{group.max_size}"
        assert any(size in text and all(t in text for t in group.instance_types) for text in texts), (name, texts)
    if config.storage.kind != "none":
        assert "storage" in texts and any(config.storage.mount_path in text for text in texts)


def test_every_kueue_cluster_queue_is_drawn_with_its_quotas():
    drawn = 0
    for stack in STACKS:
        texts = _texts(_svg(stack))
        for item in _objects(stack):
            if item.obj.get("kind") == "ClusterQueue":
                assert item.obj["metadata"]["name"] in texts
                flavors = [f["name"] for group in item.obj["spec"]["resourceGroups"] for f in group["flavors"]]
                assert all(any(f"flavor {flavor}:" in text for text in texts) for flavor in flavors), texts
                drawn += 1
    assert drawn >= 2  # dev and prod queue through Kueue


def test_workloads_point_at_their_node_group_and_queue():
    plan = plan_stack("prod")
    text = overview.overview_dot(plan, _objects("prod"))
    for name, workload in plan.config.workloads.items():
        assert f'"workload/{name}" -> "group/{workload.node_group}" [label="runs on"]' in text
        assert f'"workload/{name}" -> "queue/gtp-prod"' in text


def test_without_graphviz_the_plan_writes_no_svg_and_says_so_in_one_line(tmp_path):
    (tmp_path / overview.SVG_NAME).write_text("stale")
    line = overview.write(plan_stack("dev"), _objects("dev"), tmp_path, dot="no-such-dot-binary")
    assert "\n" not in line and "apt-get install graphviz" in line
    assert not (tmp_path / overview.SVG_NAME).exists() and (tmp_path / "overview.dot").is_file()


def test_drawing_costs_well_under_100_ms_per_stack(tmp_path):
    _need("dot", "graphviz")
    for stack in STACKS:
        best = min(_timed(stack, tmp_path) for _ in range(3))
        # Budget 100 ms per stack (the plan-all benchmark); ~15-40 ms of CPU measured, best of three.
        assert best < 0.1, f"{stack}: {best * 1000:.0f} ms"


def _timed(stack: str, directory: Path) -> float:
    """CPU seconds of this process and of `dot` (wall time on a shared 2-core CI machine measures the neighbours)."""
    def spent() -> float:
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    started = spent()
    assert overview.write(plan_stack(stack), _objects(stack), directory).startswith(overview.SVG_NAME + " in ")
    return spent() - started


def _boxes(svg: bytes) -> dict[str, list[str]]:
    """Each node's DOT name → its lines, as the SVG draws them."""
    return {group.findtext(f"{SVG}title", ""): [" ".join("".join(text.itertext()).split())
                                               for text in group.findall(f"{SVG}text")]
            for group in ElementTree.fromstring(svg).iter(f"{SVG}g") if group.get("class") == "node"}


@pytest.mark.parametrize("stack", STACKS)
def test_each_node_group_shows_its_price_per_node_and_in_all_from_the_cost_document(stack):
    priced = cost.stack_cost(plan_stack(stack).config)
    boxes = _boxes(_svg(stack))
    if not priced["priced"]:  # an existing cluster or a Swarm: your own servers
        assert not any("/h" in line for lines in boxes.values() for line in lines), boxes
        return
    for group in priced["groups"]:
        lines = boxes[f"group/{group['name']}"]
        per_node = f"{cost.unit_price(group['hourly'], priced['currency'])} per node"
        assert any(per_node in line for line in lines), (per_node, lines)
        if group["purchase"] == "reserved":
            assert any("billed by the reservation" in line for line in lines), lines
        else:
            currency = priced["currency"]
            in_all = f"{cost.money(group['atMin'], currency)}..{cost.money(group['atMax'], currency)}/h"
            assert any(in_all in line and f"{group['minSize']}..{group['maxSize']}" in line for line in lines), lines
        assert any("spot" in line for line in lines) == (group["purchase"] == "spot"), lines


@pytest.mark.parametrize("stack", STACKS)
def test_the_cost_box_shows_the_stacks_total_and_each_fixed_charge(stack):
    priced = cost.stack_cost(plan_stack(stack).config)
    boxes = _boxes(_svg(stack))
    if not priced["priced"]:
        assert "cost" not in boxes
        return
    currency, lines = priced["currency"], boxes["cost"]
    total = f"{cost.money(priced['totalAtMin'], currency)}..{cost.money(priced['totalAtMax'], currency)}/h"
    assert any(total in line.replace("≤ ", "") for line in lines), (total, lines)
    for item in priced["fixed"]:
        if item["hourly"] is None:
            assert any(item["what"] in line and "not counted" in line for line in lines), (item["what"], lines)
        else:
            shown = f"{item['what']} {cost.unit_price(item['hourly'], currency)}"
            assert any(shown in line for line in lines), (shown, lines)


# --- what scales a workload: the trigger of its rendered ScaledJob or ScaledObject -----------------------------------
def _scaled(stack: str, kind: str) -> tuple[str, cluster.ClusterObject]:
    """(the workload's config name, its rendered KEDA object of `kind`)."""
    plan = plan_stack(stack)
    found = next(item for item in _objects(stack) if item.kind == kind)
    target = found.name if kind == "ScaledJob" else found.obj["spec"]["scaleTargetRef"]["name"]
    return next(name for name, workload in plan.config.workloads.items() if (workload.name or name) == target), found


def _replaced(objects: list[cluster.ClusterObject], old: cluster.ClusterObject, body: dict) -> list:
    return [item for item in objects if item is not old] + [cluster.ClusterObject(old.source, body)]


def test_a_scaled_job_shows_its_sqs_trigger_and_job_range():
    name, scaled = _scaled("dev", "ScaledJob")
    spec = scaled.obj["spec"]
    assert spec["triggers"][0]["metadata"]["queueLength"] == "1"
    assert (f"KEDA: SQS queue, a job per message → {spec['minReplicaCount']}..{spec['maxReplicaCount']} jobs"
            in _boxes(_svg("dev"))[f"workload/{name}"])


def test_the_trigger_is_read_from_the_rendered_scaled_job_not_the_config():
    _, scaled = _scaled("dev", "ScaledJob")
    body = copy.deepcopy(scaled.obj)
    body["spec"]["maxReplicaCount"] = 9
    body["spec"]["triggers"][0]["metadata"]["queueLength"] = "3"
    text = overview.overview_dot(plan_stack("dev"), _replaced(_objects("dev"), scaled, body))
    assert "KEDA: SQS queue, a job per 3 messages → 0..9 jobs" in text


def test_a_scaled_object_shows_its_prometheus_metric_threshold_and_worker_range():
    """prod's pre-training with the ScaledObject components/keda_scaling.py builds for it, beside its PyTorchJob."""
    plan = plan_stack("prod")
    job = next(item for item in _objects("prod") if item.kind == "PyTorchJob")
    body = keda_scaling.scaled_object_body(
        job_name=job.name, namespace=str(job.namespace), prometheus_url="http://prometheus:80",
        scale_target={"apiVersion": job.obj["apiVersion"], "kind": "PyTorchJob", "name": job.name},
        min_replicas=2, max_replicas=4, threshold=85, polling_interval=30, cooldown_period=300)
    text = overview.overview_dot(plan, [*_objects("prod"), cluster.ClusterObject("stack", body)])
    name = next(name for name, workload in plan.config.workloads.items() if (workload.name or name) == job.name)
    line = "KEDA: avg DCGM_FI_DEV_GPU_UTIL > 85 → 2..4 workers, never scaled in"
    assert f"{line}\\l" in next(row for row in text.splitlines() if row.startswith(f'    "workload/{name}" ['))


@pytest.mark.program
def test_the_keda_variant_of_prod_shows_its_scaled_objects_trigger():
    plan = plan_variant("prod-keda")
    objects = cluster.render_cluster(plan)
    scaled = next(item for item in objects if item.kind == "ScaledObject")
    _need("dot", "graphviz")
    boxes = _boxes(overview.render_svg(overview.overview_dot(plan, objects)))
    threshold, spec = scaled.obj["spec"]["triggers"][0]["metadata"]["threshold"], scaled.obj["spec"]
    assert (f"KEDA: avg DCGM_FI_DEV_GPU_UTIL > {threshold} → {spec['minReplicaCount']}..{spec['maxReplicaCount']} "
            "workers, never scaled in") in boxes["workload/gpt-pretrain"]


# --- text inside its boxes, by the width table (the fast check; Chromium holds the table, below) ------------------
def _shape_bounds(group: ElementTree.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a node's, cluster's or the picture's own shape (a path or a polygon)."""
    shape = next(child for child in group if child.tag in (f"{SVG}path", f"{SVG}polygon"))
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", shape.get("d") or shape.get("points", ""))]
    xs, ys = numbers[0::2], numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def _outside_by_table(svg: bytes) -> list[str]:
    """`<group>: "<text>" by N pt` for each text of a node, a cluster or the title whose extent by
    `overview.text_width` (and the font's ascent and descent) leaves its shape's box."""
    misses = []
    for group in ElementTree.fromstring(svg).iter(f"{SVG}g"):
        if group.get("class") not in ("node", "cluster", "graph"):
            continue
        shape_left, shape_top, shape_right, shape_bottom = _shape_bounds(group)
        for text in group.findall(f"{SVG}text"):
            content, size = "".join(text.itertext()), float(text.get("font-size", "0"))
            width, x, y = overview.text_width(content, size), float(text.get("x", "0")), float(text.get("y", "0"))
            left = x - {"start": 0, "middle": width / 2, "end": width}[text.get("text-anchor", "start")]
            by = max(shape_left - left, left + width - shape_right, shape_top - (y - overview.ASCENT * size),
                     y + overview.DESCENT * size - shape_bottom)
            if by > 0:
                misses.append(f"{group.findtext(f'{SVG}title')}: {content!r} by {by:.1f} pt")
    return misses


@pytest.mark.parametrize("stack", STACKS)
def test_every_text_fits_its_box_by_the_width_table(stack):
    assert _outside_by_table(_svg(stack)) == []


# --- the screenshot ------------------------------------------------------------------------------------------------
def _png_pixels(data: bytes) -> np.ndarray:
    """The RGB pixels (height × width × 3) of an 8-bit RGB/RGBA PNG, decoded with zlib and the PNG spec's five row
    filters (PNG 1.2, sections 4.1.1 and 6; numpy for speed, Average and Paeth rows byte by byte)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        chunks.setdefault(kind, []).append(data[position + 8:position + 8 + length])
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks[b"IDAT"])), dtype=np.uint8).reshape(height, -1)
    kinds, rows = raw[:, 0], raw[:, 1:].reshape(height, width, channels).astype(np.int32)
    out = np.zeros_like(rows)
    previous = np.zeros((width, channels), dtype=np.int32)
    for y in range(height):
        line, kind = rows[y], kinds[y]
        if kind == 0:
            out[y] = line
        elif kind == 1:
            out[y] = np.cumsum(line, axis=0) % 256
        elif kind == 2:
            out[y] = (line + previous) % 256
        else:  # Average, Paeth: each byte depends on the one decoded before it
            up, done = previous.reshape(-1).tolist(), [0] * (width * channels)
            for x, value in enumerate(line.reshape(-1).tolist()):
                left = done[x - channels] if x >= channels else 0
                corner = up[x - channels] if x >= channels else 0
                if kind == 3:
                    predictor = (left + up[x]) // 2
                else:
                    estimate = left + up[x] - corner
                    pa, pb, pc = abs(estimate - left), abs(estimate - up[x]), abs(estimate - corner)
                    predictor = left if pa <= pb and pa <= pc else up[x] if pb <= pc else corner
                done[x] = (value + predictor) & 0xFF
            out[y] = np.array(done, dtype=np.int32).reshape(width, channels)
        previous = out[y]
    return out[:, :, :3].astype(np.uint8)


def _window(svg: bytes) -> tuple[int, int]:
    """The SVG's own size in CSS pixels (dot writes points: 1pt = 4/3 px), capped: the whole picture in view."""
    root = ElementTree.fromstring(svg)
    width, height = (float(root.get(key, "0").removesuffix("pt")) * 4 / 3 for key in ("width", "height"))
    return min(MAX_WINDOW[0], int(width) + 40), min(MAX_WINDOW[1], int(height) + 40)


@pytest.mark.slow
@pytest.mark.parametrize("stack", STACKS)
def test_chromium_shows_the_picture(stack, tmp_path):
    browser = _need("chromium", "chromium")
    svg = tmp_path / "overview.svg"
    svg.write_bytes(_svg(stack))
    window = _window(svg.read_bytes())
    screenshot = tmp_path / "overview.png"
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={screenshot}", f"--window-size={window[0]},{window[1]}",
                           svg.as_uri()], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0 and screenshot.is_file(), done.stderr[-2000:]
    pixels = _png_pixels(screenshot.read_bytes())
    assert pixels.shape == (window[1], window[0], 3)
    drawn = int(np.any(pixels != 255, axis=2).sum())
    assert drawn > 0.01 * window[0] * window[1], f"only {drawn} non-white pixels: a blank page"
    # The GPU node groups' fill (verify/overview.COLOURS): the graph itself rendered, not an error page.
    fill = np.frombuffer(bytes.fromhex(overview.COLOURS["group"].lstrip("#")), dtype=np.uint8).astype(np.int32)
    near = int(np.all(np.abs(pixels.astype(np.int32) - fill) <= 3, axis=2).sum())
    assert near > 500, f"{near} pixels of the node groups' colour {overview.COLOURS['group']}"


# --- text inside its boxes, as Chromium lays it out ----------------------------------------------------------------
# Every <text> of the SVG measured by Chromium's own layout (`getBBox()`, the fonts this machine has for the SVG's
# font-family), beside the bounding box of the shape it belongs to: a node's rounded box, a cluster's dashed frame,
# the picture's background for the title and the edge labels. The page writes its answer into the DOM; `--dump-dom`
# prints it.
_MEASURE = r"""
const found = [];
for (const text of document.querySelectorAll('svg text')) {
  const group = text.closest('g.node, g.cluster, g.graph');
  const owner = text.closest('g.edge') ? text.closest('g.graph') : group;
  const shape = owner.querySelector(':scope > path, :scope > polygon');
  const t = text.getBBox(), s = shape.getBBox();
  found.push({text: text.textContent, group: owner.querySelector(':scope > title').textContent,
              box: [t.x, t.y, t.x + t.width, t.y + t.height], shape: [s.x, s.y, s.x + s.width, s.y + s.height]});
}
document.getElementById('measured').textContent = JSON.stringify(found);
"""


def _chromium_measures(svg: bytes, directory: Path) -> list[dict]:
    browser = _need("chromium", "chromium")
    inline = re.sub(rb"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>", b"", svg).decode()
    page = directory / "measure.html"
    page.write_text(f"<!DOCTYPE html><html><body>{inline}<pre id='measured'></pre>"
                    f"<script>{_MEASURE}</script></body></html>")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False, cwd=directory)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.DOTALL)
    assert done.returncode == 0 and found and found[1], done.stderr[-2000:]
    return json.loads(html.unescape(found[1]))


def _outside(measured: list[dict]) -> list[str]:
    """`<group>: "<text>" by N px` for each text whose box leaves its shape's."""
    misses = []
    for item in measured:
        (left, top, right, bottom), (shape_left, shape_top, shape_right, shape_bottom) = item["box"], item["shape"]
        by = max(shape_left - left, right - shape_right, shape_top - top, bottom - shape_bottom)
        if by > 0:
            misses.append(f"{item['group']}: {item['text']!r} by {by:.1f} px")
    return misses


def _bench_plan(directory: Path):
    """A bench stack as `tools.bench_stack` writes it from stacks/templates (created now, so not yet expired)."""
    from tools import bench_stack
    from verify import plan as gtp_plan

    taken = bench_stack.stack_vpc_cidrs(ROOT)
    path = directory / "Pulumi.bench-overview.yaml"
    path.write_text(bench_stack.render((ROOT / bench_stack.TEMPLATE).read_text(), 6, BENCH_IMAGE,
                                       datetime.now(UTC), bench_stack.bench_vpc_cidr("overview", taken)))
    return gtp_plan.run("bench-overview", stack_file=path)


BENCH_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "ab" * 32


@pytest.mark.slow
@pytest.mark.parametrize("stack", STACKS)
def test_chromium_keeps_every_text_inside_its_box(stack, tmp_path):
    measured = _chromium_measures(_svg(stack), tmp_path)
    assert len(measured) == len(_texts(_svg(stack)))
    assert _outside(measured) == []


@pytest.mark.slow
@pytest.mark.program
@pytest.mark.parametrize("variant", ["prod-keda", "bench"])
def test_chromium_keeps_every_text_inside_its_box_in_a_keda_and_a_bench_stack(variant, tmp_path):
    _need("dot", "graphviz")
    plan = _bench_plan(tmp_path) if variant == "bench" else plan_variant(variant)
    svg = overview.render_svg(overview.overview_dot(plan, cluster.render_cluster(plan)))
    assert _outside(_chromium_measures(svg, tmp_path)) == []


@pytest.mark.slow
def test_the_width_table_is_no_narrower_than_chromium(tmp_path):
    """Every character of `overview.CHARACTER_WIDTHS`, and the ascent and descent, measured by Chromium in the font
    family the SVG names: the table is an upper bound of what the browser draws."""
    family = next(ElementTree.fromstring(_svg("dev")).iter(f"{SVG}text")).get("font-family", "")
    size = 1000
    texts = "".join(f'<text x="0" y="0" font-family="{html.escape(family)}" font-size="{size}" '
                    f'xml:space="preserve">{html.escape(character)}</text>' for character in overview.CHARACTER_WIDTHS)
    page = tmp_path / "widths.html"
    page.write_text("<!DOCTYPE html><html><body><svg xmlns='http://www.w3.org/2000/svg'>" + texts +
                    "</svg><pre id='measured'></pre><script>document.getElementById('measured').textContent = "
                    "JSON.stringify([...document.querySelectorAll('svg text')].map(t => {const b = t.getBBox(); "
                    "return [t.textContent, t.getComputedTextLength(), -b.y, b.y + b.height];}));</script>"
                    "</body></html>")
    done = subprocess.run([_need("chromium", "chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.DOTALL)
    assert done.returncode == 0 and found and found[1], done.stderr[-2000:]
    measured = json.loads(html.unescape(found[1]))
    assert len(measured) == len(overview.CHARACTER_WIDTHS)
    wider = {character: width / size for character, width, _, _ in measured
             if width / size > overview.CHARACTER_WIDTHS[character]}
    assert wider == {}, "Chromium draws these wider than the table says (ems)"
    assert max(ascent for _, _, ascent, _ in measured) / size <= overview.ASCENT
    assert max(descent for _, _, _, descent in measured) / size <= overview.DESCENT
