"""Air-gapped sites (issue 18): the image list from a plan, `make mirror`'s copy commands and lock file, and an
air-gapped stack that pulls only from its site registry, by digest once the lock pins every image."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

import stages.config
from catalog import versions
from catalog.images import CHART_IMAGES, EKS_ONLY_CHARTS, OPERATOR_IMAGES
from components.helm import site_image_values
from components.kueue import vendored_manifest
from components.training_operators import site_manifest
from conventions.images import Lock, LockError, normalized, on_registry, parse, read_lock, site_repository
from stack_config import ConfigError
from stages.air_gap import air_gap_problems, site_images
from tests.conftest import ROOT, plan_modified, plan_stack
from tools import mirror
from verify import plan as gtp_plan
from verify import render as cluster

SITE = "registry.edge-site.internal:5000"
EDGE_IMAGES = [
    "docker.io/kubebuilder/kube-rbac-proxy:v0.13.1",
    # edge's nodes are arm64: DLRover's arm64 release images, not the manifest's `:master` ones (issue 26)
    "ghcr.io/intelligent-machine-learning/dlrover_controller_aarch64:v0.6.1",
    "ghcr.io/intelligent-machine-learning/release_dlrover_master_py310_aarch64:v0.6.1",
    "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
    "quay.io/prometheus-operator/prometheus-config-reloader:v0.85.0",
    "quay.io/prometheus/prometheus:v3.6.0",
    "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
]


def fake_digest(source: str) -> str:
    return "sha256:" + hashlib.sha256(source.encode()).hexdigest()


def write_lock(path: Path, images: list[str], site: str = SITE) -> Path:
    lock = Lock(site, {source: f"{site_repository(source, site, 'mirror')}@{fake_digest(source)}"
                       for source in images})
    path.write_text(lock.to_json())
    return path


def with_lock(lock: Path):
    def edit(config: dict[str, Any]) -> None:
        config["gtp:image"]["airGap"]["lockFile"] = str(lock)
    return edit


def rendered_images(plan: gtp_plan.Plan) -> set[str]:
    return mirror.images_in(item.obj for item in cluster.render_cluster(plan))


# --- image references --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("reference", "expected"), [
    ("ubuntu", "docker.io/library/ubuntu"),
    ("easydl/elasticjob-controller:master", "docker.io/easydl/elasticjob-controller:master"),
    ("localhost/x:1", "localhost/x:1"),
    ("registry.local:5000/a/b:v1@sha256:" + "a" * 64, "registry.local:5000/a/b:v1@sha256:" + "a" * 64),
    ("registry.local:5000/a/b", "registry.local:5000/a/b"),
])
def test_references_are_normalised_as_docker_does(reference: str, expected: str) -> None:
    assert normalized(reference) == expected


def test_a_bad_digest_is_refused() -> None:
    with pytest.raises(ValueError, match="sha256:<64 hex>"):
        parse("quay.io/a/b@sha256:1234")


def test_site_paths_keep_the_source_registry_and_drop_a_port_colon() -> None:
    assert site_repository("localhost:5000/a/b:1", SITE, "mirror") == f"{SITE}/mirror/localhost-5000/a/b"
    assert site_repository("ubuntu:24.04", SITE, "") == f"{SITE}/docker.io/library/ubuntu"


def test_on_registry_needs_a_separator_after_the_host() -> None:
    assert on_registry(f"{SITE}/mirror/x:1", SITE)
    assert not on_registry("registry.edge-site.internal:50001/x:1", SITE)
    assert not on_registry("quay.io/prometheus/prometheus:v3.6.0", SITE)


def test_lock_entries_must_be_site_copies_by_digest(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    path.write_text(json.dumps({"version": 1, "siteRegistry": SITE, "images": {"quay.io/a/b:1": f"{SITE}/a/b:1"}}))
    with pytest.raises(LockError, match=r"images\.quay\.io/a/b:1: expected"):
        read_lock(path)
    path.write_text(json.dumps({"version": 1, "siteRegistry": SITE,
                                "images": {"quay.io/a/b:1": f"quay.io/a/b@{fake_digest('x')}"}}))
    with pytest.raises(LockError, match="expected 'registry.edge-site.internal:5000/...@sha256"):
        read_lock(path)


# --- the image list ------------------------------------------------------------------------------------------


def test_the_edge_image_list_is_exactly_what_its_cluster_runs() -> None:
    plan = plan_stack("edge")
    objects = [item.obj for item in cluster.render_cluster(plan)]
    assert mirror.stack_images(objects, plan.config) == EDGE_IMAGES


@pytest.mark.program
def test_the_list_is_the_same_from_an_online_plan_of_the_same_stack(tmp_path: Path) -> None:
    """Online, the rendered cluster names the upstream images (DLRover's job-master image only as a flag)."""
    online = plan_modified(tmp_path, "edge", lambda config: config["gtp:image"].pop("airGap"))
    found = rendered_images(online)
    assert "ghcr.io/intelligent-machine-learning/release_dlrover_master_py310_aarch64:v0.6.1" in found
    assert sorted(found - {"<computed>"}) == EDGE_IMAGES


def test_every_pinned_chart_has_its_images_catalogued_or_is_eks_only() -> None:
    """A chart added to catalog/versions.py without a CHART_IMAGES row (or an EKS_ONLY_CHARTS entry) fails here,
    not silently in the mirror of the first air-gapped site that installs it."""
    pinned = {value.chart for value in vars(versions).values() if isinstance(value, versions.HelmChart)}
    assert pinned == set(CHART_IMAGES) | EKS_ONLY_CHARTS, pinned ^ (set(CHART_IMAGES) | EKS_ONLY_CHARTS)
    assert not set(CHART_IMAGES) & EKS_ONLY_CHARTS
    assert all(CHART_IMAGES.values()), [chart for chart, slots in CHART_IMAGES.items() if not slots]


def test_every_operator_manifest_has_its_images_catalogued() -> None:
    """An operator added to catalog/versions.py OPERATOR_MANIFESTS without its images in OPERATOR_IMAGES fails here:
    the mirror would leave them out and the site manifest would keep the upstream references."""
    manifests = [*versions.OPERATOR_MANIFESTS.values(), versions.KUEUE_MANIFEST]
    assert [manifest for manifest in manifests if not OPERATOR_IMAGES.get(manifest)] == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_catalog_names_every_image_each_chart_and_operator_renders(stack: str) -> None:
    """catalog/images.py is what the vendored sources render: a chart bump that changes an image fails here."""
    for item in cluster.render_cluster(plan_stack(stack)):
        kind, _, rest = item.source.partition(" ")
        images = mirror.images_in([item.obj])
        if kind == "chart":
            chart = Path(rest.split(" ")[0]).name.rsplit("-", 1)[0]
            # A chart without a row must be EKS-only (no air-gapped stack installs it), or it would pass unchecked.
            assert chart in CHART_IMAGES or chart in EKS_ONLY_CHARTS, f"{chart}: no CHART_IMAGES row"
            if chart in CHART_IMAGES:
                assert images <= {normalized(slot.source) for slot in CHART_IMAGES[chart]}, item.describe()
        elif kind == "operator":
            assert images <= {normalized(i) for i in OPERATOR_IMAGES[vendored_manifest(rest)]}, item.describe()


# --- make mirror: the copy commands and the lock --------------------------------------------------------------


FAKE_SKOPEO = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["FAKE_SKOPEO_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "inspect":
    sys.stdout.write(json.dumps({"schemaVersion": 2, "copy": sys.argv[-1]}))
"""


@pytest.mark.slow
def test_make_mirror_copies_every_image_and_locks_the_digests_skopeo_reports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "skopeo").write_text(FAKE_SKOPEO)
    (bin_dir / "skopeo").chmod(0o755)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SKOPEO_LOG", str(log))
    lock_file = tmp_path / "edge.lock.json"

    assert mirror.main(["--stack", "edge", "--lock", str(lock_file)]) == 0

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    expected_calls, expected_lock = [], {}
    for source in EDGE_IMAGES:
        copy = f"{site_repository(source, SITE, 'mirror')}:{parse(source).tag}"
        expected_calls += [["copy", "--all", "--preserve-digests", f"docker://{source}", f"docker://{copy}"],
                           ["inspect", "--raw", f"docker://{copy}"],
                           # a single manifest: its platform comes from the image config
                           ["inspect", "--config", f"docker://{copy}"]]
        manifest = json.dumps({"schemaVersion": 2, "copy": f"docker://{copy}"}).encode()
        expected_lock[source] = (f"{site_repository(source, SITE, 'mirror')}@sha256:"
                                 f"{hashlib.sha256(manifest).hexdigest()}")
    assert calls == expected_calls
    assert read_lock(lock_file) == Lock(SITE, expected_lock)
    assert "7 image(s) locked" in capsys.readouterr().out


def test_a_failed_copy_stops_with_skopeo_s_error() -> None:
    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(argv, 1, b"", b"unauthorized: authentication required")

    with pytest.raises(RuntimeError, match="quay.io/a/b:1 .* failed \\(exit 1\\): unauthorized"):
        mirror.mirror(["quay.io/a/b:1"], SITE, "mirror", run=run, log=lambda _: None)


def test_a_source_pinned_by_tag_and_digest_is_copied_by_digest() -> None:
    source = "quay.io/a/b:1@" + fake_digest("b")
    assert mirror.copy_command("skopeo", source, f"{SITE}/mirror/quay.io/a/b:1")[4] == \
        f"docker://quay.io/a/b@{fake_digest('b')}"


def test_a_stack_that_is_not_offline_has_nothing_to_mirror(capsys: pytest.CaptureFixture[str]) -> None:
    assert mirror.main(["--stack", "dev", "--list"]) == 2
    assert "no image.airGap.siteRegistry" in capsys.readouterr().err


def _oci_layout(path: Path, tag: str) -> str:
    """A one-layer image in an OCI layout (no network); returns its manifest digest."""
    blobs = path / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    layer = BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 5
        tar.addfile(info, BytesIO(b"hello"))
    layer_blob = blob(layer.getvalue())
    config = blob(json.dumps({"architecture": "arm64", "os": "linux", "rootfs": {
        "type": "layers", "diff_ids": [layer_blob["digest"]]}}).encode())
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_blob}]},
                          separators=(",", ":")).encode()
    manifest_blob = blob(manifest)
    (path / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest_blob,
        "annotations": {"org.opencontainers.image.ref.name": tag}}]}))
    return manifest_blob["digest"]


@pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo is not installed (`make test` installs it as root)")
def test_real_skopeo_preserves_the_digest_the_lock_records(tmp_path: Path) -> None:
    """The real binary, between two local OCI layouts: `copy --all --preserve-digests`, then `inspect --raw` of
    the copy hashes to the source's manifest digest (what `tools.mirror.mirror` records)."""
    source_digest = _oci_layout(tmp_path / "src", "v1")
    copy = ["skopeo", "copy", "--all", "--preserve-digests", f"oci:{tmp_path / 'src'}:v1", f"oci:{tmp_path / 'dst'}:v1"]
    subprocess.run(copy, check=True, capture_output=True)
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{tmp_path / 'dst'}:v1"], check=True,
                         capture_output=True).stdout
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == source_digest


# --- the air-gapped stack ----------------------------------------------------------------------------------------


def test_without_a_lock_edge_pulls_only_from_the_site_by_tag_and_says_what_is_missing() -> None:
    plan = plan_stack("edge")
    found = rendered_images(plan) - {"<computed>"}
    assert found and all(on_registry(image, SITE) for image in found)
    assert not any("@" in image for image in found)
    problems = air_gap_problems(plan.config)
    assert [p.path for p in problems] == ["image.airGap.lockFile", "image.airGap.lockFile"]
    assert "no lock file stacks/mirror/edge.lock.json" in problems[0].message
    assert all(image in problems[1].message for image in EDGE_IMAGES)


def test_with_a_full_lock_every_image_is_the_site_copy_by_digest(tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "edge.lock.json", EDGE_IMAGES)
    plan = plan_modified(tmp_path, "edge", with_lock(lock))
    assert air_gap_problems(plan.config) == []
    expected = {f"{site_repository(s, SITE, 'mirror')}@{fake_digest(s)}" for s in EDGE_IMAGES}
    # Charts that compose `repository:tag` keep the tag before the digest (`name:tag@digest` pulls by digest).
    found = {f"{parse(image).repository}@{parse(image).digest}" for image in rendered_images(plan) - {"<computed>"}}
    assert found == expected
    assert mirror.stack_images([i.obj for i in cluster.render_cluster(plan)], plan.config) == EDGE_IMAGES


def test_a_lock_missing_an_image_names_it(tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "edge.lock.json", EDGE_IMAGES[1:])
    plan = plan_modified(tmp_path, "edge", with_lock(lock))
    problems = air_gap_problems(plan.config)
    assert len(problems) == 1 and EDGE_IMAGES[0] in problems[0].message and EDGE_IMAGES[1] not in problems[0].message
    assert site_images(plan.config).unpinned == (EDGE_IMAGES[0],)


def test_a_lock_for_another_registry_is_refused(tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "edge.lock.json", EDGE_IMAGES, site="other.internal:5000")
    plan = plan_modified(tmp_path, "edge", with_lock(lock))
    assert "was written for 'other.internal:5000'" in air_gap_problems(plan.config)[0].message


def test_the_real_engine_refuses_an_unmirrored_offline_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)
    partial = gtp_plan.Plan(project="gtp", stack="edge")
    with pytest.raises(ConfigError) as caught:
        gtp_plan.run("edge", into=partial)
    assert partial.resources == []
    # With every other refusal of the stack at once (edge's Jetson base has no verified digest).
    assert [p.path for p in caught.value.problems] == ["image.baseImage", "image.airGap.lockFile",
                                                       "image.airGap.lockFile"]
    assert caught.value.problems[0].message.startswith("unpinned — ")
    assert all(p.message.startswith("air gap — ") for p in caught.value.problems[1:])


