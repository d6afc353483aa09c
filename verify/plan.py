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

Usage: ``python -m tools.plan --stack dev`` (what ``make plan STACK=dev`` runs) writes
``build/plan/<stack>/resources.json``, ``manifests.yaml``, ``cluster.yaml`` (verify/render.py), ``cost.json``
(verify/cost.py: $/h at the node groups' min and max sizes) and the picture ``overview.svg`` (verify/overview.py,
when Graphviz is installed), prints a resource tree and progress lines (on
stderr), and validates; ``--all`` (``make plan-all``) plans every stack in one process. A stack whose inputs are
unchanged since its last plan is restored from the content-addressed cache under ``build/plan-cache/``
(verify/plan_cache.py: same files, same lines; ``--no-cache`` plans from scratch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

from stack_config.source import YamlFileError, load_yaml_file
from verify.plan_record import COMPUTED, ROOT, SECRET, Plan, Resource, clean, render, tree

FAKE_ACCOUNT = "123456789012"


def fake_data_sources(region: str) -> dict[str, dict[str, Any]]:
    """What each data source answers under mocks. Documented here because the plan shows these values."""
    return {
        # Filtered per call by `_zones_answer`, as EC2 DescribeAvailabilityZones would.
        "aws:index/getAvailabilityZones:getAvailabilityZones": {"id": region},
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


# The region's zones as EC2 lists them with `all-availability-zones`: three regular zones plus a Local Zone and a
# Wavelength Zone (opted in). A Local Zone's name sorts before the regular ones ("us-west-2-lax-1a" <
# "us-west-2a"), so a program that takes "the first N zones" without filtering by zone type lands its
# subnets and node groups there (fewer instance types, no EKS control-plane ENIs).
def fake_zones(region: str) -> list[dict[str, str]]:
    return [
        {"name": f"{region}a", "zoneId": "usw2-az1", "zoneType": "availability-zone"},
        {"name": f"{region}b", "zoneId": "usw2-az2", "zoneType": "availability-zone"},
        {"name": f"{region}c", "zoneId": "usw2-az3", "zoneType": "availability-zone"},
        {"name": f"{region}-lax-1a", "zoneId": "usw2-lax1-az1", "zoneType": "local-zone"},
        {"name": f"{region}-wl1-sfo-wlz-1", "zoneId": "usw2-wl1-sfo-wlz1", "zoneType": "wavelength-zone"},
    ]


def _addon_version_answer(arguments: dict[str, Any]) -> dict[str, Any]:
    """getAddonVersion under mocks: a stand-in that says what the real lookup returns (EKS's default build of the
    add-on for that Kubernetes version, components/eks_cluster.py), never a build that looks real."""
    addon, version = arguments.get("addonName"), arguments.get("kubernetesVersion")
    return {"id": addon, "addonName": addon, "kubernetesVersion": version,
            "version": f"eks-default-build-for-{version}"}


def _zones_answer(region: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """getAvailabilityZones under mocks, honouring its `filters` on zone-type (the only filter the program uses)."""
    zones = fake_zones(region)
    for entry in arguments.get("filters") or []:
        if entry.get("name") == "zone-type":
            zones = [zone for zone in zones if zone["zoneType"] in entry.get("values", [])]
        else:
            raise NotImplementedError(f"the offline plan's getAvailabilityZones has no filter {entry.get('name')!r}")
    return {"id": region, "names": [zone["name"] for zone in zones], "zoneIds": [zone["zoneId"] for zone in zones],
            "state": arguments.get("state") or "available"}


# The EKS target's preflight (cluster_targets/eks_preflight.py) under mocks: answers that let every committed stack
# pass, each computed from what was asked. Tests plant others with `monkeypatch.setitem(FAKE_INVOKES, token, ...)`;
# a planted answer raises FakeInvokeFailure for what the provider would report as an error.
FAKE_VCPU_QUOTA = 100_000.0
"""Every vCPU quota's value offline: larger than any committed stack needs."""


class FakeInvokeFailure(Exception):
    """A planted invoke's error, as the provider reports one (`invoke of <token> failed: <reason>`)."""


def _offerings_answer(region: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """getInstanceTypeOfferings: every type asked about, in every regular zone asked about (the catalog's Region
    offerings are judged by the config rules; zones can't be known offline)."""
    wanted: dict[str, list[str]] = {entry.get("name"): list(entry.get("values", []))
                                    for entry in arguments.get("filters") or []}
    zones = [zone["name"] for zone in fake_zones(region) if zone["zoneType"] == "availability-zone"]
    zones = [zone for zone in zones if zone in wanted.get("location", zones)]
    pairs = [(instance_type, zone) for instance_type in wanted.get("instance-type", []) for zone in zones]
    return {"id": region, "locationType": arguments.get("locationType"),
            "instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs],
            "locationTypes": [arguments.get("locationType")] * len(pairs)}


def _instance_type_answer(region: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """getInstanceType: EFA as catalog/gpu_instances.py says (the catalog is what the preflight holds to EC2)."""
    from catalog.gpu_instances import GPU_INSTANCE_TYPES

    row = GPU_INSTANCE_TYPES[arguments["instanceType"]]
    return {"id": row.name, "instanceType": row.name, "defaultVcpus": row.vcpus,
            "efaSupported": row.num_efa_interfaces > 0, "efaMaximumInterfaces": row.num_efa_interfaces}


FAKE_INVOKES: dict[str, Any] = {
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _offerings_answer,
    "aws:ec2/getInstanceType:getInstanceType": _instance_type_answer,
    "aws:servicequotas/getServiceQuota:getServiceQuota": lambda region, arguments: {
        "id": arguments["quotaCode"], "quotaCode": arguments["quotaCode"], "serviceCode": arguments["serviceCode"],
        "value": FAKE_VCPU_QUOTA, "adjustable": True, "globalQuota": False},
    "aws:ec2transitgateway/getTransitGateway:getTransitGateway": lambda region, arguments: {
        "id": arguments["id"], "ownerId": FAKE_ACCOUNT},
    # An adopted VPC's subnet zones can't be known offline: each lies in the region's first zone.
    "aws:ec2/getSubnet:getSubnet": lambda region, arguments: {
        "id": arguments["id"], "availabilityZone": f"{region}a"},
    "aws:eks/getAddonVersion:getAddonVersion": lambda region, arguments: _addon_version_answer(arguments),
}


def _strip_provider_ref(reference: str) -> str | None:
    # A provider reference is "<urn>::<id>"; the id is unknown in preview.
    if not reference:
        return None
    return reference.rsplit("::", 1)[0]


# What a created resource reports back in the apply-like run (`run(..., known_outputs=True)`): every output the
# program reads besides its inputs, with a fake value of the provider's shape.
FAKE_OUTPUTS: dict[str, dict[str, Any]] = {
    "aws:eks/cluster:Cluster": {
        "certificateAuthority": {"data": "ZmFrZS1jYQ=="}, "endpoint": "https://fake.eks.example",
        "identities": [{"oidcs": [{"issuer": "https://oidc.eks.example/id/FAKE"}]}],
        "vpcConfig": {"clusterSecurityGroupId": "sg-fakecluster"},
    },
    "aws:eks/nodeGroup:NodeGroup": {"resources": [{"autoscalingGroups": [{"name": "eks-fake-asg"}]}]},
}
FAKE_ATTRIBUTES = ("arn", "name", "dnsName", "mountName", "repositoryUrl", "bucket", "url", "keyId", "registryId",
                   "repoDigest", "imageName", "clusterName")
"""Scalar outputs every resource gets a fake string for in the apply-like run, unless its inputs set them."""


def _make_monitor(region: str, plan: Plan, known_outputs: bool = False):
    from pulumi.runtime import mocks, rpc
    from pulumi.runtime.settings import get_project, get_stack

    class PlanMocks(mocks.Mocks):
        def __init__(self) -> None:
            self.data_sources = fake_data_sources(region)

        def new_resource(self, args: mocks.MockResourceArgs):
            if known_outputs:
                # As after an apply: an id and every output known, so each `apply` runs and the SDK checks the
                # type of every input computed from another resource (a preview leaves those unknown).
                outputs = {key: f"fake-{key}-{args.name}" for key in FAKE_ATTRIBUTES}
                outputs.update(FAKE_OUTPUTS.get(args.typ, {}))
                for key, value in args.inputs.items():
                    # An object input keeps the provider's computed fields beside it (vpcConfig's cluster group).
                    fake = outputs.get(key)
                    outputs[key] = {**fake, **value} if isinstance(fake, dict) and isinstance(value, dict) else value
                return f"{args.name}-id", outputs
            # Echo inputs as outputs and leave the id empty: in preview mode both mean "only the inputs are
            # known", which is exactly what `pulumi preview` shows for a resource to be created.
            return "", dict(args.inputs)

        def call(self, args: mocks.MockCallArgs):
            if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
                return _zones_answer(region, dict(args.args)), []
            if args.token == "aws:ec2/getSubnets:getSubnets":
                # An adopted VPC's subnet zones can't be known offline: the answer keeps every subnet asked about.
                ids = [value for entry in args.args.get("filters") or [] if entry.get("name") == "subnet-id"
                       for value in entry.get("values", [])]
                return {"id": region, "ids": ids}, []
            if args.token in FAKE_INVOKES:
                try:
                    return FAKE_INVOKES[args.token](region, dict(args.args)), []
                except FakeInvokeFailure as failure:
                    return {}, [("", str(failure))]
            if args.token not in self.data_sources:
                raise NotImplementedError(f"the offline plan has no fake answer for data source {args.token}; add "
                                          "one to verify.plan.fake_data_sources")
            return self.data_sources[args.token], []

    class PlanMonitor(mocks.MockMonitor):
        def make_urn(self, parent: str, type_: str, name: str) -> str:
            """A URN as the engine makes it: the parent's whole qualified type, and none for a child of the root
            stack (pkg/v3 resource/deploy/deployment.go:859-867 `generateURN` at v3.274.0). The SDK's
            MockMonitor.make_urn takes the last type of the parent's and keeps the stack's: every top-level URN
            of the offline plan differed from the real engine's (`make up-test`)."""
            parent_type = parent.split("::")[2] if parent else ""
            qualified = type_ if parent_type in ("", "pulumi:pulumi:Stack") else f"{parent_type}${type_}"
            return "urn:pulumi:" + "::".join([get_stack(), get_project(), qualified, name])

        def _alias_urns(self, request, urn: str) -> list[str]:
            """Each alias of the request as a URN (the SDK sends alias specs to a monitor that supports them: a
            name, type or parent left out is the resource's own)."""
            found = []
            for alias in request.aliases:
                if alias.urn:
                    found.append(alias.urn)
                    continue
                spec = alias.spec
                parent = "" if spec.noParent else (spec.parentUrn or request.parent)
                found.append(self.make_urn(parent, spec.type or request.type, spec.name or request.name))
            return sorted(found)

        def RegisterResource(self, request):
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
                        # The URNs this resource was known by (the `aliases` option): plan-diff pairs them with the
                        # base's resources as the engine does, so a rename with an alias is no delete and create.
                        **({"aliases": aliases} if (aliases := self._alias_urns(request, response.urn)) else {}),
                        # Input paths whose change replaces the resource (the `replace_on_changes` option).
                        **({"replaceOnChanges": sorted(request.replaceOnChanges)} if request.replaceOnChanges
                           else {}),
                    },
                    inputs=clean(raw),
                ))
            return response

    return PlanMonitor(PlanMocks())


def stack_config(root: Path, stack: str, stack_file: Path | None = None) -> tuple[str, dict[str, str], list[str]]:
    """Project name, the engine-form config (``ns:key`` → string) and secret keys, as the CLI would pass them."""
    project_file = load_yaml_file(root / "Pulumi.yaml")
    project = project_file["name"]
    path = stack_file or root / "stacks" / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path} (stacks: {', '.join(known_stacks(root))})")
    stack_doc = load_yaml_file(path) or {}
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


def run(stack: str, *, root: Path = ROOT, stack_file: Path | None = None, into: Plan | None = None,
        known_outputs: bool = False) -> Plan:
    """Run `__main__.py` for `stack` under mocks and return what it registered (recorded into `into` when
    given, so a caller can see what a failed run had registered). `known_outputs`: run as an apply would, with
    every output known (FAKE_OUTPUTS): the SDK then type-checks inputs a preview only sees as unknown."""
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_pulumi_func

    project, config, secret_keys = stack_config(root, stack, stack_file)
    path = (stack_file or root / "stacks" / f"Pulumi.{stack}.yaml").resolve()
    plan = into if into is not None else Plan(project=project, stack=stack)
    region = config.get(f"{project}:region", "us-west-2")
    settings.reset_options(project=project, stack=stack, preview=not known_outputs)
    runtime_config.set_all_config(config, secret_keys)
    # The plan is reproducible: the image labels' git revision and remote would change it with every commit.
    os.environ["GTP_VCS_REVISION"] = os.environ["GTP_SOURCE_URL"] = "unknown"
    monitor = _make_monitor(region, plan, known_outputs)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=not known_outputs,
                                 monitor=monitor)
        sys.path.insert(0, str(root))
        cwd = os.getcwd()
        os.chdir(root)  # as the Pulumi CLI does: the program runs in the project directory
        try:
            # The StackConfig the program will parse, parsed here from the same runtime config (validators and
            # policy facts need it); an invalid config fails here, before the program registers anything.
            from stages.config import load_stack_config

            plan.config = load_stack_config(path)
            loop.run_until_complete(run_pulumi_func(lambda: runpy.run_path(str(root / "__main__.py"),
                                                                           run_name="__main__")))
            plan.outputs = loop.run_until_complete(_resolve_outputs(settings.get_root_resource()))
        finally:
            os.chdir(cwd)
            sys.path.remove(str(root))
    finally:
        _drain(loop)
        loop.close()
        asyncio.set_event_loop(None)
    plan.resources.sort(key=lambda r: r.urn)
    return plan


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and finish what a failed run left pending (the mocks' registrations in flight when an invalid config
    stopped the program): closing the loop over them prints asyncio's "Task was destroyed but it is pending!" and
    "coroutine ... was never awaited" before the config error a user needs to read."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", action="append", help="stack name (stacks/Pulumi.<stack>.yaml); repeatable")
    which.add_argument("--all", action="store_true", help="every stack in stacks/, in one process")
    parser.add_argument("--stack-file", type=Path, help="plan this stack file instead (tests, experiments)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "plan", help="output directory root")
    parser.add_argument("--quiet", action="store_true", help="don't print the resource tree")
    parser.add_argument("--no-cache", action="store_true",
                        help="plan from scratch and store nothing (verify/plan_cache.py; GTP_PLAN_CACHE=off does too)")
    args = parser.parse_args(argv)
    stacks = known_stacks(ROOT) if args.all else args.stack
    if args.stack_file and len(stacks) != 1:
        parser.error("--stack-file plans exactly one --stack")
    started = time.perf_counter()
    if args.no_cache:
        os.environ["GTP_PLAN_CACHE"] = "off"
    from verify.plan_cache import cached_plan

    codes = {stack: cached_plan(stack, plan_one, stack_file=args.stack_file, out=args.out, quiet=args.quiet)
             for stack in stacks}
    if len(stacks) > 1:
        failed = [stack for stack, code in codes.items() if code]
        progress(f"{len(stacks)} stacks in {time.perf_counter() - started:.1f} s"
                 + (f"; failed: {', '.join(failed)}" if failed else ""))
    return max(codes.values())


def progress(line: str) -> None:
    """A progress line on stderr, so a long plan is never a silent terminal."""
    print(f"plan: {line}", file=sys.stderr, flush=True)


def warn_placeholders(plan: Plan) -> None:
    """Stand-in values plan fine offline; the real engine refuses them (stages.config.load_stack_config)."""
    from stack_config.placeholders import find_placeholders
    from stages.air_gap import air_gap_problems
    from stages.config import unpinned_build_inputs

    config = plan.config
    # (label of each line, the problems, the summary): what `pulumi up` will refuse, said now as warnings.
    refusals = [
        ("placeholder", list(find_placeholders(config)) if config is not None else [],
         "stack '{stack}' has {n} placeholder(s): `pulumi up` refuses to run until they are replaced"),
        ("unpinned", unpinned_build_inputs(config) if config is not None else [],
         "stack '{stack}' builds from {n} unpinned input(s): `pulumi preview` and `up` refuse to run until they are "
         "pinned"),
        ("air gap", air_gap_problems(config) if config is not None else [],
         "air-gapped stack '{stack}' is not fully mirrored: `pulumi up` refuses to run until `make mirror` wrote a "
         "lock that pins every image"),
    ]
    for label, problems, summary in refusals:
        for problem in problems:
            print(f"warning: {label} {problem}", file=sys.stderr)
        if problems:
            print("warning: " + summary.format(stack=plan.stack, n=len(problems)), file=sys.stderr)


def plan_one(stack: str, *, stack_file: Path | None = None, out: Path = ROOT / "build" / "plan",
             quiet: bool = False) -> int:
    """Plan, write and validate one stack. 0: valid; 1: invalid objects or policy violations; 2: invalid config."""
    return plan_and_check(stack, stack_file=stack_file, out=out, quiet=quiet)[0]


def plan_and_check(stack: str, *, stack_file: Path | None = None, out: Path = ROOT / "build" / "plan",
                   quiet: bool = False, raise_config_errors: bool = False,
                   write: bool = True) -> tuple[int, Plan | None]:
    """`plan_one`'s exit code, and the plan it checked (None when the config was refused). `raise_config_errors`:
    an invalid config raises its ConfigError instead of printing it (a caller that words it for its user).
    `write=False`: every check, no files (the plan files, cluster.yaml, the picture): what tools.submit needs."""
    from stack_config import ConfigError
    from verify.validate import validate_plan

    started = time.perf_counter()
    progress(f"{stack}: running the program under mocks")
    try:
        plan = run(stack, stack_file=stack_file)
    except (ConfigError, FileNotFoundError, YamlFileError) as error:
        if raise_config_errors:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2, None
    progress(f"{stack}: {len(plan.resources)} resources registered in {time.perf_counter() - started:.1f} s")
    warn_placeholders(plan)
    directory = out / stack
    from verify import cost

    if write:
        directory.mkdir(parents=True, exist_ok=True)
        resources, manifests = render(plan)
        (directory / "resources.json").write_text(resources)
        (directory / "manifests.yaml").write_text(manifests)
        # What its nodes cost per hour at min and max size (cost.json: what plan-diff compares).
        priced = cost.stack_cost(plan.config)
        cost.write(priced, directory)
        for line in cost.summary(priced):
            progress(f"{stack}: {line}")
    if not quiet:
        print(tree(plan))
    from verify import render as cluster

    rendered = time.perf_counter()
    try:
        objects = cluster.render_cluster(plan)
    except (cluster.RenderError, FileNotFoundError) as error:
        print(f"error: rendering the cluster of stack '{stack}': {error}", file=sys.stderr)
        return 1, plan
    if write:
        (directory / "cluster.yaml").write_text(cluster.dump(objects))
    counts = ", ".join(f"{source} {count}" for source, count in cluster.by_source(objects).items()) or "none"
    progress(f"{stack}: {'cluster.yaml' if write else 'cluster'}: {len(objects)} objects ({counts}) in "
             f"{time.perf_counter() - rendered:.1f} s")
    from verify import simulate

    simulated = time.perf_counter()
    simulation = simulate.simulate(plan, objects)
    if write:
        simulate.write(simulation, directory)
    progress(f"{stack}: simulation{'.json' if write else ''}: {simulate.summary(simulation)} in "
             f"{time.perf_counter() - simulated:.1f} s")
    for line in simulate.assumptions(simulation):
        progress(f"{stack}: assumed: {line}")
    from verify import overview

    # dot draws overview.svg while the plan is validated
    drawing = overview.Drawing(plan, objects, directory) if write else None
    misses = simulate.findings(simulation)
    if misses:
        print(f"error: the cluster of stack '{stack}' would not run: {len(misses)} miss(es):", file=sys.stderr)
        for line in misses:
            print(f"  - {line}", file=sys.stderr)
    validated = time.perf_counter()
    report = validate_plan(plan, directory if write else None, objects)
    progress(f"{stack}: validated ({report.summary()}) in {time.perf_counter() - validated:.1f} s: "
             + (f"{len(report.errors)} error(s)" if report.errors else "ok"))
    if drawing is not None:
        progress(f"{stack}: {drawing.finish()}")
    for line in report.notes:
        print(f"note: {line}", file=sys.stderr)
    if report.errors:
        print(f"error: the plan of stack '{stack}' has {len(report.errors)} invalid object(s):", file=sys.stderr)
        for line in report.errors:
            print(f"  - {line}", file=sys.stderr)
        return 1, plan
    if misses:
        return 1, plan
    if not quiet:
        picture = f", {directory / overview.SVG_NAME}" if (directory / overview.SVG_NAME).is_file() else ""
        print(f"\nwrote {directory / 'resources.json'}, {directory / 'manifests.yaml'}, {directory / 'cluster.yaml'}"
              f"{picture} and {directory / cost.FILE}")
    return 0, plan
