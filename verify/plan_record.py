"""The recorded plan: every resource a stack's program registered, as plain data, and its readable renderings.

`verify.plan` fills a `Plan` by running the program under mocks; validators, the policy pack, Checkov and the
plan diff read it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SECRET = "[secret]"
COMPUTED = "<computed>"

# pulumi's wire-format markers (pulumi/runtime/rpc.py); the mock monitor sees raw values with these in them.
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SIG_SECRET = "1b47061264138c4ac30d75fd1eb44270"
_SIG_RESOURCE = "5cf8f73096256a8f31e491e813e4eb8e"
_SIG_ASSET = "c44067f5952c0a294b673a41bacd8c17"
_SIG_ARCHIVE = "0def7320c3a5731c473e5ecbe6d01bc7"
_SIG_OUTPUT = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


@dataclass
class Resource:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str | None
    provider: str | None
    depends_on: list[str]
    options: dict[str, Any]
    inputs: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn, "type": self.type, "name": self.name, "custom": self.custom, "parent": self.parent,
            "provider": self.provider, "dependsOn": self.depends_on, "options": self.options, "inputs": self.inputs,
        }


@dataclass
class Plan:
    project: str
    stack: str
    resources: list[Resource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    config: Any = None
    """The parsed `stack_config.StackConfig` the program ran with."""

    def by_type(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Resource:
        found = [r for r in self.by_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            raise LookupError(f"expected one {type_} named {name!r}, found {[r.name for r in found]}")
        return found[0]

    def _by_urn(self) -> dict[str, Resource]:
        return {r.urn: r for r in self.resources}

    def get(self, urn: str) -> Resource:
        return self._by_urn()[urn]

    def depends_transitively(self, resource: Resource, target: Resource) -> bool:
        """Whether `resource` can only be created after `target` (dependsOn, parent's deps or provider)."""
        seen: set[str] = set()
        stack = [resource.urn]
        while stack:
            urn = stack.pop()
            if urn == target.urn and urn != resource.urn:
                return True
            if urn in seen or urn not in self._by_urn():
                continue  # the root stack is not a recorded resource
            seen.add(urn)
            current = self.get(urn)
            stack.extend(current.depends_on)
            if current.parent:
                stack.append(current.parent)
            if current.provider:
                stack.append(current.provider)
        return False

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the stack applies directly (not Helm releases or kustomize components)."""
        objects = []
        for resource in self.resources:
            if not resource.custom or not resource.type.startswith("kubernetes:"):
                continue
            if resource.type.startswith(("kubernetes:helm.sh/", "kubernetes:kustomize", "kubernetes:yaml")):
                continue
            body = dict(resource.inputs.items())
            obj = {"apiVersion": body.pop("apiVersion"), "kind": body.pop("kind"), "metadata": body.pop("metadata", {})}
            obj.update(dict(sorted(body.items())))
            objects.append(obj)
        return sorted(objects, key=_manifest_order)

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project, "stack": self.stack,
            "resources": [r.as_json() for r in self.resources], "outputs": self.outputs,
        }


_KIND_ORDER = ["Namespace", "PriorityClass", "StorageClass", "PersistentVolume", "ServiceAccount", "ResourceQuota",
               "LimitRange", "NetworkPolicy", "ConfigMap", "Secret", "PersistentVolumeClaim", "Role", "RoleBinding",
               "ClusterRole", "ClusterRoleBinding", "Service", "Job"]


def _manifest_order(obj: Mapping[str, Any]) -> tuple[int, str, str, str]:
    kind = obj["kind"]
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
    metadata = obj.get("metadata", {})
    return rank, kind, str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def dicts_in(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping nested anywhere in `node` (itself included), parents before children; callers may change
    a mapping's values in place (the walk reads each one's values after yielding it)."""
    if isinstance(node, dict):
        yield node
        for value in list(node.values()):
            yield from dicts_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from dicts_in(item)


def clean(value: Any) -> Any:
    """Turn a raw deserialized property value into plain, deterministic JSON with markers."""
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SIG_SECRET:
            return SECRET
        if sig == _SIG_RESOURCE:
            return value.get("urn", COMPUTED)
        if sig in (_SIG_ASSET, _SIG_ARCHIVE):
            return {k: clean(v) for k, v in sorted(value.items()) if k != _SIG_KEY}
        if sig == _SIG_OUTPUT:
            if value.get("secret"):
                return SECRET
            return clean(value["value"]) if "value" in value else COMPUTED
        return {k: clean(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if value == _UNKNOWN or type(value).__name__ == "Unknown":  # pulumi.output.Unknown, with keep_unknowns
        return COMPUTED
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf carries every number as a double
    return value


def render(plan: Plan) -> tuple[str, str]:
    resources = json.dumps(plan.as_json(), indent=2, sort_keys=False) + "\n"
    manifests = yaml.safe_dump_all(plan.kubernetes_objects(), sort_keys=False, default_flow_style=False, width=120)
    return resources, manifests


def tree(plan: Plan) -> str:
    """A readable tree of resources (children under their parent) and counts per type."""
    children: dict[str | None, list[Resource]] = {}
    urns = {r.urn for r in plan.resources}
    for resource in plan.resources:
        parent = resource.parent if resource.parent in urns else None
        children.setdefault(parent, []).append(resource)
    lines = [f"{plan.project}/{plan.stack}"]

    def walk(parent: str | None, indent: str) -> None:
        items = children.get(parent, [])
        for index, resource in enumerate(items):
            last = index == len(items) - 1
            lines.append(f"{indent}{'└─ ' if last else '├─ '}{resource.type}  {resource.name}"
                         + ("  [protect]" if resource.options["protect"] else ""))
            walk(resource.urn, indent + ("   " if last else "│  "))

    walk(None, "")
    counts = Counter(r.type for r in plan.resources)
    lines.append("")
    lines.append(f"{len(plan.resources)} resources:")
    lines.extend(f"  {count:4d}  {type_}" for type_, count in sorted(counts.items()))
    return "\n".join(lines)