def test_the_real_engine_accepts_a_fully_mirrored_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = write_lock(tmp_path / "edge.lock.json", EDGE_IMAGES)
    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)
    # Only the mirror is under test: edge's unpinned Jetson base is a refusal of its own (tests/image).
    monkeypatch.setattr(stages.config, "unpinned_build_inputs", lambda config: [])
    plan = plan_modified(tmp_path, "edge", with_lock(lock))  # load_stack_config did not refuse
    assert plan.resources and air_gap_problems(plan.config) == []


def test_the_vendored_operator_manifest_stays_byte_exact_and_the_copy_is_rewritten() -> None:
    plan = plan_stack("edge")
    # The operator manifests (a chart's crds/ file, also a ConfigFile, runs no image: components/helm.py).
    files = [r.inputs["file"] for r in plan.by_type(cluster.CONFIG_FILE) if "/crds/" not in r.inputs["file"]]
    assert len(files) == 1 and files[0].startswith("build/offline/edge/dlrover-v0.6.1-")
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=ROOT / "vendor", check=True)
    text = (ROOT / files[0]).read_text()
    assert (f"--master-image={SITE}/mirror/ghcr.io/intelligent-machine-learning/release_dlrover_master_py310_aarch64:"
            "v0.6.1") in text
    assert f"image: {SITE}/mirror/ghcr.io/intelligent-machine-learning/dlrover_controller_aarch64:v0.6.1" in text
    assert "easydl/elasticjob-controller" not in text and "intell-ai/dlrover:master" not in text


