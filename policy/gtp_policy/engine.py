"""Adapter between pulumi_policy and the pure rules: engine arguments → plain records → findings → violations.

`ResourceValidationArgs` carries no parent or dependencies, so rules that need other resources are
StackValidationPolicies. The engine does not expose `retainOnDelete`; records built here lack it.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi_policy

# Private helpers of the SDK's unknown-value proxy (pulumi_policy/proxy.py): the only way to read a
# preview's props without raising UnknownValueError on the first unknown.
from pulumi_policy.proxy import _DictProxy, _is_unknown, _ListProxy

from .graph import StackIndex
from .model import COMPUTED, FACTS_CONFIG_SCHEMA, SECRET, Facts, Rule, format_message
from .registry import POLICIES

_ENFORCEMENT = {
    "mandatory": pulumi_policy.EnforcementLevel.MANDATORY,
    "advisory": pulumi_policy.EnforcementLevel.ADVISORY,
}


def plain(value: Any) -> Any:
    """Unwraps the SDK's unknown-checking proxies into plain data; unknowns become COMPUTED."""
    if isinstance(value, pulumi_policy.Secret):
        return SECRET
    if isinstance(value, str):
        return COMPUTED if _is_unknown(value) else value
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, (_DictProxy, _ListProxy)):
        value = value["__target"]  # reading through the proxy would raise on the first unknown
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [plain(v) for v in value]
    return str(value)  # assets and archives: only their presence matters to the rules


def _options(opts: Any) -> dict:
    return {
        "protect": bool(getattr(opts, "protect", False)),
        "retainOnDelete": None,  # not exposed by the policy engine
        "deleteBeforeReplace": getattr(opts, "delete_before_replace", None),
        "ignoreChanges": list(getattr(opts, "ignore_changes", None) or []),
    }


def _provider_record(provider: Any) -> dict:
    return {"urn": provider.urn, "type": provider.resource_type, "name": provider.name, "custom": True,
            "parent": None, "provider": None, "dependsOn": [], "options": _options(None),
            "inputs": plain(provider.props)}


def record_from_resource_args(args: pulumi_policy.ResourceValidationArgs) -> dict:
    return {
        "urn": args.urn, "type": args.resource_type, "name": args.name, "custom": True,
        "parent": getattr(args.opts, "parent", None),
        "provider": args.provider.urn if args.provider is not None else None,
        "dependsOn": [], "options": _options(args.opts), "inputs": plain(args.props),
    }


def record_from_policy_resource(resource: pulumi_policy.PolicyResource) -> dict:
    return {
        "urn": resource.urn, "type": resource.resource_type, "name": resource.name,
        "custom": not resource.resource_type.startswith("pulumi:pulumi:"),
        "parent": resource.parent.urn if resource.parent is not None else None,
        "provider": resource.provider.urn if resource.provider is not None else None,
        "dependsOn": [d.urn for d in resource.dependencies],
        "propertyDependencies": {k: [d.urn for d in v] for k, v in (resource.property_dependencies or {}).items()},
        "options": _options(resource.opts), "inputs": plain(resource.props),
    }


def records_from_stack_args(args: pulumi_policy.StackValidationArgs) -> list[dict]:
    """All stack resources as records, plus a record for every provider not itself listed."""
    records = [record_from_policy_resource(r) for r in args.resources]
    known = {r["urn"] for r in records}
    for resource in args.resources:
        provider = resource.provider
        if provider is not None and provider.urn not in known:
            known.add(provider.urn)
            records.append(_provider_record(provider))
    return records


def facts_from_config(config: Mapping[str, Any]) -> Facts:
    try:
        return Facts.from_mapping(dict(config or {}))
    except ValueError as error:
        raise ValueError(f"{error}\nconfigure the pack with `pulumi preview --policy-pack policy "
                         "--policy-pack-config <file>`; write the file with "
                         "`python -m policy.gtp_policy.offline --pack-config <policy-facts.json>`") from error


def _resource_validate(rule: Rule) -> Callable:
    def validate(args: pulumi_policy.ResourceValidationArgs, report_violation: Callable) -> None:
        facts = facts_from_config(args.get_config())
        record = record_from_resource_args(args)
        if not rule.judges(record):
            return
        for finding in rule.check(record, facts) or ():
            report_violation(format_message(rule.name, record, finding), None)
    return validate


def _stack_validate(rule: Rule) -> Callable:
    def validate(args: pulumi_policy.StackValidationArgs, report_violation: Callable) -> None:
        facts = facts_from_config(args.get_config())
        index = StackIndex([record for record in records_from_stack_args(args) if rule.judges(record)])
        for finding in rule.check(index, facts) or ():
            urn = finding.record.get("urn") if finding.record is not None else None
            report_violation(format_message(rule.name, finding.record, finding), urn)
    return validate


def build_policies() -> list[pulumi_policy.Policy]:
    schema = pulumi_policy.PolicyConfigSchema(properties=FACTS_CONFIG_SCHEMA["properties"],
                                              required=FACTS_CONFIG_SCHEMA["required"])
    policies: list[pulumi_policy.Policy] = []
    for rule in POLICIES:
        common = dict(name=rule.name, description=rule.description,
                      enforcement_level=_ENFORCEMENT[rule.enforcement], config_schema=schema)
        if rule.scope == "resource":
            policies.append(pulumi_policy.ResourceValidationPolicy(validate=_resource_validate(rule), **common))
        else:
            policies.append(pulumi_policy.StackValidationPolicy(validate=_stack_validate(rule), **common))
    return policies


def build_pack(pack_class: Callable[..., Any] | None = None) -> Any:
    """Builds the pack. `pulumi_policy.PolicyPack(...)` starts the gRPC server and blocks forever, so tests
    pass a stub `pack_class` with the same signature."""
    pack_class = pack_class or pulumi_policy.PolicyPack
    return pack_class(
        "gtp-platform",
        policies=build_policies(),
        enforcement_level=pulumi_policy.EnforcementLevel.MANDATORY,
        description="GPU training platform guardrails: EKS, GPU nodes, ECR, IAM, pod security, GPU sharing, "
                    "destroy safety.",
        repository=os.environ.get("GTP_REPOSITORY_URL") or None,
    )
