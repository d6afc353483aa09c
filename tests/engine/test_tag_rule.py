"""The tag rule on real builds (issue 27 item 5): every input of the stack's `docker.Image` that changes the image
must change its tag, or be in the resource's ignoreChanges; pushing every build leaves no tag overwritten.

pulumi-docker's Diff sees a change anywhere under `build` (args, context, dockerfile, platform) and its Update
pushes to the same image name (pulumi/pulumi-docker provider/provider.go Diff/diffUpdates, provider/image.go): a
change the tag misses pushes different content over an existing tag, which an immutable ECR repository refuses.

Each input is changed alone against the baseline build (the session's `trainer_image`); an input whose change makes
the build fail here (no arm64 base, no EFA download, a trainer version the context does not have) produces no
image, so it cannot overwrite one: those are reported as such, not as passes of the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from components import image_spec
from tests.conftest import plan_stack
from tests.engine.conftest import Built, copy_context, timed
from tools.engine import Engine, EngineError, Registry


@dataclass(frozen=True)
class Variant:
    input: str
    """The docker.Image input changed (as ignoreChanges names it)."""
    context: Path
    args: dict[str, str]
    platform: str
    image_id: str | None
    """None: the build failed (why in `refused`)."""
    refused: str = ""


def _variant(engine: Engine, name: str, context: Path, args: dict[str, str], platform: str = "linux/amd64",
             dockerfile: Path | None = None) -> Variant:
    try:
        image_id = engine.build(context, f"gtp-variant:{name.replace('.', '-').lower()}", args, platform=platform,
                                dockerfile=dockerfile)
        return Variant(name, context, args, platform, image_id)
    except EngineError as error:
        return Variant(name, context, args, platform, None, str(error).strip().splitlines()[-1][:200])


@pytest.fixture(scope="module")
def variants(engine: Engine, trainer_image: Built, tmp_path_factory: pytest.TempPathFactory) -> list[Variant]:
    baseline = trainer_image.args
    built = [Variant("baseline", trainer_image.context, baseline, "linux/amd64", trainer_image.image_id)]
    with timed("tag rule builds"):
        built.append(_variant(engine, "rebuild", trainer_image.context, dict(baseline)))
        for key, value in (("VCS_REVISION", "fedcba9876543210fedcba9876543210fedcba98"),
                           ("SOURCE_URL", "https://example.invalid/gtp/fork"),
                           ("TRAINER_VERSION", "0.1.1"),
                           ("NET_VARIANT", "efa")):
            args = {**baseline, key: value}
            if key == "NET_VARIANT":
                args.update(image_spec.build_args(net_variant="efa", base_image=baseline["BASE_IMAGE"]))
                args.update({"VCS_REVISION": baseline["VCS_REVISION"], "SOURCE_URL": baseline["SOURCE_URL"]})
            built.append(_variant(engine, f"build.args.{key}", trainer_image.context, args))
        # Another base: the stand-in plus one label, as a re-pinned base digest would be.
        other = tmp_path_factory.mktemp("other-base")
        (other / "Dockerfile").write_text(f"FROM {trainer_image.base}\nLABEL gtp.test.base=other\n")
        engine.build(other, "gtp-cpu-base:other", {})
        built.append(_variant(engine, "build.args.BASE_IMAGE", trainer_image.context,
                              {**baseline, "BASE_IMAGE": "gtp-cpu-base:other"}))
        context = copy_context(tmp_path_factory.mktemp("context-change") / "context")
        (context / "trainer" / "_release_note.py").write_text('"""A file added to the trainer package."""\n')
        built.append(_variant(engine, "build.context", context, dict(baseline)))
        dockerfile_change = copy_context(tmp_path_factory.mktemp("dockerfile-change") / "context")
        path = dockerfile_change / "Dockerfile"
        path.write_text(path.read_text().replace('HEALTHCHECK NONE', 'HEALTHCHECK NONE\nSTOPSIGNAL SIGTERM', 1))
        built.append(_variant(engine, "build.dockerfile", dockerfile_change, dict(baseline)))
        built.append(_variant(engine, "build.platform", trainer_image.context, dict(baseline), platform="linux/arm64"))
    for variant in built:
        print(f"{variant.input:28} {variant.image_id[:19] if variant.image_id else 'refused: ' + variant.refused}")
    return built


def _ignored() -> set[str]:
    """The `docker:index/image:Image` resource's ignoreChanges, as dev's plan records it."""
    images = [resource for resource in plan_stack("dev").resources if resource.type == "docker:index/image:Image"]
    assert len(images) == 1
    return set(images[0].options.get("ignoreChanges") or [])


def violations(built: list[Variant], tag, ignored: set[str]) -> list[str]:
    """Inputs whose change gave another image under the baseline's tag, not ignored."""
    baseline = built[0]
    baseline_tag = tag(baseline.context, baseline.args, baseline.platform)
    found = []
    for variant in built[1:]:
        if variant.image_id is None or variant.image_id == baseline.image_id:
            continue
        if tag(variant.context, variant.args, variant.platform) == baseline_tag and variant.input not in ignored:
            found.append(variant.input)
    return found


def test_every_input_that_changes_the_image_changes_the_tag(variants: list[Variant]) -> None:
    assert violations(variants, image_spec.tag_for, _ignored()) == []
    # The identical rebuild is the same image (BuildKit's cache), so "changed" above means content.
    assert variants[1].input == "rebuild" and variants[1].image_id == variants[0].image_id
    changed = [variant.input for variant in variants[2:] if variant.image_id not in (None, variants[0].image_id)]
    assert {"build.args.VCS_REVISION", "build.args.BASE_IMAGE", "build.context"} <= set(changed), changed


def test_a_build_arg_left_out_of_the_tag_is_caught(variants: list[Variant]) -> None:
    def planted(context: Path, args: dict[str, str], platform: str) -> str:
        return image_spec.tag_for(context, {**args, "BASE_IMAGE": "left-out"}, platform)

    assert "build.args.BASE_IMAGE" in violations(variants, planted, set())


def test_pushing_every_build_overwrites_no_tag(engine: Engine, variants: list[Variant],
                                              upstream_registry: Registry) -> None:
    registry = upstream_registry
    pushed: dict[str, str] = {}
    overwritten = []
    with timed("tag rule pushes"):
        for variant in variants:
            if variant.image_id is None:
                continue
            tag = image_spec.tag_for(variant.context, variant.args, variant.platform)
            name = f"{registry.address}/gtp/tag-rule:{tag}"
            engine.docker("tag", variant.image_id, name)
            engine.docker("push", name, timeout=1200)
            digest = json.loads(engine.docker("image", "inspect", name).stdout)[0]["RepoDigests"]
            digest = next(ref.split("@")[1] for ref in digest if ref.startswith(f"{registry.address}/gtp/tag-rule@"))
            if tag in pushed and pushed[tag] != digest:
                overwritten.append(f"{variant.input}: {tag} was {pushed[tag]}, now {digest}")
            pushed[tag] = digest
    assert overwritten == []
    assert len(pushed) >= 4, pushed
