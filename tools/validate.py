"""Validation of the whole rendered cluster with real third-party validators.

Every object that would exist after `pulumi up` (tools/cluster.py: the stack's objects, every Helm release rendered by
helm from the vendored chart, the vendored operator manifests) is checked:
- built-in Kubernetes kinds: `kubernetes-validate` (strict: unknown fields are errors) for the stack's Kubernetes
  version;
- custom resources: `kubernetes-validate` passes unknown kinds silently, so each custom resource is checked with
  `jsonschema` against the `openAPIV3Schema` of the CustomResourceDefinition *installed in that same cluster* (the CRD
  objects among the rendered ones: operator manifests, charts' CRDs). Objects are closed like `kubectl apply
  --validate=strict`: a field the schema doesn't declare is an error unless the schema preserves unknown fields. A
  custom resource whose CRD no installed component provides is an error: its `apply` would fail.
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

from tools.cluster import ClusterObject
from tools.plan_record import COMPUTED, SECRET, Plan


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


def installed_crd_schemas(crds: Iterable[ClusterObject]) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → closed JSON schema of every served version of the given CustomResourceDefinitions."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for crd in crds:
        schemas.update(_crd_schemas(crd.source, crd.name, crd.obj))
    return schemas


def _crd_schemas(source: str, name: str, crd: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    # A CRD comes from a vendored, digest-checked file (operator manifest or chart template), so its source and name
    # identify its content: close each one once per process (`make plan-all` validates every stack against them).
    key = (source, name)
    if key not in _CLOSED:
        spec = crd.get("spec") or {}
        group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
        _CLOSED[key] = {(f"{group}/{version['name']}", kind): close_schema(version["schema"]["openAPIV3Schema"])
                        for version in spec.get("versions") or []
                        if version.get("served", True) and (version.get("schema") or {}).get("openAPIV3Schema")}
    return _CLOSED[key]


_CLOSED: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}


def close_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Make objects with declared properties reject undeclared ones (strict field validation)."""
    schema = copy.deepcopy(dict(schema))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    # metadata is validated by the API server's ObjectMeta, not the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return schema


def _describe(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{obj.get('kind')} {namespace + '/' if namespace else ''}{metadata.get('name')}"


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


def validate_custom(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    validator = jsonschema.Draft7Validator(schema)
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        if error.instance == COMPUTED:
            continue  # known only after apply (e.g. an image digest); the type is checked at apply time
        yield f"{_describe(obj)}: {_path(error)}: {error.message}"


def validate_builtin(obj: Mapping[str, Any], kubernetes_version: str) -> Iterator[str]:
    """kubernetes-validate's strict check of a built-in kind (raises `SchemaNotFoundError` for a kind the version
    lacks). Same schemas and version choice as `kubernetes_validate.validate`, with each schema and its
    definitions loaded once per process instead of once per object."""
    validator = builtin_validator(kubernetes_version, str(obj["apiVersion"]), str(obj["kind"]))
    error = next(iter(validator.iter_errors(_unmask(dict(obj)))), None)  # the first, as `Validator.validate`
    if error is not None:
        yield f"{_describe(obj)}: {_path(error)}: {error.message}"


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


def _as_cluster_objects(objects: Iterable[ClusterObject | Mapping[str, Any]]) -> list[ClusterObject]:
    return [item if isinstance(item, ClusterObject) else ClusterObject("stack", dict(item)) for item in objects]


def validate_objects(objects: Iterable[ClusterObject | Mapping[str, Any]], kubernetes_version: str, report: Report,
                     crds: Iterable[ClusterObject | Mapping[str, Any]] | None = None) -> None:
    """Validate `objects` (the rendered cluster, or plain objects meaning `stack`); custom resources against the
    CRDs among `crds` (default: the CustomResourceDefinitions among `objects` themselves, i.e. what the cluster
    installs)."""
    items = _as_cluster_objects(objects)
    installed = [item for item in (_as_cluster_objects(crds) if crds is not None else items)
                 if item.kind == "CustomResourceDefinition"]
    schemas = installed_crd_schemas(installed)
    for item in items:
        obj = item.obj
        where = _describe(obj) + ("" if item.source == "stack" else f" ({item.source})")
        key = (obj["apiVersion"], obj["kind"])
        if key in schemas:
            report.count("CRD schemas")
            report.errors.extend(f"{where}{line[len(_describe(obj)):]}" for line in validate_custom(obj, schemas[key]))
            continue
        try:
            report.count(f"kubernetes-validate {kubernetes_version}")
            report.errors.extend(f"{where}{line[len(_describe(obj)):]}"
                                 for line in validate_builtin(obj, kubernetes_version))
        except kubernetes_validate.SchemaNotFoundError:
            group = obj["apiVersion"].rsplit("/", 1)[0] if "/" in obj["apiVersion"] else ""
            if "." in group and not group.endswith(".k8s.io"):
                report.errors.append(f"{where}: no CustomResourceDefinition for {obj['apiVersion']} {obj['kind']} is "
                                     "installed in this cluster: install its operator (and make the object depend on it)")
            else:
                report.errors.append(f"{where}: {obj['apiVersion']} {obj['kind']} does not exist in Kubernetes "
                                     f"{kubernetes_version}")


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
            "signedDigests": list(config.image.signed_digests)}


def run_policy_pack(plan: Plan, report: Report) -> None:
    """The policy pack (policy/) over the recorded resources, exactly as `pulumi preview --policy-pack` would."""
    from policy.gtp_policy import run_policies

    resources = [resource.as_json() for resource in plan.resources]
    report.count("policy pack (resources)", len(resources))
    for violation in run_policies(resources, policy_facts(plan)):
        line = f"policy {violation.policy_name}: {violation.message}"
        if violation.enforcement == "mandatory":
            report.errors.append(line)
        else:
            report.notes.append(line)


def validate_plan(plan: Plan, out: Path | None = None, objects: list[ClusterObject] | None = None) -> Report:
    """Validate every object of the rendered cluster (`objects`; default: the stack's own objects, with no CRD
    installed) and run the policy pack; writes the policy facts to `out`."""
    report = Report()
    validate_objects(objects if objects is not None else plan.kubernetes_objects(), plan.config.kubernetes_version,
                     report)
    run_policy_pack(plan, report)
    if out is not None:
        from policy.gtp_policy import pack_config

        facts = policy_facts(plan)
        (out / "policy-facts.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
        # What `pulumi preview --policy-pack policy --policy-pack-config <file>` takes: the same facts, per policy.
        (out / "policy-pack-config.json").write_text(json.dumps(pack_config(facts), indent=2, sort_keys=True) + "\n")
    return report