def test_a_manifest_image_that_no_longer_occurs_fails_loudly() -> None:
    manifest = "vendor/derived/dlrover-v0.6.1.yaml"
    refs = {normalized(i): f"{SITE}/x:1" for i in OPERATOR_IMAGES[manifest]}
    with pytest.raises(ValueError, match="does not occur"):
        site_manifest("image: something/else:1\n", manifest, refs)
    with pytest.raises(ValueError, match="no site image"):
        site_manifest("", manifest, {})


def test_chart_values_set_each_chart_s_own_image_keys() -> None:
    digest = fake_digest("x")
    refs = {normalized(slot.source): f"{SITE}/m/{parse(slot.source).path}@{digest}"
            for slots in CHART_IMAGES.values() for slot in slots}
    assert site_image_values("prometheus", refs)["server"]["image"] == {
        "repository": f"{SITE}/m/prometheus/prometheus", "tag": "v3.6.0", "digest": digest}
    assert site_image_values("keda", refs)["image"]["keda"] == {
        "registry": SITE, "repository": "m/kedacore/keda", "tag": f"2.20.2@{digest}"}
    assert site_image_values("grafana", refs)["image"] == {
        "registry": SITE, "repository": "m/grafana/grafana", "tag": "12.2.1", "sha": digest.removeprefix("sha256:")}
    assert site_image_values("nvidia-device-plugin", refs)["nfd"]["image"] == {
        "repository": f"{SITE}/m/nfd/node-feature-discovery", "tag": f"v0.19.0@{digest}"}


