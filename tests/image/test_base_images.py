"""Base image per platform and device: the choice, the pins, the refusal to build on an unpinned base."""

from __future__ import annotations

import re

import pytest

from catalog import versions
from stack_config.derived import base_flavour, base_image, base_image_refusal, image_flavour
from tests.test_config import BASE, EXISTING, parse, problems_of, with_

DIGEST = "sha256:" + "a" * 64
GRACE = {"cluster": {"mode": "existing"}, "kubeconfig": "apiVersion: v1",
         "gpuNodeGroups": {"gh": {"gpusPerNode": 1, "gpuModel": "GH200", "architecture": "arm64", "maxSize": 2}},
         "image": {"platform": "linux/arm64"}, "workloads": {"train": {"kind": "pytorchjob", "nodeGroup": "gh"}}}


@pytest.mark.parametrize(("platform", "models", "flavour"), [
    ("linux/amd64", ["H100"], "cuda-x86_64"),
    ("linux/arm64", ["GH200"], "cuda-sbsa"),
    ("linux/arm64", ["T4G"], "cuda-sbsa"),
    ("linux/arm64", ["Orin"], "jetson-l4t"),
    ("linux/arm64", [], "cuda-sbsa"),
])
def test_flavour_per_platform_and_device(platform, models, flavour):
    assert base_flavour(platform, models) == flavour


def test_every_base_is_for_its_platform_and_pinned_by_digest_or_explicitly_unpinned():
    assert set(versions.BASE_IMAGES) == {"cuda-x86_64", "cuda-sbsa", "jetson-l4t"}
    for key, base in versions.BASE_IMAGES.items():
        assert base.flavour == key
        assert base.platform == ("linux/amd64" if key == "cuda-x86_64" else "linux/arm64")
        assert base.reference is None or re.fullmatch(r"[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}", base.reference)
    assert versions.BASE_IMAGES["cuda-x86_64"].reference == versions.PYTORCH_BASE_IMAGE


def test_x86_64_stacks_build_on_the_pinned_pytorch_base():
    config = parse(BASE)
    assert image_flavour(config) == "cuda-x86_64"
    assert base_image(config) == versions.PYTORCH_BASE_IMAGE and base_image_refusal(config) is None


def test_jetson_stack_refuses_to_build_on_an_unpinned_base():
    config = parse(EXISTING)
    assert image_flavour(config) == "jetson-l4t"
    assert versions.BASE_IMAGES["jetson-l4t"].reference is None, "pinned now: point this test at a stack override"
    assert base_image(config) is None
    assert "refusing to build on an unpinned base: the jetson-l4t base" in base_image_refusal(config)


def test_grace_stack_gets_the_sbsa_base():
    assert image_flavour(parse(GRACE)) == "cuda-sbsa"


def test_a_stack_pinned_base_overrides_and_lifts_the_refusal():
    reference = f"site/l4t-pytorch:r36@{DIGEST}"
    config = parse(with_(EXISTING, "image.baseImage", reference))
    assert base_image(config) == reference and base_image_refusal(config) is None


def test_reusing_an_image_needs_no_base():
    config = parse(with_(with_(EXISTING, "image.build", False), "image.reference", f"site/trainer@{DIGEST}"))
    assert base_image_refusal(config) is None


def test_a_base_by_tag_is_rejected_with_its_key_path():
    assert any(re.match(r"^image\.baseImage: 'site/l4t:r36' must pin the base by digest", problem)
               for problem in problems_of(with_(EXISTING, "image.baseImage", "site/l4t:r36")))


def test_jetson_and_server_gpus_cannot_share_one_image():
    raw = with_(EXISTING, "gpuNodeGroups.gh", {"gpusPerNode": 1, "gpuModel": "GH200", "architecture": "arm64",
                                              "maxSize": 1})
    assert any(problem.startswith("image.platform: one image cannot serve Jetson (Orin, an L4T base) and server "
                                  "GPUs (GH200") for problem in problems_of(raw))


def test_platform_must_match_the_node_groups_architecture():
    assert any(problem.startswith("image.platform: 'linux/amd64' doesn't match the GPU nodes' architecture arm64")
               for problem in problems_of(with_(EXISTING, "image.platform", "linux/amd64")))


def test_pulumi_up_refuses_an_unpinned_base_and_a_preview_warns(monkeypatch):
    import pulumi

    from stages import image as image_stage

    class Built(Exception):
        pass

    def fake_image(name, args, opts=None):
        raise Built(args.base_image)

    warnings: list[str] = []
    monkeypatch.setattr(image_stage, "TrainingImage", fake_image)
    monkeypatch.setattr(pulumi.log, "warn", warnings.append)
    cluster = type("Cluster", (), {"aws_opts": None})()
    config = parse(EXISTING)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    with pytest.raises(pulumi.RunError, match="refusing to build on an unpinned base"):
        image_stage.build_image(config, cluster)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    with pytest.raises(Built, match="unpinned-linux-arm64-base"):
        image_stage.build_image(config, cluster)
    assert warnings and "jetson-l4t" in warnings[0]
    with pytest.raises(Built, match=re.escape(versions.PYTORCH_BASE_IMAGE)):
        image_stage.build_image(parse(BASE), cluster)


def test_the_image_stage_labels_the_build_with_git_revision_and_source(monkeypatch):
    import pulumi

    from stages import image as image_stage

    seen = {}

    def fake_image(name, args, opts=None):
        seen.update(revision=args.vcs_revision, source=args.source_url)

    monkeypatch.setattr(image_stage, "TrainingImage", fake_image)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    monkeypatch.setenv("GTP_VCS_REVISION", "0123abc")
    monkeypatch.setenv("GTP_SOURCE_URL", "https://github.com/example-org/gtp")
    image_stage.build_image(parse(BASE), type("Cluster", (), {"aws_opts": None})())
    assert seen == {"revision": "0123abc", "source": "https://github.com/example-org/gtp"}
