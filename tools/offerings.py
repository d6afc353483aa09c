"""Regenerate `catalog/ec2_offerings.py`: the AWS Regions where each catalogued GPU instance type is offered.

Three sources, one output format:

    python -m tools.offerings prices --repository tsaol/aws-gpu --commit <sha> data/<family>_instances.js ...
        parse the per-family GPU price files of tsaol/aws-gpu (generated from instances.vantage.sh, which reads
        AWS's public price list; each file says `// Last updated: <date>`), read at <sha>; a GPU type with an
        on-demand price in a Region is offered there. Every Region any file prices becomes known (Local and
        Wavelength Zones are left out). The committed catalog comes from this source: 30 Regions.
    python -m tools.offerings karpenter --commit <sha> zz_generated.pricing_aws.go \\
        zz_generated.pricing_aws_us_gov.go ...
        parse aws/karpenter-provider-aws's generated on-demand price tables (pkg/providers/pricing/), read at
        <sha>; an instance type priced on-demand in a Region is offered there. Only the Regions a table lists
        become known.
    python -m tools.offerings ec2 [--region us-east-1]
        ask EC2 itself: DescribeRegions, then DescribeInstanceTypeOfferings (LocationType=region, filtered to the
        catalogued types) in every Region the account has enabled. Needs AWS credentials; without them it exits 2
        with one line.

The price files and Karpenter's tables are parsed by tools/price_sources.py, the parsers tools/gen_ec2_prices.py
reads the same sources with (so catalog/ec2_prices.py's GPU prices and this catalog come from one parse).

All three write catalog/ec2_offerings.py (`--out` to write elsewhere, `--check` to only compare). Zone-level offerings
(an `availabilityZone` of a group) are not collected: zone names are shuffled per account, so a committed table of
them would be wrong for every other account.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from catalog.gpu_instances import GPU_INSTANCE_TYPES
from tools.price_sources import KARPENTER_REPOSITORY, parse_karpenter_table, read_price_files
from verify.plan_record import ROOT

OUT = ROOT / "catalog" / "ec2_offerings.py"
KARPENTER_DIRECTORY = "pkg/providers/pricing"
# DescribeInstanceTypeOfferings takes at most this many values per filter here (chunked to stay well inside the
# API's request limits; https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html).
FILTER_CHUNK = 50
# Error codes of credentials that exist but don't authenticate
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
UNAUTHENTICATED = {"AuthFailure", "ExpiredToken", "RequestExpired", "UnrecognizedClientException",
                   "InvalidClientTokenId"}


def catalogued_types() -> tuple[str, ...]:
    """The GPU instance types a stack may name (catalog/gpu_instances.py). The system node group's general-purpose
    types are not recorded: they are offered nearly everywhere, and no source here covers them beyond us-east-1."""
    return tuple(sorted(GPU_INSTANCE_TYPES))


@dataclass(frozen=True)
class Source:
    """Where one Region's data came from."""

    description: str
    """e.g. `aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go @<sha>`."""
    as_of: str
    """When the source itself was generated (ISO 8601 date)."""
    regions: tuple[str, ...]


@dataclass(frozen=True)
class Offerings:
    """Region → instance types offered there, restricted to the catalogued types, with each Region's source."""

    by_region: Mapping[str, frozenset[str]]
    sources: tuple[Source, ...]
    command: str


# ---- source 1: Karpenter's generated price tables ----------------------------------------------------------------

def from_karpenter(files: Iterable[Path], commit: str, command: str) -> Offerings:
    wanted = set(catalogued_types())
    by_region: dict[str, frozenset[str]] = {}
    sources = []
    for path in files:
        generated_at, regions = parse_karpenter_table(path.read_text())
        for region, prices in regions.items():
            by_region[region] = frozenset(prices.keys() & wanted)
        sources.append(Source(f"{KARPENTER_REPOSITORY} {KARPENTER_DIRECTORY}/{path.name} @{commit}",
                              generated_at[:10], tuple(sorted(regions))))
    return Offerings(by_region, tuple(sources), command)


# ---- source 2: per-family GPU price files ------------------------------------------------------------------------

def from_prices(files: Iterable[Path], repository: str, commit: str, command: str) -> Offerings:
    """Every Region any file prices becomes known; a catalogued type is offered where it has an on-demand price
    (tools/price_sources.py's `read_price_files`, the same parse `tools.gen_ec2_prices` takes the prices from)."""
    files = list(files)
    read = read_price_files(path.read_text() for path in files)
    wanted = catalogued_types()
    by_region = {region: frozenset(t for t in wanted if region in read.prices.get(t, {})) for region in read.regions}
    names = ", ".join(sorted(f"data/{path.name}" for path in files))
    return Offerings(by_region, (Source(f"{repository} {names} @{commit}", read.as_of, read.regions),), command)


# ---- source 3: the EC2 API ---------------------------------------------------------------------------------------

class NoCredentials(Exception):
    """No usable AWS credentials (or no Region to start from)."""


