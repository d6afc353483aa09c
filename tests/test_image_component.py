"""Issue 5 on the plan: the registry, the build and push, and workloads pinned by digest."""

from __future__ import annotations

import json
from pathlib import Path

from catalog import versions
from components import image_spec
from components.training_image import IMAGE_INPUTS_OUTSIDE_THE_TAG, lifecycle_policy, registry_server
from tests.conftest import ROOT, plan_modified, plan_stack
from verify import plan as gtp_plan
from verify.plan import COMPUTED


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
        recorded = {key: value for key, value in image.inputs.items() if key not in ("imageName", "registry")}
        tag = image_spec.image_tag(ROOT / "images" / "trainer", recorded)
        assert image.inputs["imageName"].endswith(":" + tag) or image.inputs["imageName"] == COMPUTED
        registry = image.inputs["registry"]  # credentials (ECR token / edge password) never show in the plan
        assert registry == "[secret]" or registry["password"] == "[secret]", registry
    edge = plan_stack("edge").one("docker:index/image:Image")
    assert edge.inputs["imageName"].startswith("registry.edge-site.internal:5000/gtp/trainer:ctx-")


def _leaf_paths(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaf_paths(value, f"{path}.{key}" if path else key)
    else:
        yield path


def test_every_docker_image_input_feeds_the_tag_or_is_listed_with_why() -> None:
    # pulumi-docker v5.1.0 provider/provider.go Diff/diffUpdates: any changed input is an update, and Update pushes
    # to the same imageName. Every recorded input must change the tag, or be listed with why it can't collide.
    image = plan_stack("edge").one("docker:index/image:Image")
    assert image.options["ignoreChanges"] == []
    outside = set(IMAGE_INPUTS_OUTSIDE_THE_TAG)
    fed = {key: value for key, value in image.inputs.items() if key not in ("imageName", "registry")}
    # The registry object carries a secret, so the plan records it whole as "[secret]": its keys are the listed ones.
    assert image.inputs["registry"] == "[secret]"
    leaves = set(_leaf_paths(image.inputs)) - {"registry"} | {"registry.server", "registry.username",
                                                               "registry.password"}
    assert "build.args.VCS_REVISION" in leaves and "build.args.SOURCE_URL" in leaves
    assert leaves - set(_leaf_paths(fed)) == outside
    # The tag is computed from exactly the recorded inputs (image_tag hashes each; tests/image proves each one bites).
    assert image.inputs["imageName"].endswith(":" + image_spec.image_tag(ROOT / "images" / "trainer", fed))


def test_a_new_revision_label_names_a_new_tag(monkeypatch) -> None:
    # Before: VCS_REVISION/SOURCE_URL changed the build args but not the tag, so the next commit's `up` rebuilt and
    # pushed over the existing immutable tag.
    names = {}
    for revision in ("1111111", "2222222"):
        monkeypatch.setattr(image_spec, "vcs_labels",
                            lambda root, environ=None, path=None, revision=revision: (revision, "https://x.invalid/r"))
        image = gtp_plan.run("edge").one("docker:index/image:Image")
        assert image.inputs["build"]["args"]["VCS_REVISION"] == revision
        names[revision] = image.inputs["imageName"]
    assert names["1111111"] != names["2222222"]


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
