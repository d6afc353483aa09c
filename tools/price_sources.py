"""The parsers of the two published price sources the catalog is generated from, shared by both generators.

- aws/karpenter-provider-aws's generated on-demand price tables (`pkg/providers/pricing/zz_generated.pricing_*.go`,
  one per partition: hack/code/prices_gen/main.go writes them): `parse_karpenter_table`.
- tsaol/aws-gpu's per-family GPU price files (`data/<family>_instances.js`, generated from instances.vantage.sh,
  which reads AWS's public price list): `parse_price_file`, and `read_price_files` for a set of them.

`tools/offerings.py` (catalog/ec2_offerings.py: where a type is offered = where it has an on-demand price) and
`tools/gen_ec2_prices.py` (catalog/ec2_prices.py: the prices) read the same sources through these functions, so the
two modules cannot disagree about which Regions a source prices a type in.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

KARPENTER_REPOSITORY = "aws/karpenter-provider-aws"
KARPENTER_FILES = {
    "aws": "pkg/providers/pricing/zz_generated.pricing_aws.go",
    "aws-us-gov": "pkg/providers/pricing/zz_generated.pricing_aws_us_gov.go",
    "aws-cn": "pkg/providers/pricing/zz_generated.pricing_aws_cn.go",
}
"""Partition → the provider's generated file (hack/code/prices_gen/main.go writes one per partition)."""

# ---- aws/karpenter-provider-aws zz_generated.pricing_*.go --------------------------------------------------------

_GENERATED_AT = re.compile(r"^// generated at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", re.MULTILINE)
_KARPENTER_REGION = re.compile(r'^\t"([a-z]{2}(?:-[a-z]+)+-\d+)": \{$', re.MULTILINE)
_KARPENTER_PRICE = re.compile(r'"([a-z0-9-]+\.[a-z0-9-]+)": ([0-9.]+)')


def parse_karpenter_table(text: str) -> tuple[str, dict[str, dict[str, float]]]:
    """(generation time, `2026-07-20T13:44:30Z`; Region → instance type → on-demand price per hour) of one
    zz_generated.pricing_*.go file. A type a Region's block lacks has no on-demand price there."""
    generated = _GENERATED_AT.search(text)
    if generated is None:
        raise ValueError("no '// generated at <time>' line: not a Karpenter generated price table")
    starts = list(_KARPENTER_REGION.finditer(text))
    if not starts:
        raise ValueError("no Region blocks found: not a Karpenter generated price table")
    regions: dict[str, dict[str, float]] = {}
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        regions[start.group(1)] = {name: float(price)
                                   for name, price in _KARPENTER_PRICE.findall(text[start.end():end])}
    return generated.group(1), regions


# ---- tsaol/aws-gpu data/<family>_instances.js --------------------------------------------------------------------

_LAST_UPDATED = re.compile(r"^// Last updated: (\d{4}-\d{2}-\d{2})\s*$", re.MULTILINE)
_DATA = re.compile(r"=\s*(\[.*\])\s*;?\s*$", re.DOTALL)
REGION_NAME = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")
"""A Region's name (`eu-west-3`), not a Local or Wavelength Zone's (`eu-west-3-wl1-cmn1`, `us-east-1-bos-1`)."""


def parse_price_file(text: str) -> tuple[str, dict[str, dict[str, float]]]:
    """(its `Last updated` date; instance type → Region → on-demand price per hour (USD)) of one
    `data/<family>_instances.js` file: `var instanceData = [{"apiName": ..., "pricing": {region: {"onDemand": $}}}]`.
    Local and Wavelength Zones are left out; a Region without an `onDemand` price is left out of the type's map."""
    updated = _LAST_UPDATED.search(text)
    data = _DATA.search(text)
    if updated is None or data is None:
        raise ValueError("no '// Last updated: <date>' line or no instance array: not a GPU price file")
    types: dict[str, dict[str, float]] = {}
    for row in json.loads(data.group(1)):
        types[row["apiName"]] = {region: float(price["onDemand"])
                                 for region, price in sorted((row.get("pricing") or {}).items())
                                 if REGION_NAME.match(region) and (price or {}).get("onDemand")}
    return updated.group(1), types


@dataclass(frozen=True)
class PriceFiles:
    """A set of price files read together."""

    as_of: str
    """The newest `Last updated` date among them."""
    regions: tuple[str, ...]
    """Every Region any file prices any type in (sorted): the Regions the files cover. In one of them, a type without
    a price is known not to be sold on demand; outside them nothing is known."""
    prices: dict[str, dict[str, float]]
    """Instance type → Region → on-demand price per hour (USD), every type the files hold."""


def read_price_files(texts: Iterable[str]) -> PriceFiles:
    """Parse the files' texts and merge them (each type is in one family's file)."""
    dates, prices = set(), {}
    for text in texts:
        as_of, types = parse_price_file(text)
        dates.add(as_of)
        prices.update(types)
    regions = sorted({region for where in prices.values() for region in where})
    return PriceFiles(max(dates, default=""), tuple(regions), prices)


def price_file_names(instance_types: Iterable[str]) -> list[str]:
    """`data/<family>_instances.js` of each family among `instance_types` (`p6-b200.48xlarge` → p6-b200), sorted."""
    return sorted({f"data/{name.split('.', 1)[0]}_instances.js" for name in instance_types})


def git_show(git_dir: Path, commit: str, path: str) -> str:
    """A file's text at `commit` of a local git directory (no network); ValueError naming it when absent."""
    result = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True,
                            text=True, check=False)
    if result.returncode:
        raise ValueError(f"{path} at {commit}: {result.stderr.strip()}")
    return result.stdout


def resolve_commit(git_dir: Path, ref: str) -> str:
    """The full sha of `ref` in a local git directory; ValueError when it is not a commit there."""
    result = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                            capture_output=True, text=True, check=False)
    if result.returncode:
        raise ValueError(f"no commit {ref!r} in {git_dir}: {result.stderr.strip()}")
    return result.stdout.strip()

