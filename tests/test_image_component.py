"""Issue 5 on the plan: the registry, the build and push, and workloads pinned by digest."""

from __future__ import annotations

import json
from pathlib import Path

from components.training_image import lifecycle_policy, registry_server
from catalog import versions
from components import image_spec
from tools.plan import COMPUTED
from tests.conftest import ROOT, plan_modified, plan_stack


def test_ecr_repository_settings() -> None:
    dev = plan_stack("dev")
    repository = dev.one("aws:ecr/repository:Repository")
    assert repository.inputs["name"] == "gtp-dev-trainer"
    assert repository.inputs["imageTagMutability"] == "IMMUTABLE"
    assert repository.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repository.inputs["encryptionConfigurations"][0]["encryptionType"] == "KMS"
    assert repository.inputs["forceDelete"] is True  # dev is not protected: its destroy must finish
    assert dev.one("aws:kms/key:Key", "trainer-ecr").inputs["enableKeyRotation"] is True
    assert not dev.by_type("aws:ecr/repositoryPolicy:RepositoryPolicy")
    rules = json.loads(dev.one("aws:ecr/lifecyclePolicy:LifecyclePolicy").inputs["policy"])["rules"]
    assert rules[0]["selection"] == {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                                     "countNumber": 7}
    assert rules[1]["selection"]["countNumber"] == 30
    assert plan_stack("prod").one("aws:ecr/repository:Repository").options["protect"] is True


def test_force_delete_unless_protected_or_shared(tmp_path: Path) -> None:
    def ephemeral(config: dict) -> None:
        config["gtp:lifecycle"] = {"ephemeral": True, "ttlHours": 2, "createdAt": "2026-12-02T13:00:00Z"}

    plan = plan_modified(tmp_path, "dev", ephemeral)
    assert plan.one("aws:ecr/repository:Repository").inputs["forceDelete"] is True
    assert plan_stack("prod").one("aws:ecr/repository:Repository").inputs["forceDelete"] is False

    def shared(config: dict) -> None:
        config.setdefault("gtp:image", {})["sharedRepository"] = True

    shared_dir = tmp_path / "shared"
    shared_dir.mkdir()
    plan = plan_modified(shared_dir, "dev", shared)
    assert plan.one("aws:ecr/repository:Repository").inputs["forceDelete"] is False


def test_image_build_inputs_come_from_stack_config() -> None:
    # edge (Jetson Orin) has no verified L4T digest: its preview builds on a placeholder that `pulumi up` refuses.
    for stack, platform, base in (("dev", "linux/amd64", versions.PYTORCH_BASE_IMAGE),
                                  ("edge", "linux/arm64", "unpinned-linux-arm64-base")):
        image = plan_stack(stack).one("docker:index/image:Image")
        build = image.inputs["build"]
        assert build["context"] == "images/trainer" and build["platform"] == platform
        assert build["args"]["BASE_IMAGE"] == base
        assert build["args"]["TRAINER_VERSION"] == versions.TRAINER_VERSION
        tag = image_spec.image_tag(ROOT / "images" / "trainer", image_spec.content_build_args(base))
        assert image.inputs["imageName"].endswith(":" + tag) or image.inputs["imageName"] == COMPUTED
        registry = image.inputs["registry"]  # credentials (ECR token / edge password) never show in the plan
        assert registry == "[secret]" or registry["password"] == "[secret]", registry
    edge = plan_stack("edge").one("docker:index/image:Image")
    assert edge.inputs["imageName"].startswith("registry.edge-site.internal:5000/gtp/trainer:ctx-")


def test_workloads_reference_the_image_only_by_its_pushed_digest() -> None:
    for stack in ("dev", "edge", "prod"):
        plan = plan_stack(stack)
        assert plan.outputs["imageRef"] == COMPUTED  # repo_digest: known only after the push
        images = [c["image"] for obj in plan.kubernetes_objects() for c in _containers(obj)]
        assert images and set(images) == {COMPUTED}


def _containers(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from value
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


def test_reusing_a_digest_builds_nothing(tmp_path: Path) -> None:
    reference = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "c" * 64
    plan = plan_modified(tmp_path, "dev", lambda config: config["gtp:image"].update(build=False, reference=reference))
    assert not plan.by_type("docker:index/image:Image") and not plan.by_type("aws:ecr/repository:Repository")
    assert plan.outputs["imageRef"] == reference


def test_pure_helpers() -> None:
    assert registry_server("registry.example.internal:5000/team/trainer") == "registry.example.internal:5000"
    assert json.loads(lifecycle_policy(5, 3))["rules"][1]["selection"]["countNumber"] == 5


def test_only_stacks_with_efa_groups_build_the_efa_variant() -> None:
    for stack, variant in (("dev", "default"), ("edge", "default"), ("prod", "efa")):
        args = plan_stack(stack).one("docker:index/image:Image").inputs["build"]["args"]
        assert args["NET_VARIANT"] == variant, stack
        assert ("EFA_INSTALLER_VERSION" in args) is (variant == "efa")
