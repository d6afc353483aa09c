"""The offline plan: run the real Pulumi program for a stack under Pulumi's mocks and record its desired state.

No Pulumi CLI, no cloud credentials, no network. The program (`__main__.py`) runs exactly as `pulumi preview`
would run it, with the engine replaced by `pulumi.runtime.set_mocks`:

- every resource registration is recorded: type, name, parent, provider, dependsOn, resource options and
  inputs, with secret values masked as ``"[secret]"`` and values only known after apply as ``"<computed>"``
  (the mocks run in preview mode and echo inputs back as outputs, so everything a provider computes —
  ids, ARNs, endpoints, image digests — stays unknown, as in a real preview);
- data sources answer with the documented fake values in `FAKE_DATA_SOURCES` (account 123456789012, three
  availability zones of the configured region, a fake ECR token, ...);
- stack config comes from `Pulumi.yaml` defaults and `stacks/Pulumi.<stack>.yaml`; `secure:` values can't
  be decrypted offline, so each becomes the placeholder ``fake-secret-<key>`` and is marked secret.

Usage: ``python -m gtp.plan --stack dev`` (what ``make plan STACK=dev`` runs) writes
``build/plan/<stack>/resources.json`` and ``manifests.yaml`` and prints a resource tree.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import runpy
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SECRET = "[secret]"
COMPUTED = "<computed>"
FAKE_ACCOUNT = "123456789012"

# pulumi's wire-format markers (pulumi/runtime/rpc.py); the mock monitor sees raw values with these in them.
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SIG_SECRET = "1b47061264138c4ac30d75fd1eb44270"
_SIG_RESOURCE = "5cf8f73096256a8f31e491e813e4eb8e"
_SIG_ASSET = "c44067f5952c0a294b673a41bacd8c17"
_SIG_ARCHIVE = "0def7320c3a5731c473e5ecbe6d01bc7"
_SIG_OUTPUT = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def fake_data_sources(region: str) -> dict[str, dict[str, Any]]:
    """What each data source answers under mocks. Documented here because the plan shows these values."""
    return {
        "aws:index/getAvailabilityZones:getAvailabilityZones": {
            "id": region, "names": [f"{region}a", f"{region}b", f"{region}c"],
            "zoneIds": ["usw2-az1", "usw2-az2", "usw2-az3"], "state": "available",
        },
        "aws:index/getCallerIdentity:getCallerIdentity": {
            "id": FAKE_ACCOUNT, "accountId": FAKE_ACCOUNT, "userId": "AROAFAKEDEPLOYER:ci",
            "arn": f"arn:aws:sts::{FAKE_ACCOUNT}:assumed-role/gtp-deployer/ci",
        },
        "aws:iam/getSessionContext:getSessionContext": {
            "id": f"arn:aws:sts::{FAKE_ACCOUNT}:assumed-role/gtp-deployer/ci",
            "arn": f"arn:aws:sts::{FAKE_ACCOUNT}:assumed-role/gtp-deployer/ci",
            "issuerArn": f"arn:aws:iam::{FAKE_ACCOUNT}:role/gtp-deployer", "issuerId": "AROAFAKEDEPLOYER",
            "issuerName": "gtp-deployer", "sessionName": "ci",
        },
        "aws:index/getPartition:getPartition": {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com"},
        "aws:index/getRegion:getRegion": {"id": region, "name": region, "region": region},
        "aws:ecr/getAuthorizationToken:getAuthorizationToken": {
            "id": region, "userName": "AWS", "password": "fake-ecr-password",
            "authorizationToken": "ZmFrZQ==", "expiresAt": "2099-01-01T00:00:00Z",
            "proxyEndpoint": f"https://{FAKE_ACCOUNT}.dkr.ecr.{region}.amazonaws.com",
        },
    }


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
    """The parsed `gtp.config.StackConfig` the program ran with."""

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
            body = {key: value for key, value in resource.inputs.items()}
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


def _strip_provider_ref(reference: str) -> str | None:
    # A provider reference is "<urn>::<id>"; the id is unknown in preview.
    if not reference:
        return None
    return reference.rsplit("::", 1)[0]


def _make_monitor(region: str, plan: Plan):
    from pulumi.runtime import mocks, rpc

    class PlanMocks(mocks.Mocks):
        def __init__(self) -> None:
            self.data_sources = fake_data_sources(region)

        def new_resource(self, args: mocks.MockResourceArgs):
            # Echo inputs as outputs and leave the id empty: in preview mode both mean "only the inputs are
            # known", which is exactly what `pulumi preview` shows for a resource to be created.
            return "", dict(args.inputs)

        def call(self, args: mocks.MockCallArgs):
            if args.token not in self.data_sources:
                raise NotImplementedError(f"the offline plan has no fake answer for data source {args.token}; add "
                                          "one to gtp.plan.fake_data_sources")
            return self.data_sources[args.token], []

    class PlanMonitor(mocks.MockMonitor):
        def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
            response = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                raw = rpc.deserialize_properties(request.object, keep_unknowns=True)
                plan.resources.append(Resource(
                    urn=response.urn, type=request.type, name=request.name, custom=bool(request.custom),
                    parent=request.parent or None, provider=_strip_provider_ref(request.provider),
                    depends_on=sorted(set(request.dependencies)),
                    options={
                        "protect": bool(getattr(request, "protect", False)),
                        "retainOnDelete": bool(getattr(request, "retainOnDelete", False)),
                        "deleteBeforeReplace": bool(getattr(request, "deleteBeforeReplace", False)),
                        "ignoreChanges": sorted(request.ignoreChanges),
                    },
                    inputs=clean(raw),
                ))
            return response

    return PlanMonitor(PlanMocks())


def stack_config(root: Path, stack: str, stack_file: Path | None = None) -> tuple[str, dict[str, str], list[str]]:
    """Project name, the engine-form config (``ns:key`` → string) and secret keys, as the CLI would pass them."""
    project_file = yaml.safe_load((root / "Pulumi.yaml").read_text())
    project = project_file["name"]
    path = stack_file or root / "stacks" / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path} (stacks: {', '.join(known_stacks(root))})")
    stack_doc = yaml.safe_load(path.read_text()) or {}
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, schema in (project_file.get("config") or {}).items():
        if isinstance(schema, dict) and "default" in schema:
            config[_full_key(project, key)] = _engine_value(schema["default"])
    for key, value in (stack_doc.get("config") or {}).items():
        full = _full_key(project, key)
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[full] = f"fake-secret-{full.split(':', 1)[1]}"
            secret_keys.append(full)
        else:
            config[full] = _engine_value(value)
    return project, config, secret_keys


def known_stacks(root: Path) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (root / "stacks").glob("Pulumi.*.yaml"))


def _full_key(project: str, key: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def _engine_value(value: Any) -> str:
    # The engine hands the program strings; structured values as JSON (pulumi.Config.get_object decodes them).
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def run(stack: str, *, root: Path = ROOT, stack_file: Path | None = None, into: Plan | None = None) -> Plan:
    """Run `__main__.py` for `stack` under mocks and return what it registered (recorded into `into` when
    given, so a caller can see what a failed run had registered)."""
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_pulumi_func

    project, config, secret_keys = stack_config(root, stack, stack_file)
    plan = into if into is not None else Plan(project=project, stack=stack)
    region = config.get(f"{project}:region", "us-west-2")
    settings.reset_options(project=project, stack=stack, preview=True)
    runtime_config.set_all_config(config, secret_keys)
    monitor = _make_monitor(region, plan)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=True, monitor=monitor)
        sys.path.insert(0, str(root))
        cwd = os.getcwd()
        os.chdir(root)  # as the Pulumi CLI does: the program runs in the project directory
        try:
            program: dict[str, Any] = {}
            loop.run_until_complete(run_pulumi_func(lambda: program.update(
                runpy.run_path(str(root / "__main__.py"), run_name="__main__"))))
            plan.outputs = loop.run_until_complete(_resolve_outputs(settings.get_root_resource()))
            plan.config = program["config"]  # the one StackConfig the program parsed
        finally:
            os.chdir(cwd)
            sys.path.remove(str(root))
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    plan.resources.sort(key=lambda r: r.urn)
    return plan


async def _resolve_outputs(root_resource: Any) -> dict[str, Any]:
    from pulumi import Output
    from pulumi.output import Unknown

    def plain(value: Any) -> Any:
        if isinstance(value, Unknown):
            return COMPUTED
        if isinstance(value, dict):
            return {k: plain(v) for k, v in sorted(value.items())}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    outputs: dict[str, Any] = {}
    for name, value in sorted(getattr(root_resource, "outputs", {}).items()):
        output = Output.from_input(value)
        if await output.is_secret():
            outputs[name] = SECRET
        elif not await output.is_known():
            resolved = await output.future(with_unknowns=True)
            outputs[name] = plain(resolved) if resolved is not None else COMPUTED
        else:
            outputs[name] = plain(await output.future())
    return outputs


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


def main(argv: list[str] | None = None) -> int:
    from gtp.config import ConfigError
    from gtp.validate import validate_plan

    parser = argparse.ArgumentParser(prog="python -m gtp.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--stack-file", type=Path, help="plan this stack file instead (tests, experiments)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "plan", help="output directory root")
    parser.add_argument("--quiet", action="store_true", help="don't print the resource tree")
    args = parser.parse_args(argv)
    try:
        plan = run(args.stack, stack_file=args.stack_file)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = args.out / args.stack
    out.mkdir(parents=True, exist_ok=True)
    resources, manifests = render(plan)
    (out / "resources.json").write_text(resources)
    (out / "manifests.yaml").write_text(manifests)
    if not args.quiet:
        print(tree(plan))
    report = validate_plan(plan, out)
    for line in report.notes:
        print(f"note: {line}", file=sys.stderr)
    if report.errors:
        print(f"error: the plan of stack '{args.stack}' has {len(report.errors)} invalid object(s):", file=sys.stderr)
        for line in report.errors:
            print(f"  - {line}", file=sys.stderr)
        return 1
    print(f"\nwrote {out / 'resources.json'} and {out / 'manifests.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
