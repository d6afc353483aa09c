"""Create an ephemeral benchmark stack file from `stacks/templates/bench.yaml`.

``python -m tools.bench_stack --name a100-sweep --ttl-hours 6 --image-ref <repo@sha256:...>`` (what
``make bench-stack NAME=... TTL=... IMAGE=...`` runs) writes ``stacks/Pulumi.bench-<name>.yaml`` with the TTL
and the creation time recorded as stack config (and so as tags on every taggable resource), and validates it
(cost cap included) before anything is deployed. Then: ``pulumi stack init bench-<name> && pulumi up``.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from stack_config import ConfigError
from stages.config import parse_stack_config
from tools.plan import ROOT, stack_config

TEMPLATE = Path("stacks") / "templates" / "bench.yaml"
"""Relative to the project root."""


def render(template: str, ttl_hours: float, image_ref: str, created_at: datetime) -> str:
    text = template.replace('"@TTL_HOURS@"', f"{ttl_hours:g}").replace("@IMAGE@", image_ref)
    return text.replace("@CREATED_AT@", created_at.strftime("%Y-%m-%dT%H:%M:%SZ"))


def create(name: str, ttl_hours: float, image_ref: str, *, root: Path = ROOT, now: datetime | None = None) -> Path:
    """Write and validate the stack file; raises ValueError / ConfigError with what is wrong."""
    if not re.match(r"^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$", name):
        raise ValueError(f"--name {name!r} must be a short lowercase DNS label (the stack is 'bench-{name}')")
    path = root / "stacks" / f"Pulumi.bench-{name}.yaml"
    if path.exists():
        raise ValueError(f"{path} exists; destroy that stack first or pick another name")
    created_at = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    path.write_text(render((root / TEMPLATE).read_text(), ttl_hours, image_ref, created_at))
    try:
        project, config, secrets = stack_config(root, f"bench-{name}")
        raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{project}:")}
        parse_stack_config(raw, project=project, stack=f"bench-{name}", secret_keys=[k.split(":", 1)[1] for k in secrets])
    except ConfigError:
        path.unlink()
        raise
    return path


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
    print(f"wrote {path.relative_to(ROOT)}; next: pulumi stack init bench-{args.name} && pulumi up --stack bench-{args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
