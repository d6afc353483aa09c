"""The test stack of `make swarm-test` (tools.swarm_harness.cpu_stack): edge-swarm changed only where this machine
differs from a site, and still a valid stack; the real Swarm runs in tests/swarm_engine (make swarm-test)."""

from __future__ import annotations

import yaml

from stages.config import parse_stack_config
from tools import swarm_harness


def test_the_test_stack_is_edge_swarm_on_cpus_with_host_path_storage() -> None:
    edge = yaml.safe_load(swarm_harness.EDGE_SWARM.read_text())
    stack = swarm_harness.cpu_stack(edge, host_path="/var/tmp/gtp-swarm/shared", max_steps=12)
    raw = {key.split(":", 1)[1]: value for key, value in stack["config"].items()}
    config = parse_stack_config(raw, stack="swarm-test", secret_keys=["registryPassword"])
    swarm = config.cluster.swarm
    assert swarm.encrypt_overlay is False and swarm.cpu_stand_in is True
    assert config.storage.kind == "host-path" and config.storage.host_path == "/var/tmp/gtp-swarm/shared"
    workload = config.workloads[swarm_harness.TEST_JOB]
    assert (workload.model, workload.max_steps, workload.elastic.min_nodes, workload.elastic.max_nodes) == \
        ("cnn", 12, 2, 3)
    assert config.gpu_node_groups["gpu"].gpus_per_node == 1
    # The committed stack keeps the safe defaults.
    assert "encryptOverlay" not in edge["config"]["gtp:cluster"]["swarm"]
    site = parse_stack_config({key.split(":", 1)[1]: value for key, value in edge["config"].items()},
                              stack="edge-swarm", secret_keys=["registryPassword"])
    assert site.cluster.swarm.encrypt_overlay is True and site.cluster.swarm.cpu_stand_in is False


def test_seed_hard_links_the_templates_layers_and_images(tmp_path) -> None:
    import pytest

    from tools.engine import EngineError

    template = tmp_path / "template"
    (template / "overlay2" / "abc" / "diff").mkdir(parents=True)
    (template / "overlay2" / "abc" / "diff" / "file").write_text("layer")
    (template / "image" / "overlay2").mkdir(parents=True)
    (template / "image" / "overlay2" / "repositories.json").write_text("{}")
    (template / "containers").mkdir()  # not a node's business: not seeded
    swarm_harness.seed(template, tmp_path / "node" / "data")
    seeded = tmp_path / "node" / "data" / "overlay2" / "abc" / "diff" / "file"
    assert seeded.stat().st_ino == (template / "overlay2" / "abc" / "diff" / "file").stat().st_ino
    assert (tmp_path / "node" / "data" / "image" / "overlay2" / "repositories.json").read_text() == "{}"
    assert not (tmp_path / "node" / "data" / "containers").exists()
    with pytest.raises(EngineError, match=r"image is missing: the template is not an overlay2 daemon root"):
        swarm_harness.seed(tmp_path / "empty", tmp_path / "other")
