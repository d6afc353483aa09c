"""Validation of the offline plan with real third-party validators, over the whole rendered cluster.

Every object of `build/plan/<stack>/cluster.yaml` (verify/render.py: the stack's own objects, the vendored Helm
charts rendered by helm, the vendored operator manifests) is validated, not only the objects the stack applies:

- Built-in Kubernetes kinds: `kubernetes-validate`'s strict schemas (unknown fields are errors) for the stack's
  Kubernetes version. A kind that version lacks is an error.
- Custom resources: `kubernetes-validate` passes unknown kinds silently, so each custom resource is checked with
  `jsonschema` against the `openAPIV3Schema` of the CustomResourceDefinition that the SAME cluster installs (a CRD
  object among the rendered ones: an operator manifest's, or a chart's `crds/` or `templates/crds`), at the
  resource's version, which must be served. Schemas are closed like `kubectl apply --validate=strict`: a field the
  schema doesn't declare is an error unless the schema preserves unknown fields. A custom resource whose CRD the
  cluster does not install is an error naming it: the API server would refuse it.

Every error names the object and its source (`ClusterObject.describe()`). Nothing is read from outside the
repository: no CRD directory, no download, no cache.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

from verify.plan_record import COMPUTED, SECRET, Plan, dicts_in
from verify.render import ClusterObject


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    """What was checked, by validator (e.g. `kubernetes-validate` → objects), for the progress line."""

    def count(self, validator: str, amount: int = 1) -> None:
        self.checked[validator] = self.checked.get(validator, 0) + amount

    def summary(self) -> str:
        return ", ".join(f"{validator} {amount}" for validator, amount in self.checked.items()) or "nothing"


def python_pattern(pattern: str) -> str:
    """A CRD `pattern` (RE2 syntax, as the API server reads it) Python's `re` accepts: RE2 allows a flag group
    after the start anchor (Kueue v0.19.2's AdmissionCheck `parameters.kind`: `^(?i)[a-z]...`), Python only at the
    very start, where it means the same for a pattern anchored at its start."""
    match = re.match(r"^\^\(\?([a-z]+)\)", pattern)
    return f"(?{match.group(1)})^{pattern[match.end():]}" if match else pattern


def close_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Make objects with declared properties reject undeclared ones (strict field validation)."""
    schema = copy.deepcopy(dict(schema))

    for node in dicts_in(schema):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        if isinstance(node.get("pattern"), str):
            node["pattern"] = python_pattern(node["pattern"])
    # metadata is validated by the API server's ObjectMeta, not the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return schema


def _path(error: jsonschema.ValidationError) -> str:
    parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return parts.lstrip(".") or "(root)"


def _unmask(node: Any) -> Any:
    """Secret values are masked as "[secret]" in the plan; validate the object's shape, not their content."""
    if isinstance(node, dict):
        return {key: ({} if value == SECRET and key in ("data", "stringData") else _unmask(value))
                for key, value in node.items()}
    if isinstance(node, list):
        return [_unmask(item) for item in node]
    return node


def validate_custom(item: ClusterObject, schema: Mapping[str, Any]) -> Iterator[str]:
    validator = jsonschema.Draft7Validator(schema)
    for error in sorted(validator.iter_errors(item.obj), key=lambda e: list(map(str, e.absolute_path))):
        if error.instance == COMPUTED:
            continue  # known only after apply (e.g. an image digest); the type is checked at apply time
        yield f"{item.describe()}: {_path(error)}: {error.message}"


def validate_builtin(item: ClusterObject, kubernetes_version: str) -> Iterator[str]:
    """kubernetes-validate's strict check of a built-in kind (raises `SchemaNotFoundError` for a kind the version
    lacks). Same schemas and version choice as `kubernetes_validate.validate`, with each schema and its
    definitions loaded once per process instead of once per object."""
    obj = item.obj
    validator = builtin_validator(kubernetes_version, str(obj["apiVersion"]), str(obj["kind"]))
    error = next(iter(validator.iter_errors(_unmask(dict(obj)))), None)  # the first, as `Validator.validate`
    if error is not None:
        yield f"{item.describe()}: {_path(error)}: {error.message}"


@functools.cache
def builtin_validator(kubernetes_version: str, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    wanted = utils.major_minor(kubernetes_version)
    if wanted > utils.latest_version():
        raise utils.VersionNotSupportedError(version=wanted)
    version = [v for v in utils.all_versions() if utils.major_minor(v) <= wanted][-1]
    schema_dir = f"kubernetes-json-schema/v{version}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"{schema_dir}/{kind.lower()}-{group_version}.json", kubernetes_version)
    except FileNotFoundError:
        raise kubernetes_validate.SchemaNotFoundError(version=wanted, kind=kind, api_version=api_version) from None
    definitions = _definitions(schema_dir, kubernetes_version)
    registry = Resource.from_contents(schema) @ (definitions @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(schema_dir: str, kubernetes_version: str) -> Any:
    from kubernetes_validate import utils
    from referencing import Resource

    return Resource.from_contents(utils.schema_contents(f"{schema_dir}/_definitions.json", kubernetes_version))


@dataclass(frozen=True)
class InstalledVersion:
    """One version of a CustomResourceDefinition the cluster installs."""
    crd: ClusterObject
    served: bool
    schema: Mapping[str, Any]
    """The version's `schema.openAPIV3Schema`, as the CRD declares it (not yet closed)."""


def installed_crds(objects: Iterable[ClusterObject]) -> dict[tuple[str, str], InstalledVersion]:
    """(apiVersion, kind) → the installed CRD's version, for every CustomResourceDefinition among `objects`
    (`apiextensions.k8s.io/v1`: each version carries its own schema and `served` flag)."""
    installed: dict[tuple[str, str], InstalledVersion] = {}
    for item in objects:
        if item.kind != "CustomResourceDefinition":
            continue
        spec = item.obj.get("spec") or {}
        group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
            installed[(f"{group}/{version.get('name')}", str(kind))] = InstalledVersion(
                item, bool(version.get("served")), schema)
    return installed


def _is_builtin_group(api_version: str) -> bool:
    """Core (`v1`), the unqualified groups (`apps`, `batch`...) and the `*.k8s.io` groups are Kubernetes' own."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def _as_cluster_object(item: ClusterObject | Mapping[str, Any]) -> ClusterObject:
    return item if isinstance(item, ClusterObject) else ClusterObject("stack", dict(item))


def validate_objects(objects: Iterable[ClusterObject | Mapping[str, Any]], kubernetes_version: str,
                     report: Report) -> None:
    """Validate every object of one cluster; custom resources against the CRDs installed by the same objects.
    A plain mapping is taken as a stack object (source `stack`)."""
    items = [_as_cluster_object(item) for item in objects]
    installed = installed_crds(items)
    closed: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items:
        key = (str(item.obj.get("apiVersion")), item.kind)
        version = installed.get(key)
        if version is not None:
            report.count("installed CRD schemas")
            if not version.served:
                report.errors.append(f"{item.describe()}: {key[0]} {key[1]} is not a served version of "
                                     f"{version.crd.describe()}")
                continue
            if key not in closed:
                closed[key] = close_schema(version.schema)
            report.errors.extend(validate_custom(item, closed[key]))
            continue
        try:
            report.count(f"kubernetes-validate {kubernetes_version}")
            report.errors.extend(validate_builtin(item, kubernetes_version))
        except kubernetes_validate.SchemaNotFoundError:
            if _is_builtin_group(key[0]):
                report.errors.append(f"{item.describe()}: {key[0]} {key[1]} does not exist in "
                                     f"Kubernetes {kubernetes_version}")
            else:
                group = key[0].rpartition("/")[0]
                served = sorted(f"{api} {kind}" for (api, kind) in installed if api.startswith(group + "/"))
                report.errors.append(
                    f"{item.describe()}: custom resource {key[0]} {key[1]} has no CustomResourceDefinition "
                    f"installed in this cluster (installed for {group}: {', '.join(served) or 'none'}); install "
                    "its operator or chart in the same stack")


def policy_facts(plan: Plan) -> dict[str, Any]:
    """What the policy pack needs to know about the stack and can't read from its resources."""
    config = plan.config
    required = ["gtp:lifecycle", "gtp:project", "gtp:stack"]
    if config.lifecycle.ephemeral:
        required += ["gtp:expires-at", "gtp:ttl-hours"]
    registry = config.image.existing_registry if config.image.registry == "existing" else None
    if not config.image.build and config.image.reference:
        registry = config.image.reference.split("@", 1)[0]
    return {"stack": plan.stack, "ephemeral": config.lifecycle.ephemeral, "production": config.lifecycle.protect,
            "registry": registry, "requiredTags": sorted(required),
            "signedDigests": list(config.image.signed_digests),
            # An offline (air-gapped) stack: every image must come from the site registry (policy
            # offline-images-from-site-registry); absent on other stacks, so their pack config doesn't change.
            **({"siteRegistry": config.image.air_gap.site_registry} if config.image.air_gap else {})}


def run_policy_pack(plan: Plan, report: Report) -> None:
    """The policy pack (policy/) over the recorded resources, exactly as `pulumi preview --policy-pack` would: with
    the objects each operator manifest's ConfigFile registers under the real provider (verify/render.py
    `config_file_children`), which the mocks never see."""
    from policy.gtp_policy import run_policies
    from verify.render import registered

    resources = registered(resource.as_json() for resource in plan.resources)
    report.count("policy pack (resources)", len(resources))
    for violation in run_policies(resources, policy_facts(plan)):
        line = f"policy {violation.policy_name}: {violation.message}"
        if violation.enforcement == "mandatory":
            report.errors.append(line)
        else:
            report.notes.append(line)


def validate_plan(plan: Plan, out: Path | None, objects: Iterable[ClusterObject]) -> Report:
    """Validate every object of the rendered cluster (`verify.render.render_cluster(plan)`) and run the policy
    pack over the plan's resources; writes the policy facts to `out`."""
    report = Report()
    validate_objects(objects, plan.config.kubernetes_version, report)
    run_policy_pack(plan, report)
    if out is not None:
        from policy.gtp_policy import pack_config

        facts = policy_facts(plan)
        (out / "policy-facts.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
        # What `pulumi preview --policy-pack policy --policy-pack-config <file>` takes: the same facts, per policy.
        (out / "policy-pack-config.json").write_text(json.dumps(pack_config(facts), indent=2, sort_keys=True) + "\n")
    return report


LUSTRE_LNET_PORTS = ((988, 988), (1018, 1023))
"""FSx for Lustre's LNET ports, both directions between the file system's group and itself and its clients (FSx for
Lustre guide, "File system access control with Amazon VPC"). Restated here, not imported, so the check doesn't
trust the component it checks."""


def file_system_access_problems(plan: Plan, client_group: str) -> list[str]:
    """Every FSx for Lustre file system's security groups allow its LNET ports in both directions, within the file
    system's group and between it and the clients' group (the EKS cluster security group). Needs an apply-like plan
    (`known_outputs=True`): a preview leaves the group ids unknown. client_group: the cluster security group's id
    in that plan (EKS computes it)."""
    def rules(kind: str) -> list[Mapping[str, Any]]:
        return [r.inputs for r in plan.by_type(f"aws:vpc/securityGroup{kind}Rule:SecurityGroup{kind}Rule")]

    def allows(kind: str, group: str, peer: str, low: int, high: int) -> bool:
        return any(rule.get("securityGroupId") == group and rule.get("referencedSecurityGroupId") == peer
                   and (rule.get("ipProtocol") == "-1"
                        or (rule.get("ipProtocol") == "tcp" and rule["fromPort"] <= low and rule["toPort"] >= high))
                   for rule in rules(kind))

    problems = []
    for file_system in plan.by_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        groups = file_system.inputs.get("securityGroupIds") or []
        if any(not isinstance(group, str) or group == COMPUTED for group in groups):
            problems.append(f"{file_system.name}: security groups unknown (plan with known outputs)")
            continue
        client = client_group
        for group in groups:
            for low, high in LUSTRE_LNET_PORTS:
                ports = f"{low}-{high}" if low != high else str(low)
                for kind, owner, peer, what in (
                        ("Ingress", group, group, "its own group in"), ("Egress", group, group, "its own group out"),
                        ("Ingress", group, client, "the clients in"), ("Egress", group, client, "the clients out"),
                        ("Ingress", client, group, "the clients' group admitting it")):
                    if not allows(kind, owner, peer, low, high):
                        problems.append(f"{file_system.name}: security group {group} lacks LNET {ports}/tcp with "
                                        f"{what}")
    return problems


def file_system_rule_order_problems(plan: Plan) -> list[str]:
    """Every rule of an FSx for Lustre file system's security groups is created before the file system: FSx checks
    the rules when it creates the file system (components/shared_storage.py), so each rule must be an ancestor of it
    in the plan (`dependsOn`, through parents and providers: `Plan.depends_transitively`). Needs an apply-like plan
    (`known_outputs=True`) to match a rule's `securityGroupId` with the file system's groups."""
    rules = [*plan.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"),
             *plan.by_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")]
    problems = []
    for file_system in plan.by_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        groups = set(file_system.inputs.get("securityGroupIds") or [])
        for rule in rules:
            if rule.inputs.get("securityGroupId") in groups and not plan.depends_transitively(file_system, rule):
                problems.append(f"{file_system.name}: created without waiting for rule {rule.name} of its security "
                                f"group {rule.inputs['securityGroupId']}")
    return problems
