"""Validation of the offline plan with real third-party validators.

- Built-in Kubernetes kinds: `kubernetes-validate` (strict: unknown fields are errors) for the stack's
  Kubernetes version.
- Custom resources: `kubernetes-validate` passes unknown kinds silently, so each custom resource is checked
  with `jsonschema` against the `openAPIV3Schema` of the upstream CRD of the pinned operator version
  (`gtp.versions.CRD_SOURCES`). Objects are closed like `kubectl apply --validate=strict`: a field the schema
  doesn't declare is an error unless the schema preserves unknown fields.

CRD files come from `$GTP_CRD_DIR`, else the project's `../shared/crds`, else a cache under
`~/.cache/gtp/crds` filled from the upstream URLs on first use. With none of them the CRD part is skipped
with a note saying so; nothing else is.
"""

from __future__ import annotations

import copy
import json
import os
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from gtp import versions
from gtp.plan import COMPUTED, ROOT, SECRET, Plan

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gtp" / "crds"


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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
    """(apiVersion, kind) → closed JSON schema, for every CRD file of the pinned operators."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for name in versions.CRD_SOURCES:
        crd = yaml.safe_load((directory / name).read_text())
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
    try:
        kubernetes_validate.validate(_unmask(dict(obj)), kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as error:  # a jsonschema.ValidationError with the version added
        yield f"{_describe(obj)}: {_path(error)}: {error.message}"


def validate_objects(objects: list[dict[str, Any]], kubernetes_version: str, report: Report) -> None:
    directory, source = crd_dir()
    schemas = load_crd_schemas(directory) if directory else {}
    if directory is None:
        report.notes.append(f"custom resources NOT validated against upstream CRDs: {source}")
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"])
        if "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].endswith(".k8s.io/v1"):
            if key in schemas:
                report.errors.extend(validate_custom(obj, schemas[key]))
            elif directory is not None:
                report.errors.append(f"{_describe(obj)}: no pinned CRD schema for {obj['apiVersion']} {obj['kind']}")
            continue
        try:
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
            "registry": registry, "requiredTags": sorted(required)}


def run_policy_pack(plan: Plan, report: Report) -> None:
    """The policy pack (policy/) over the recorded resources, exactly as `pulumi preview --policy-pack` would."""
    from policy.gtp_policy import run_policies

    resources = [resource.as_json() for resource in plan.resources]
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
