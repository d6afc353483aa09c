"""The objects of an operator's upstream manifest: the engine registers each as a child of its ConfigFile (`make
up-test` found the pack judging them for the first time). The rules on how a container is written and on what a
production workload runs leave them to Checkov (Rule.upstream); the host boundaries and the air gap judge them."""
from __future__ import annotations

import copy

import pytest
from policy_stack_builder import compliant_stack, facts

from policy.gtp_policy import run_policies
from policy.gtp_policy.model import from_upstream_manifest
from policy.gtp_policy.registry import POLICIES

CONFIG_FILE = "urn:pulumi:dev::gtp::gtp:workload:TrainingOperators$kubernetes:yaml/v2:ConfigFile::operators-x"
CHILD = ("urn:pulumi:dev::gtp::gtp:workload:TrainingOperators$kubernetes:yaml/v2:ConfigFile$"
         "kubernetes:apps/v1:Deployment::operators-x:x-system/x-controller")
OWN = "urn:pulumi:dev::gtp::gtp:workload:TrainingJob$kubernetes:apps/v1:Deployment::x-controller"


def _provider(kind: str) -> str:
    return next(r["urn"] for r in compliant_stack(kind) if r["type"] == "pulumi:providers:kubernetes")


def _deployment(urn: str, kind: str = "dev", **pod: object) -> dict:
    """A Deployment written as upstream manifests are: a tag, no security context, requests below limits."""
    return {"urn": urn, "type": "kubernetes:apps/v1:Deployment", "name": urn.rsplit("::", 1)[1], "custom": True,
            "parent": CONFIG_FILE if "ConfigFile$" in urn else None, "provider": _provider(kind), "dependsOn": [],
            "options": {"protect": False, "retainOnDelete": False, "deleteBeforeReplace": False,
                        "ignoreChanges": []},
            "inputs": {"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "x-controller", "namespace": "x-system"},
                       "spec": {"template": {"spec": {**pod, "containers": [{
                           "name": "manager", "image": "registry.example/x/controller:v1.0.0",
                           "resources": {"requests": {"cpu": "10m"}, "limits": {"cpu": "500m"}}}]}}}}}


@pytest.mark.parametrize(("urn", "expected"), [
    (CHILD, True), (CONFIG_FILE, False), (OWN, False),
    ("urn:pulumi:dev::gtp::gtp:x:Y$kubernetes:yaml/v2:ConfigGroup$kubernetes:core/v1:ConfigMap::g:a/b", True),
    ("not a urn", False), (None, False),
])
def test_an_upstream_manifests_object_is_known_by_its_urn(urn, expected):
    assert from_upstream_manifest({"urn": urn}) is expected


def _violations(kind: str, *records: dict) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for violation in run_policies([*compliant_stack(kind), *records], facts(kind)):
        found.setdefault(violation.urn or "", set()).add(violation.policy_name)
    return found


@pytest.mark.parametrize("kind", ["dev", "prod"])
def test_how_an_upstream_container_is_written_is_left_to_checkov(kind):
    found = _violations(kind, _deployment(CHILD, kind), _deployment(OWN, kind))
    skipped = {rule.name for rule in POLICIES if not rule.upstream}
    assert CHILD not in found, found.get(CHILD)
    # The same object written by the program itself breaks every one of those rules that applies to the stack.
    assert found[OWN] >= skipped - {"production-image-signed-or-own-build", "k8s-image-from-stack-registry"}
    if kind == "prod":
        assert "production-image-signed-or-own-build" in found[OWN]


def test_the_host_boundaries_judge_upstream_objects_too():
    found = _violations("dev", _deployment(CHILD, hostNetwork=True,
                                           volumes=[{"name": "h", "hostPath": {"path": "/"}}]))
    assert found[CHILD] == {"k8s-no-host-namespaces", "k8s-no-host-path"}


def test_the_air_gap_judges_upstream_objects_too():
    stack = copy.deepcopy(compliant_stack("dev"))
    site = {**facts("dev"), "siteRegistry": "site.example:5000"}
    violations = run_policies([*stack, _deployment(CHILD)], site)
    assert {v.policy_name for v in violations if v.urn == CHILD} == {"offline-images-from-site-registry"}