def from_ec2(session: Any, start_region: str, command: str, today: date | None = None) -> Offerings:
    """Ask EC2 in every enabled Region which catalogued types it offers. `session` is a boto3 Session (or a fake
    with `.client(service, region_name=...)`)."""
    import botocore.exceptions

    wanted = catalogued_types()
    try:
        regions = sorted(region["RegionName"]
                         for region in session.client("ec2", region_name=start_region).describe_regions()["Regions"])
        by_region: dict[str, frozenset[str]] = {}
        for region in regions:
            ec2 = session.client("ec2", region_name=region)
            found: set[str] = set()
            for chunk_start in range(0, len(wanted), FILTER_CHUNK):
                chunk = list(wanted[chunk_start:chunk_start + FILTER_CHUNK])
                token = None
                while True:
                    kwargs: dict[str, Any] = {"LocationType": "region",
                                              "Filters": [{"Name": "instance-type", "Values": chunk}]}
                    if token:
                        kwargs["NextToken"] = token
                    page = ec2.describe_instance_type_offerings(**kwargs)
                    found.update(offering["InstanceType"] for offering in page["InstanceTypeOfferings"])
                    token = page.get("NextToken")
                    if not token:
                        break
            by_region[region] = frozenset(found)
    except (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError,
            botocore.exceptions.NoRegionError) as error:
        raise NoCredentials(str(error)) from None
    except botocore.exceptions.ClientError as error:
        # Credentials that exist but don't authenticate (expired, revoked, wrong partition) are the same case.
        if error.response.get("Error", {}).get("Code") in UNAUTHENTICATED:
            raise NoCredentials(str(error)) from None
        raise
    as_of = (today or date.today()).isoformat()
    source = Source(f"EC2 DescribeInstanceTypeOfferings (LocationType=region) from {start_region}", as_of,
                    tuple(regions))
    return Offerings(by_region, (source,), command)


# ---- the module it writes ----------------------------------------------------------------------------------------

def render(offerings: Offerings) -> str:
    """catalog/ec2_offerings.py's text: type → Regions for every catalogued type, the known Regions and sources."""
    types = catalogued_types()
    known = sorted(offerings.by_region)
    lines = [
        '"""Where each catalogued GPU instance type is offered: instance type → the AWS Regions that offer it.',
        "",
        f"GENERATED by `{offerings.command}` (tools/offerings.py); do not edit by hand.",
        "Sources (a Region is known only if its source lists it; an instance type offered in a Region = priced",
        "on-demand there for the price tables, listed by DescribeInstanceTypeOfferings for the EC2 API):",
    ]
    for source in offerings.sources:
        lines.append(f"- {source.description}, generated {source.as_of}: {', '.join(source.regions)}")
    lines += [
        "A Region not in KNOWN_REGIONS has no data here: config validation says nothing about it. Zone-level",
        "offerings are not recorded (zone names differ per account).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"SOURCE = {'; '.join(source.description for source in offerings.sources)!r}",
        f"AS_OF = {max((s.as_of for s in offerings.sources), default='')!r}",
        '"""The newest generation date among the sources (each Region\'s own is in REGION_AS_OF)."""',
        "SOURCES: tuple[tuple[str, str], ...] = (",
    ]
    lines += [f"    ({source.description!r}, {source.as_of!r})," for source in offerings.sources]
    lines += [")", '"""(source, generation date) of every source used."""', "",
              "REGION_AS_OF: dict[str, str] = {"]
    region_as_of = {region: source.as_of for source in offerings.sources for region in source.regions}
    lines += [f"    {region!r}: {region_as_of.get(region, '')!r}," for region in known]
    lines += ["}", '"""Every Region the data covers, and when its source was generated."""', "",
              "KNOWN_REGIONS: tuple[str, ...] = tuple(REGION_AS_OF)", "",
              "OFFERED_IN: dict[str, tuple[str, ...]] = {"]
    for instance_type in types:
        regions = tuple(region for region in known if instance_type in offerings.by_region[region])
        lines.append(f"    {instance_type!r}: {regions!r},")
    lines += ["}", '"""Instance type → the known Regions that offer it (empty: none of them does)."""', ""]
    return "\n".join(lines)


def write(offerings: Offerings, out: Path) -> None:
    out.write_text(render(offerings))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.offerings", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="module to write (default catalog/ec2_offerings.py)")
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing; exit 1 if stale")
    sub = parser.add_subparsers(dest="source", required=True)
    prices = sub.add_parser("prices", help="from per-family GPU price files (tsaol/aws-gpu data/*_instances.js)")
    prices.add_argument("--repository", required=True, help="the repository the files come from")
    prices.add_argument("--commit", required=True, help="the commit the files were read at")
    prices.add_argument("files", nargs="+", type=Path, help="data/<family>_instances.js files")
    karpenter = sub.add_parser("karpenter", help="from aws/karpenter-provider-aws's generated price tables")
    karpenter.add_argument("--commit", required=True, help="the commit the files were read at")
    karpenter.add_argument("files", nargs="+", type=Path, help="zz_generated.pricing_aws*.go files")
    ec2 = sub.add_parser("ec2", help="from the EC2 API (needs AWS credentials)")
    ec2.add_argument("--region", default="us-east-1", help="Region to list the others from (default us-east-1)")
    args = parser.parse_args(argv)

    if args.source == "prices":
        names = " ".join(f"data/{path.name}" for path in args.files)
        offerings = from_prices(args.files, args.repository, args.commit,
                                f"python -m tools.offerings prices --repository {args.repository} "
                                f"--commit {args.commit} {names}")
    elif args.source == "karpenter":
        names = " ".join(path.name for path in args.files)
        offerings = from_karpenter(args.files, args.commit,
                                   f"python -m tools.offerings karpenter --commit {args.commit} {names}")
    else:
        import boto3

        try:
            offerings = from_ec2(boto3.Session(), args.region, f"python -m tools.offerings ec2 --region {args.region}")
        except NoCredentials as error:
            print(f"tools.offerings: no usable AWS credentials ({error}); set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                  "AWS_SECRET_ACCESS_KEY, or refresh from published tables with `prices` or `karpenter`",
                  file=sys.stderr)
            return 2
    text = render(offerings)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: rerun without --check", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}: {len(offerings.by_region)} Regions, {len(catalogued_types())} instance types")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
