"""The Pulumi pack: metadata, construction (stubbed: PolicyPack(...) serves gRPC forever), engine adapter."""
from __future__ import annotations

import runpy
from pathlib import Path

import pulumi_policy
from policy_stack_builder import COMPUTED, compliant_stack, facts, find
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.gtp_policy import POLICIES
from policy.gtp_policy.engine import build_pack, build_policies, plain

PACK_DIR = Path(__file__).resolve().parents[2] / "policy"


class StubPack:
    def __init__(self, name, policies, **kwargs):
        self.name, self.policies, self.kwargs = name, policies, kwargs


def test_every_policy_has_name_description_enforcement_and_facts_schema():
    built = build_policies()
    assert [p.name for p in built] == [r.name for r in POLICIES]
    for policy, rule in zip(built, POLICIES):
        assert policy.description == rule.description
        assert policy.enforcement_level == pulumi_policy.EnforcementLevel.MANDATORY
        assert policy.config_schema.required == ["stack", "ephemeral", "production"]
        expected = (pulumi_policy.ResourceValidationPolicy if rule.scope == "resource"
                    else pulumi_policy.StackValidationPolicy)
        assert isinstance(policy, expected)


def test_build_pack_passes_valid_arguments():
    pack = build_pack(StubPack)
    assert pack.name == "gtp-platform"
    assert pack.kwargs["enforcement_level"] == pulumi_policy.EnforcementLevel.MANDATORY
    assert len(pack.policies) == len(POLICIES)


def test_main_imports_without_serving():
    namespace = runpy.run_path(str(PACK_DIR / "__main__.py"), run_name="gtp_policy_pack_under_test")
    assert callable(namespace["build_pack"])


def test_pack_files_exist():
    text = (PACK_DIR / "PulumiPolicy.yaml").read_text()
    assert "runtime:" in text and "python" in text
    assert "pulumi-policy" in (PACK_DIR / "requirements.txt").read_text()


def test_plain_unwraps_engine_unknowns():
    props = unknown_checking_proxy({"a": {"b": UNKNOWN_STRING_VALUE, "c": [1.0, UNKNOWN_STRING_VALUE]}})
    assert plain(props) == {"a": {"b": COMPUTED, "c": [1.0, COMPUTED]}}


def _options(protect=False, parent=None):
    return pulumi_policy.PolicyResourceOptions(protect, [], None, [], pulumi_policy.PolicyCustomTimeouts(0, 0, 0),
                                               [], parent)


def test_resource_policy_reports_through_engine_arguments():
    record = find(compliant_stack("dev"), "-gpu-lt")
    record["inputs"]["metadataOptions"]["httpPutResponseHopLimit"] = 2.0
    record["inputs"]["keyName"] = UNKNOWN_STRING_VALUE  # unknowns must not raise UnknownValueError
    args = pulumi_policy.ResourceValidationArgs(record["type"], unknown_checking_proxy(record["inputs"]),
                                                record["urn"], record["name"], _options(), None,
                                                config=facts("dev"))
    policy = next(p for p in build_policies() if p.name == "nodes-imdsv2")
    reports = []
    policy.validate(args, lambda message, urn=None: reports.append((message, urn)))
    assert len(reports) == 1
    assert "nodes-imdsv2: aws:ec2/launchTemplate:LaunchTemplate 'dev-gpu-lt'" in reports[0][0]
    assert "metadataOptions.httpPutResponseHopLimit = 2.0" in reports[0][0]


def test_stack_policy_reports_through_engine_arguments():
    records = compliant_stack("bench")
    find(records, "-results")["options"]["protect"] = True
    resources = {}
    for record in records:
        resources[record["urn"]] = pulumi_policy.PolicyResource(
            record["type"], unknown_checking_proxy(record["inputs"]), record["urn"], record["name"],
            _options(record["options"]["protect"]), None, None, [], {})
    for record in records:
        resource = resources[record["urn"]]
        resource.parent = resources.get(record["parent"])
        resource.dependencies = [resources[d] for d in record["dependsOn"]]
    args = pulumi_policy.StackValidationArgs(list(resources.values()), config=facts("bench"))
    policy = next(p for p in build_policies() if p.name == "ephemeral-no-protect")
    reports = []
    policy.validate(args, lambda message, urn=None: reports.append((message, urn)))
    assert reports == [(reports[0][0], "urn:pulumi:bench-a::gtp::aws:s3/bucket:Bucket::bench-a-results")]
    assert "options.protect = true" in reports[0][0]


def test_missing_pack_config_fails_loudly():
    record = find(compliant_stack("dev"), "-gpu-lt")
    args = pulumi_policy.ResourceValidationArgs(record["type"], unknown_checking_proxy(record["inputs"]),
                                                record["urn"], record["name"], _options(), None, config={})
    policy = next(p for p in build_policies() if p.name == "nodes-imdsv2")
    try:
        policy.validate(args, lambda *a: None)
    except ValueError as error:
        assert "--policy-pack-config" in str(error)
    else:
        raise AssertionError("expected a ValueError naming --policy-pack-config")
