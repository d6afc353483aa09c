"""Plain-data model shared by every rule: resource records, stack facts, rules and violations.

A *record* is one resource as the offline plan writes it to `build/plan/<stack>/resources.json`
(and as `engine.py` rebuilds it from the policy engine's arguments)::

    {"urn": ..., "type": "aws:eks/cluster:Cluster", "name": ..., "custom": true,
     "parent": <urn>|None, "provider": <provider urn or reference>|None, "dependsOn": [<urn>, ...],
     "options": {"protect": ..., "retainOnDelete": ..., "deleteBeforeReplace": ..., "ignoreChanges": [...]},
     "inputs": {...engine (camelCase) property names...}}

Secret inputs read "[secret]"; values unknown until apply read "<computed>".
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

COMPUTED = "<computed>"
"""Marker for an input whose value is only known after apply."""

SECRET = "[secret]"
"""Marker for a secret input (value masked)."""

Record = Mapping[str, Any]

Enforcement = Literal["mandatory", "advisory"]
Scope = Literal["resource", "stack"]

DEFAULT_REQUIRED_TAGS = ("gtp:stack", "gtp:project", "gtp:lifecycle")
EPHEMERAL_TAGS = ("gtp:ttl-hours", "gtp:expires-at")
DIGEST_REF = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
"""An image reference by digest: `repo@sha256:<64 hex>`."""


def is_computed(value: Any) -> bool:
    """True when the value is unknown until apply (only ever "cannot judge" for legitimately computed values)."""
    return isinstance(value, str) and value == COMPUTED


_MISSING = object()


def _decode_provider_json(value: Any) -> Any:
    """Provider resources carry nested inputs as JSON strings (e.g. an AWS provider's `defaultTags`), both in
    the engine and in the offline plan; read them as the objects they are."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def get_path(data: Any, path: str, default: Any = None) -> Any:
    """Reads `a.b.c` from nested mappings; returns `default` when any step is absent or not a mapping.

    A computed intermediate object yields COMPUTED, so callers see "unknown" rather than "absent".
    """
    current = data
    for part in path.split("."):
        if is_computed(current):
            return COMPUTED
        current = _decode_provider_json(current)
        if not isinstance(current, Mapping):
            return default
        current = current.get(part, _MISSING)
        if current is _MISSING:
            return default
    return current


def as_list(value: Any) -> list:
    """A list input as a list: None → [], a computed list → [COMPUTED]."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def is_true(value: Any) -> bool:
    """Booleans arrive as bool, but some AWS inputs (launch template `ebs.encrypted`) are the strings "true"/"false"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.lower() == "false")


def as_number(value: Any) -> float | None:
    """Numbers arrive as floats under the engine and mocks; strings of digits are accepted too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def parse_json_document(value: Any) -> Any:
    """An IAM-style policy input: a JSON string or an already structured document. Returns None if unparseable."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and not is_computed(value) and value != SECRET:
        try:
            return json.loads(value)
        except ValueError:
            return None
    return None


def short(value: Any, limit: int = 160) -> str:
    """A value as it appears in a violation message."""
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Facts:
    """Per-stack facts the rules need and the program's resources cannot tell (policy config / policy-facts.json)."""

    stack: str
    """Stack name, e.g. "dev"."""
    ephemeral: bool = False
    """True for bench-* style stacks that must destroy cleanly (TTL tags, no protection, force-delete)."""
    production: bool = False
    """True for stacks whose cluster must be private and whose stateful resources must be protected."""
    registry: str | None = None
    """Image prefix every directly applied container image must start with (`<host>/<repo>`); None = not checked."""
    required_tags: tuple[str, ...] = DEFAULT_REQUIRED_TAGS
    """Tag keys every AWS provider's defaultTags and every launch template's instance tags must carry."""
    signed_digests: tuple[str, ...] = ()
    """Image references by digest (`repo@sha256:<64 hex>`) that CI signed and verified (the stack's
    `image.signedDigests`): besides the stack's own build, the only images a production workload may run."""

    site_registry: str | None = None
    """An air-gapped stack's site registry (`host[:port]`, the stack's `image.airGap.siteRegistry`): every image
    the stack runs must come from it. None = the stack is not offline."""

    KEYS = ("stack", "ephemeral", "production", "registry", "requiredTags", "signedDigests", "siteRegistry")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Facts:
        """Validates the facts dict (keys fixed, camelCase); every problem is reported at once."""
        problems = []
        if not isinstance(data, Mapping):
            raise ValueError(f"policy facts must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.KEYS) - {"enforcementLevel"})
        if unknown:
            problems.append(f"unknown key(s) {unknown}; valid keys are {list(cls.KEYS)}")
        stack = data.get("stack")
        if not isinstance(stack, str) or not stack:
            problems.append(f"stack: expected a non-empty string, got {stack!r}")
        for key in ("ephemeral", "production"):
            if key in data and not isinstance(data[key], bool):
                problems.append(f"{key}: expected true or false, got {data[key]!r}")
        registry = data.get("registry")
        if registry is not None and (not isinstance(registry, str) or not registry):
            problems.append(f"registry: expected a non-empty string or null, got {registry!r}")
        tags = data.get("requiredTags", list(DEFAULT_REQUIRED_TAGS))
        if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) and t for t in tags):
            problems.append(f"requiredTags: expected a list of tag keys, got {tags!r}")
        signed = data.get("signedDigests", [])
        if not isinstance(signed, (list, tuple)) or not all(isinstance(s, str) and DIGEST_REF.match(s)
                                                             for s in signed):
            problems.append(f"signedDigests: expected a list of 'repo@sha256:<64 hex>' references, got {signed!r}")
        site = data.get("siteRegistry")
        if site is not None and (not isinstance(site, str) or not site or "/" in site):
            problems.append(f"siteRegistry: expected a registry host[:port] or null, got {site!r}")
        if data.get("ephemeral") is True and data.get("production") is True:
            problems.append("ephemeral and production are mutually exclusive; set at most one to true")
        if problems:
            raise ValueError("invalid policy facts:\n  - " + "\n  - ".join(problems))
        return cls(
            stack=stack,
            ephemeral=bool(data.get("ephemeral", False)),
            production=bool(data.get("production", False)),
            registry=registry,
            required_tags=tuple(tags),
            signed_digests=tuple(signed),
            site_registry=site,
        )

    def to_mapping(self) -> dict:
        return {
            "stack": self.stack,
            "ephemeral": self.ephemeral,
            "production": self.production,
            "registry": self.registry,
            "requiredTags": list(self.required_tags),
            "signedDigests": list(self.signed_digests),
            # Only on air-gapped stacks, so that every other stack's pack config reads as before.
            **({"siteRegistry": self.site_registry} if self.site_registry else {}),
        }


