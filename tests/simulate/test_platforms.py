"""Image platforms (issue 26 finding 5): the mirror lock records each image's platforms, the simulation checks
them against the nodes' `kubernetes.io/arch`, and arm64 sites run DLRover's arm64 images
(verify/simulate/platforms.py, tools/mirror.py, catalog/images.py ARM64_VARIANTS)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from catalog import node_labels as nl
from catalog import versions
from catalog.images import ARM64_VARIANTS, operator_images
from conventions.images import Lock, LockError, read_lock, upstream_of
from tools.mirror import manifest_platforms
from verify.simulate import platforms
from verify.simulate.model import ExpandedPod
from verify.simulate.nodes import NodeGroup

SITE = "registry.edge-site.internal:5000"


def _pod(image: str) -> ExpandedPod:
    return ExpandedPod(owner="Deployment dlrover/controller", source="operator x", namespace="dlrover",
                       pod={"spec": {"containers": [{"name": "c", "image": image}]}})


def _check(image: str, arch: str = "arm64", lock: Lock | None = None) -> platforms.CheckResult:
    group = NodeGroup(name="orin", role="gpu", labels={nl.ARCH: arch}, taints=[], allocatable={})
    return platforms.check([_pod(image)], [group], lambda p, g: True,
                           lambda image: upstream_of(image, SITE, "mirror"), lock)


def test_dlrovers_manifest_images_on_arm64_nodes_are_a_finding() -> None:
    result = _check(f"{SITE}/mirror/docker.io/easydl/elasticjob-controller:master")
    assert (result.passed, result.total) == (0, 1)
    assert "carries linux/amd64 (its project publishes arm64 separately" in result.findings[0].rule


def test_the_arm64_release_image_passes_and_unknown_images_are_only_noted() -> None:
    assert _check(ARM64_VARIANTS["easydl/elasticjob-controller:master"]).findings == []
    unknown = _check("quay.io/prometheus/prometheus:v3.6.0")
    assert unknown.total == 0 and "platforms unknown" in unknown.details[0]
    assert _check(f"{SITE}/mirror/docker.io/easydl/elasticjob-controller:master", arch="amd64").findings == []


def test_the_lock_decides_when_it_records_the_platforms() -> None:
    source = "quay.io/prometheus/prometheus:v3.6.0"
    pinned = f"{SITE}/mirror/quay.io/prometheus/prometheus@sha256:{'a' * 64}"
    lock = Lock(SITE, {source: pinned}, {source: ("linux/amd64",)})
    result = _check(pinned, lock=lock)
    assert "carries linux/amd64 (the mirror lock), not linux/arm64" in result.findings[0].rule
    both = Lock(SITE, {source: pinned}, {source: ("linux/amd64", "linux/arm64")})
    assert _check(pinned, lock=both).findings == []


def test_mirror_reads_platforms_from_an_index_or_the_image_config() -> None:
    index = json.dumps({"manifests": [{"platform": {"os": "linux", "architecture": "amd64"}},
                                      {"platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
                                      {"platform": {"os": "unknown", "architecture": "unknown"}}]}).encode()
    assert manifest_platforms(index, lambda: pytest.fail("an index needs no config")) == (
        "linux/amd64", "linux/arm64/v8")
    config = subprocess.CompletedProcess([], 0, json.dumps({"os": "linux", "architecture": "amd64"}).encode(), b"")
    assert manifest_platforms(b'{"schemaVersion": 2}', lambda: config) == ("linux/amd64",)


def test_the_lock_round_trips_platforms_and_refuses_bad_ones(tmp_path: Path) -> None:
    source = "quay.io/prometheus/prometheus:v3.6.0"
    lock = Lock(SITE, {source: f"{SITE}/mirror/quay.io/prometheus/prometheus@sha256:{'b' * 64}"},
                {source: ("linux/arm64",)})
    path = tmp_path / "edge.lock.json"
    path.write_text(lock.to_json())
    assert read_lock(path) == lock
    data = json.loads(lock.to_json())
    data["platforms"][source] = ["arm64"]
    path.write_text(json.dumps(data))
    with pytest.raises(LockError, match=r"platforms: expected an object source → \['os/arch\[/variant\]'"):
        read_lock(path)


def test_arm64_sites_get_dlrovers_arm64_images() -> None:
    assert operator_images(versions.DLROVER_MANIFEST, "arm64") == (
        "docker.io/kubebuilder/kube-rbac-proxy:v0.13.1",
        "ghcr.io/intelligent-machine-learning/dlrover_controller_aarch64:v0.6.1",
        "ghcr.io/intelligent-machine-learning/release_dlrover_master_py310_aarch64:v0.6.1")
    assert operator_images(versions.DLROVER_MANIFEST, "amd64")[1] == "easydl/elasticjob-controller:master"