@pytest.mark.parametrize(("edit", "path"), [
    (lambda c: c["gtp:image"].update(existingRegistry="registry.other.internal/gtp/trainer"),
     "image.existingRegistry"),
    (lambda c: c["gtp:cluster"].update(mode="eks"), "image.airGap"),
])
def test_an_offline_stack_s_own_image_and_cluster_are_on_the_site(tmp_path: Path, edit: Any, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_modified(tmp_path, "edge", edit)
    assert path in [p.path for p in caught.value.problems]


# --- the policy rule on real plans -------------------------------------------------------------------------------


def _site_violations(plan: gtp_plan.Plan) -> list[str]:
    from policy.gtp_policy import run_policies
    from verify.validate import policy_facts

    facts = {**policy_facts(plan), "siteRegistry": SITE}
    return [v.message for v in run_policies([r.as_json() for r in plan.resources], facts)
            if v.policy_name == "offline-images-from-site-registry"]


def test_the_offline_edge_plan_passes_the_site_registry_rule(tmp_path: Path) -> None:
    assert _site_violations(plan_stack("edge")) == []
    lock = write_lock(tmp_path / "edge.lock.json", EDGE_IMAGES)
    assert _site_violations(plan_modified(tmp_path, "edge", with_lock(lock))) == []


def test_the_same_stack_online_fails_the_site_registry_rule(tmp_path: Path) -> None:
    online = plan_modified(tmp_path, "edge", lambda config: config["gtp:image"].pop("airGap"))
    messages = _site_violations(online)
    # Online, the charts keep their default (upstream) images, which values don't show: the rendered-cluster
    # tests above cover those; the operator manifest's copy (the platform priority class added, upstream images
    # kept: no `-site-` in its name) is what the rule sees.
    assert len(messages) == 1 and re.search(r"file = 'build/offline/edge/dlrover-v0\.6\.1-[0-9a-f]{12}\.yaml'",
                                            messages[0]), messages


L4T_BASE = "nvcr.io/nvidia/l4t-pytorch:r36.2.0-pth2.2-py3@sha256:" + "c" * 64


def test_the_training_image_builds_on_the_site_copy_of_its_base(tmp_path: Path) -> None:
    def edit(config: dict[str, Any]) -> None:
        config["gtp:image"]["baseImage"] = L4T_BASE
        config["gtp:image"]["airGap"]["lockFile"] = str(write_lock(tmp_path / "edge.lock.json",
                                                                    EDGE_IMAGES + [normalized(L4T_BASE)]))

    plan = plan_modified(tmp_path, "edge", edit)
    objects = [item.obj for item in cluster.render_cluster(plan)]
    assert mirror.stack_images(objects, plan.config) == sorted(EDGE_IMAGES + [L4T_BASE])
    build = plan.one("docker:index/image:Image", "trainer-image").inputs["build"]
    assert build["args"]["BASE_IMAGE"] == \
        f"{site_repository(L4T_BASE, SITE, 'mirror')}@{fake_digest(normalized(L4T_BASE))}"
    # ...and copies it by digest (skopeo refuses tag+digest), to the tag it had.
    assert mirror.copy_command("skopeo", L4T_BASE, mirror.site_copy(L4T_BASE, SITE, "mirror"))[4:] == [
        "docker://nvcr.io/nvidia/l4t-pytorch@sha256:" + "c" * 64,
        f"docker://{SITE}/mirror/nvcr.io/nvidia/l4t-pytorch:r36.2.0-pth2.2-py3"]


def test_the_operators_component_installs_table_rows_in_order_and_refuses_an_unknown_name() -> None:
    from components.training_operators import selected_manifests

    assert list(selected_manifests(frozenset({"trainer", "keda", "training-operator"}))) == [
        "training-operator", "trainer"]
    assert selected_manifests(frozenset({"dlrover"})) == {"dlrover": versions.DLROVER_MANIFEST}
    with pytest.raises(ValueError, match=r"no operator named \['mpi-operator'\]"):
        selected_manifests(frozenset({"mpi-operator", "dlrover"}))
