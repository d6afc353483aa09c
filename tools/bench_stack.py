"""Create an ephemeral benchmark stack file from `stacks/templates/bench.yaml`.

``python -m tools.bench_stack --name a100-sweep --ttl-hours 6 --image-ref <repo@sha256:...>`` (what
``make bench-stack NAME=... TTL=... IMAGE=...`` runs) writes ``stacks/Pulumi.bench-<name>.yaml`` with the TTL
and the creation time recorded as stack config (and so as tags on every taggable resource), validates it
(cost cap included) before anything is deployed, and prints the cap in money beside its node-hours (verify/cost.py).
Then: ``pulumi stack init bench-<name> && pulumi up``.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from stack_config import ConfigError, StackConfig
from stack_config.source import load_yaml_file
from stages.config import parse_stack_config
from verify import cost
from verify.plan import ROOT, stack_config

TEMPLATE = Path("stacks") / "templates" / "bench.yaml"
"""Relative to the project root."""


BENCH_VPC_POOL = ipaddress.ip_network("10.64.0.0/10")
"""Bench stacks' VPCs: one /16 each from here (10.64-10.127), clear of dev's and prod's. Every bench VPC attaches to
the same Transit Gateway as the runners' network: two with one CIDR would make their routes ambiguous."""


def stack_vpc_cidrs(root: Path = ROOT) -> dict[str, ipaddress.IPv4Network]:
    """`network.vpcCidr` of every stack file in the repository (stacks that adopt a VPC have none)."""
    cidrs = {}
    for path in sorted((root / "stacks").glob("Pulumi.*.yaml")):
        config = (load_yaml_file(path) or {}).get("config") or {}
        cidr = (config.get("gtp:network") or {}).get("vpcCidr")
        if isinstance(cidr, str) and not (config.get("gtp:network") or {}).get("existingVpcId"):
            cidrs[path.name.removeprefix("Pulumi.").removesuffix(".yaml")] = ipaddress.ip_network(cidr)
    return cidrs


def overlapping_vpcs(cidrs: dict[str, ipaddress.IPv4Network]) -> list[str]:
    """Each pair of stacks whose VPC CIDRs overlap, as `a (cidr) and b (cidr)`."""
    names = sorted(cidrs)
    return [f"{a} ({cidrs[a]}) and {b} ({cidrs[b]})" for i, a in enumerate(names) for b in names[i + 1:]
            if cidrs[a].overlaps(cidrs[b])]


def bench_vpc_cidr(name: str, taken: dict[str, ipaddress.IPv4Network]) -> str:
    """A /16 of `BENCH_VPC_POOL` for stack `bench-<name>`: derived from the name (stable), the next free one when
    another stack holds it."""
    blocks = list(BENCH_VPC_POOL.subnets(new_prefix=16))
    start = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(blocks)
    for offset in range(len(blocks)):
        block = blocks[(start + offset) % len(blocks)]
        if not any(block.overlaps(cidr) for cidr in taken.values()):
            return str(block)
    raise ValueError(f"no free /16 left in {BENCH_VPC_POOL} for bench-{name}: destroy old bench stacks first")


def render(template: str, ttl_hours: float, image_ref: str, created_at: datetime, vpc_cidr: str) -> str:
    text = template.replace('"@TTL_HOURS@"', f"{ttl_hours:g}").replace("@IMAGE@", image_ref)
    text = text.replace("@VPC_CIDR@", vpc_cidr)
    return text.replace("@CREATED_AT@", created_at.strftime("%Y-%m-%dT%H:%M:%SZ"))


def create(name: str, ttl_hours: float, image_ref: str, *, root: Path = ROOT, now: datetime | None = None) -> Path:
    """Write and validate the stack file; raises ValueError / ConfigError with what is wrong."""
    if not re.match(r"^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$", name):
        raise ValueError(f"--name {name!r} must be a short lowercase DNS label (the stack is 'bench-{name}')")
    path = root / "stacks" / f"Pulumi.bench-{name}.yaml"
    if path.exists():
        raise ValueError(f"{path} exists; destroy that stack first or pick another name")
    created_at = (now or datetime.now(UTC)).replace(microsecond=0)
    taken = stack_vpc_cidrs(root)
    clashes = overlapping_vpcs(taken)
    if clashes:
        raise ValueError(f"stacks in this repository have overlapping VPC CIDRs on one Transit Gateway: "
                         f"{'; '.join(clashes)}; give each its own network.vpcCidr")
    path.write_text(render((root / TEMPLATE).read_text(), ttl_hours, image_ref, created_at,
                           bench_vpc_cidr(name, taken)))
    try:
        parse(root, f"bench-{name}")
    except ConfigError:
        path.unlink()
        raise
    return path


def parse(root: Path, stack: str) -> StackConfig:
    """The stack file's config, parsed and checked as the program would (raises ConfigError)."""
    project, config, secrets = stack_config(root, stack)
    raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{project}:")}
    return parse_stack_config(raw, project=project, stack=stack, secret_keys=[k.split(":", 1)[1] for k in secrets])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_stack", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--ttl-hours", type=float, required=True)
    parser.add_argument("--image-ref", required=True, help="an image already in ECR, by digest (no rebuild)")
    args = parser.parse_args(argv)
    try:
        path = create(args.name, args.ttl_hours, args.image_ref)
    except (ValueError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path.relative_to(ROOT)}; next: pulumi stack init bench-{args.name} && "
          f"pulumi up --stack bench-{args.name}")
    # The cap in money beside its node-hours: what maxGpuNodeHours and the TTL allow (verify/cost.py).
    for line in cost.bench_cap(parse(ROOT, f"bench-{args.name}")):
        print(line)
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