FACTS_CONFIG_SCHEMA = {
    "properties": {
        "stack": {"type": "string", "description": "Stack name, e.g. dev."},
        "ephemeral": {"type": "boolean", "default": False,
                      "description": "Stack must destroy cleanly: TTL tags, no protect/retainOnDelete, force-delete."},
        "production": {"type": "boolean", "default": False,
                       "description": "Private EKS endpoint; cluster, keys, storage and repositories protected."},
        "registry": {"type": ["string", "null"], "default": None,
                     "description": "Required image prefix (<host>/<repo>); null disables the registry check."},
        "requiredTags": {"type": "array", "items": {"type": "string"}, "default": list(DEFAULT_REQUIRED_TAGS),
                         "description": "Tag keys every AWS provider's defaultTags must carry."},
        "signedDigests": {"type": "array", "items": {"type": "string"}, "default": [],
                          "description": "Signed image references (repo@sha256:...) production workloads may run "
                                         "besides the stack's own build."},
        "siteRegistry": {"type": ["string", "null"], "default": None,
                         "description": "Air-gapped stacks: the site registry (host[:port]) every image comes from; "
                                        "null = not offline."},
    },
    "required": ["stack", "ephemeral", "production"],
}
"""JSON schema of the facts; every policy declares it so one `--policy-pack-config` file configures them all."""


@dataclass(frozen=True)
class Finding:
    """One offending field of one resource, as a rule reports it."""

    field: str
    """Property path, e.g. `vpcConfig.publicAccessCidrs` or `spec.template.spec.containers[trainer].image`."""
    value: Any
    """The offending value (None when the field is absent)."""
    reason: str
    """What is wrong and what to do instead."""
    record: Record | None = None
    """For stack rules: the resource the finding is about (None = the stack as a whole)."""




UPSTREAM_MANIFEST_TYPES = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")
"""Components whose children are the objects of an upstream manifest the program applies whole (an operator's
release manifest from vendor/, or its derived copy)."""


def from_upstream_manifest(record: Record) -> bool:
    """Whether `record` is an object of an upstream manifest: the provider registers each one as a child of the
    ConfigFile (pulumi-kubernetes v4.25.0 provider/pkg/provider/yaml/v2/yaml.go `register`), so its URN's type chain
    names the component (`...$kubernetes:yaml/v2:ConfigFile$kubernetes:apps/v1:Deployment::...`)."""
    parts = str(record.get("urn") or "").split("::")
    chain = parts[2].split("$")[:-1] if len(parts) > 3 else []
    return any(type_ in UPSTREAM_MANIFEST_TYPES for type_ in chain)


@dataclass(frozen=True)
class Rule:
    """One named policy. `check` is pure: plain records and facts in, findings out."""

    name: str
    description: str
    scope: Scope
    check: Callable[..., Iterable[Finding]]
    enforcement: Enforcement = "mandatory"
    upstream: bool = True
    """Whether the rule also judges the objects of an upstream manifest (`from_upstream_manifest`; a stack rule with
    False sees the stack without them). False for the rules on how a container is written (its security context,
    resources, image reference) and what a workload may run: an operator's manifest is applied as its publisher
    wrote it, with the publisher's images pinned in catalog/versions.py, like a chart's pods, which no rule here
    sees either; Checkov judges both over cluster.yaml, each exception reviewed per object in
    checkov-accepted.yaml."""

    def judges(self, record: Record) -> bool:
        return self.upstream or not from_upstream_manifest(record)


@dataclass(frozen=True)
class Violation:
    policy_name: str
    urn: str | None
    message: str
    enforcement: Enforcement = "mandatory"

    def __str__(self) -> str:
        return f"[{self.enforcement}] {self.message}"


def describe(record: Record | None) -> str:
    if record is None:
        return "stack"
    return f"{record.get('type')} '{record.get('name')}' ({record.get('urn')})"


def format_message(policy_name: str, record: Record | None, finding: Finding) -> str:
    """`<policy>: <type> '<name>' (<urn>): <field> = <value>: <reason>`."""
    value = "<absent>" if finding.value is None else short(finding.value)
    return f"{policy_name}: {describe(record)}: {finding.field} = {value}: {finding.reason}"

