"""The air-gapped mirror against real registries (issue 27 item 6): `tools.mirror` (what `make mirror` runs) copies
the training image just built from a local "upstream" registry into a local "site" registry with the real skopeo
(`--preserve-digests`), writes the lock, and the edge plan then runs only the site copy, by digest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conventions.images import read_lock
from tests.conftest import ROOT
from tests.engine.conftest import Built, timed
from tools import mirror
from tools.engine import Engine, Registry
from verify import plan as gtp_plan
from verify import render as cluster


def _served_digest(engine: Engine, reference: str) -> str:
    skopeo = ["skopeo", "--registries-conf", str(engine.registries_conf())]
    return "sha256:" + hashlib.sha256(mirror.served_manifest(reference, skopeo=skopeo)).hexdigest()


@pytest.fixture(scope="module")
def mirrored(engine: Engine, trainer_image: Built, upstream_registry: Registry,
             tmp_path_factory: pytest.TempPathFactory) -> dict:
    upstream, site = upstream_registry, engine.registry("site")
    name = f"{upstream.address}/gtp/trainer:engine-test"
    with timed("mirror: push to upstream"):
        engine.docker("tag", trainer_image.tag, name)
        engine.docker("push", name, timeout=1200)
    source = f"{upstream.address}/gtp/trainer@{_served_digest(engine, name)}"
    folder = tmp_path_factory.mktemp("mirror")
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.edge.yaml").read_text())
    image = document["config"]["gtp:image"]
    image.update({"build": False, "reference": source})
    image["airGap"] = {"siteRegistry": site.address, "lockFile": str(folder / "edge.lock.json")}
    stack_file = folder / "Pulumi.edge.yaml"
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    with timed("mirror: tools.mirror"):
        done = subprocess.run([sys.executable, "-m", "tools.mirror", "--stack", "edge", "--stack-file", str(stack_file),
                               "--only", source, "--registries-conf", str(engine.registries_conf())],
                              cwd=ROOT, capture_output=True, text=True, check=False,
                              timeout=1200)
    return {"source": source, "site": site, "upstream": upstream, "stack_file": stack_file, "done": done,
            "lock": folder / "edge.lock.json"}


def test_mirror_copies_with_the_source_digest_and_locks_what_the_site_serves(engine: Engine, mirrored: dict) -> None:
    done = mirrored["done"]
    assert done.returncode == 0, done.stderr
    lock = read_lock(mirrored["lock"])
    site_copy = lock.images[mirrored["source"]]
    assert site_copy.startswith(f"{mirrored['site'].address}/mirror/")
    # --preserve-digests: the copy is byte-identical, so its digest is the source's ...
    assert site_copy.split("@")[1] == mirrored["source"].split("@")[1]
    # ... and what the site registry serves under the copy's tag is exactly what the lock pins.
    tagged = mirror.site_copy(mirrored["source"], lock.site_registry, "mirror")
    assert _served_digest(engine, tagged) == site_copy.split("@")[1]
    assert _served_digest(engine, site_copy) == site_copy.split("@")[1]


def test_the_edge_plan_runs_only_the_site_copy_by_digest(mirrored: dict) -> None:
    assert mirrored["done"].returncode == 0, mirrored["done"].stderr
    site_copy = read_lock(mirrored["lock"]).images[mirrored["source"]]
    plan = gtp_plan.run("edge", stack_file=mirrored["stack_file"])
    images = mirror.images_in(item.obj for item in cluster.render_cluster(plan))
    trainer = {image for image in images if image.split("@")[0].endswith("/gtp/trainer")}
    assert trainer == {site_copy}, trainer
    assert not [image for image in images if image.startswith(mirrored["upstream"].address)], images


def test_verify_lock_holds_the_lock_to_what_the_site_serves(engine: Engine, mirrored: dict, tmp_path: Path) -> None:
    """The real lock verifies clean; the same lock with another digest is caught, naming the image."""
    assert mirrored["done"].returncode == 0, mirrored["done"].stderr
    skopeo = ["skopeo", "--registries-conf", str(engine.registries_conf())]
    lock = read_lock(mirrored["lock"])
    assert mirror.verify_lock(lock, "mirror", skopeo=skopeo) == []
    data = json.loads(mirrored["lock"].read_text())
    source = mirrored["source"]
    data["images"][source] = f"{data['images'][source].split('@')[0]}@sha256:{'0' * 64}"
    tampered = tmp_path / "lock.json"
    tampered.write_text(json.dumps(data))
    problems = mirror.verify_lock(read_lock(tampered), "mirror", skopeo=skopeo)
    tagged = mirror.site_copy(source, lock.site_registry, "mirror")
    assert problems == [f"{source}: the lock pins sha256:{'0' * 64}, the site serves "
                        f"{lock.images[source].split('@')[1]} at {tagged}"]
