"""production-image-signed-or-own-build: production pods run the stack's own build or a signed digest, nothing else."""
from __future__ import annotations

from pathlib import Path

import pytest
from policy_stack_builder import COMPUTED, IMAGE, REGISTRY, compliant_stack, facts, find, record, set_path

from policy.gtp_policy import Facts, run_policies
from policy.gtp_policy.rules_supply_chain import DOCKER_IMAGE, REGISTRY_IMAGE, built_reference

RULE = "production-image-signed-or-own-build"
WORKER_IMAGE = ["inputs", "spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "image"]
OTHER = REGISTRY + "@sha256:" + "b" * 64


def violations(records, kind="prod", **overrides):
    return [v.message for v in run_policies(records, facts(kind, **overrides)) if v.policy_name == RULE]


def with_build(records, outputs=None, type_=DOCKER_IMAGE):
    """Adds the stack's image build (its outputs as a stack policy sees them) and makes the PyTorchJob's image
    come from it, as the program does (the SDK records the build as a dependency of the job)."""
    build = record("prod", type_, "trainer-image", {"imageName": REGISTRY + ":ctx-0123", **(outputs or {})})
    records.append(build)
    job = find(records, "-pytorchjob")
    job["dependsOn"] = sorted(set(job["dependsOn"]) | {build["urn"]})
    return build, job


def test_a_digest_neither_built_here_nor_signed_fails_in_production_only():
    records = compliant_stack("prod")
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, OTHER)
    messages = violations(records)
    assert len(messages) == 1 and "containers[pytorch].image" in messages[0] and OTHER in messages[0]
    assert "image.signedDigests" in messages[0]
    assert violations(records, "dev") == []  # dev may run any digest (k8s-image-by-digest still applies)
    assert violations(records, signedDigests=[IMAGE, OTHER]) == []


def test_nothing_signed_and_nothing_built_fails_every_pod():
    records = compliant_stack("prod")
    messages = violations(records, signedDigests=[])
    assert len(messages) >= 4 and all("allowed here: none" in m for m in messages)


def test_unknown_image_passes_only_when_computed_from_the_stacks_pending_build():
    records = compliant_stack("prod")
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, COMPUTED)
    messages = violations(records)
    assert len(messages) == 1 and "not computed from this stack's image build" in messages[0]
    with_build(records)  # preview before the push: the build's digest is unknown too
    assert violations(records) == []


def test_unknown_image_fails_once_the_build_digest_is_known():
    records = compliant_stack("prod")
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, COMPUTED)
    with_build(records, {"repoDigest": OTHER})
    assert len(violations(records)) == 1


def test_unknown_image_from_another_property_than_the_builds_fails():
    # Under the engine the dependency is known per property: the pod spec must be the one computed from the build.
    records = compliant_stack("prod")
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, COMPUTED)
    build, job = with_build(records)
    job["propertyDependencies"] = {"metadata": [build["urn"]], "spec": []}
    assert len(violations(records)) == 1
    job["propertyDependencies"] = {"spec": [build["urn"]]}
    assert violations(records) == []


def test_after_the_push_the_image_must_equal_the_builds_digest():
    records = compliant_stack("prod")
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, OTHER)
    with_build(records, {"repoDigest": OTHER})
    assert violations(records) == []
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, REGISTRY + "@sha256:" + "c" * 64)
    assert len(violations(records)) == 1


def test_registry_image_reference_is_its_name_without_tag_plus_digest():
    digest = "sha256:" + "d" * 64
    build = record("prod", REGISTRY_IMAGE, "trainer-image",
                   {"name": "registry.internal:5000/gtp/trainer:ctx-1", "sha256Digest": digest})
    assert built_reference(build) == "registry.internal:5000/gtp/trainer@" + digest
    assert built_reference({**build, "inputs": {"name": "r/t:ctx-1", "sha256Digest": COMPUTED}}) is None
    records = compliant_stack("prod")
    set_path(find(records, "-pytorchjob"), WORKER_IMAGE, "registry.internal:5000/gtp/trainer@" + digest)
    records.append(build)
    assert violations(records) == []


@pytest.mark.parametrize("value", [["repo:tag"], "repo@sha256:" + "a" * 64, [IMAGE.upper()]])
def test_signed_digests_fact_must_be_digest_references(value):
    with pytest.raises(ValueError, match="signedDigests: expected a list of 'repo@sha256:<64 hex>'"):
        Facts.from_mapping(facts("prod", signedDigests=value))


# ------------------------------------------------------------------ over the real program's plan


def _plan_violations(plan):
    from verify.validate import policy_facts

    resources = [resource.as_json() for resource in plan.resources]
    return [v.message for v in run_policies(resources, policy_facts(plan)) if v.policy_name == RULE]


def test_prod_plan_passes_with_its_own_build():
    from tests.conftest import plan_stack

    plan = plan_stack("prod")
    assert plan.by_type(DOCKER_IMAGE) and _plan_violations(plan) == []


def test_prod_plan_reusing_a_digest_must_list_it_as_signed(tmp_path: Path):
    from tests.conftest import plan_modified

    reference = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-prod-trainer@sha256:" + "e" * 64

    def reuse(signed):
        def edit(config):
            config["gtp:image"].update(build=False, reference=reference, signedDigests=signed)
            config["gtp:image"].pop("keepTaggedImages")  # no ECR repository without a build: nothing reads it
        return edit

    from stack_config import ConfigError

    (tmp_path / "unsigned").mkdir()
    # the config stage refuses it first, before anything is registered; the pack is the second line
    with pytest.raises(ConfigError, match=r"image\.reference: '[^']+' is not in image\.signedDigests"):
        plan_modified(tmp_path / "unsigned", "prod", reuse([]))
    (tmp_path / "signed").mkdir()
    assert _plan_violations(plan_modified(tmp_path / "signed", "prod", reuse([reference]))) == []


def test_signed_digests_config_is_checked_with_its_key_path(tmp_path: Path):
    from stack_config import ConfigError
    from tests.conftest import plan_modified

    def edit(config):
        config["gtp:image"]["signedDigests"] = ["gtp-prod-trainer:latest"]

    with pytest.raises(ConfigError, match=r"image\.signedDigests\[0\].*'gtp-prod-trainer:latest'.*by digest"):
        plan_modified(tmp_path, "prod", edit)
