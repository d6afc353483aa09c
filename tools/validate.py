"""Validation of the offline plan with real third-party validators.

- Built-in Kubernetes kinds: `kubernetes-validate` (strict: unknown fields are errors) for the stack's
  Kubernetes version.
- Custom resources: `kubernetes-validate` passes unknown kinds silently, so each custom resource is checked
  with `jsonschema` against the `openAPIV3Schema` of the upstream CRD of the pinned operator version
  (`catalog.versions.CRD_SOURCES`). Objects are closed like `kubectl apply --validate=strict`: a field the schema
  doesn't declare is an error unless the schema preserves unknown fields.

CRD files come from `$GTP_CRD_DIR`, else the project's `../shared/crds`, else a cache under
`~/.cache/gtp/crds` filled from the upstream URLs on first use. With none of them the CRD part is skipped
with a note saying so; nothing else is.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from catalog import versions
from tools.plan_record import COMPUTED, ROOT, SECRET, Plan

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gtp" / "crds"


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


def crd_dir(download: bool = True) -> tuple[Path | None, str]:
    """Where CRD schemas are read from, and how they were found."""
    env = os.environ.get("GTP_CRD_DIR")
    if env:
        return Path(env), "$GTP_CRD_DIR"
    shared = ROOT.parent / "shared" / "crds"
    if all((shared / name).exists() for name in versions.CRD_SOURCES):
        return shared, "../shared/crds"
    if all((CACHE_DIR / name).exists() for name in versions.CRD_SOURCES):
        return CACHE_DIR, str(CACHE_DIR)
    if not download:
        return None, "no offline copy"
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        for name, url in versions.CRD_SOURCES.items():
            with urllib.request.urlopen(url, timeout=15) as response:  # noqa: S310 (fixed https URLs)
                (CACHE_DIR / name).write_bytes(response.read())
    except OSError as error:
        return None, f"no $GTP_CRD_DIR, no ../shared/crds, and downloading failed ({error})"
    return CACHE_DIR, f"downloaded to {CACHE_DIR}"


def load_crd_schemas(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → closed JSON schema, for every CRD file of the pinned operators. Parsed once per
    process (`make plan-all` validates every stack against the same schemas); treat the result as read-only."""
    return _crd_schemas(str(directory))


@functools.cache
def _crd_schemas(directory: str) -> dict[tuple[str, str], dict[str, Any]]:
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for name in versions.CRD_SOURCES:
        # libyaml's parser: the CRDs are large, and the pure-Python one takes seconds.
        crd = yaml.load((Path(directory) / name).read_text(), Loader=YAML_LOADER)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            schemas[(f"{group}/{version['name']}", kind)] = close_schema(schema)
    return schemas


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


def validate_objects(objects: list[dict[str, Any]], kubernetes_version: str, report: Report) -> None:
    directory, source = crd_dir()
    schemas = load_crd_schemas(directory) if directory else {}
    if directory is None:
        report.notes.append(f"custom resources NOT validated against upstream CRDs: {source}")
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"])
        if "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].endswith(".k8s.io/v1"):
            if key in schemas:
                report.count("CRD schemas")
                report.errors.extend(validate_custom(obj, schemas[key]))
            elif directory is not None:
                report.errors.append(f"{_describe(obj)}: no pinned CRD schema for {obj['apiVersion']} {obj['kind']}")
            continue
        try:
            report.count(f"kubernetes-validate {kubernetes_version}")
            report.errors.extend(validate_builtin(obj, kubernetes_version))
        except kubernetes_validate.SchemaNotFoundError:
            report.errors.append(f"{_describe(obj)}: {obj['apiVersion']} {obj['kind']} does not exist in "
                                 f"Kubernetes {kubernetes_version}")


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


def validate_plan(plan: Plan, out: Path | None = None) -> Report:
    """Validate every object of the plan and run the policy pack; writes the policy facts to `out`."""
    report = Report()
    validate_objects(plan.kubernetes_objects(), plan.config.kubernetes_version, report)
    run_policy_pack(plan, report)
    if out is not None:
        from policy.gtp_policy import pack_config

        facts = policy_facts(plan)
        (out / "policy-facts.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
        # What `pulumi preview --policy-pack policy --policy-pack-config <file>` takes: the same facts, per policy.
        (out / "policy-pack-config.json").write_text(json.dumps(pack_config(facts), indent=2, sort_keys=True) + "\n")
    return report
