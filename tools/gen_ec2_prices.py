"""Generate `catalog/ec2_prices.py`: on-demand prices of the catalog's instance types, per Region, from two sources.

    python -m tools.gen_ec2_prices --karpenter <git dir of aws/karpenter-provider-aws> --karpenter-commit <sha>
        --gpu-prices <git dir of tsaol/aws-gpu> --gpu-prices-commit <sha>

reads, at those commits (``git show``, no network):
- the GPU price files `data/<family>_instances.js` of tsaol/aws-gpu, one per family in `catalog/gpu_instances.py`
  (the files `tools.offerings prices` reads, through the same parser, tools/price_sources.py): the prices of every
  catalogued GPU type in every Region the files cover (30 in the committed module);
- aws/karpenter-provider-aws's generated tables `pkg/providers/pricing/zz_generated.pricing_*.go`: the prices of
  the system group's types (`catalog/cpu_instances.py`) in the Regions the provider publishes (us-east-1,
  us-gov-east-1, us-gov-west-1, cn-north-1), and of the GPU types in those of them the price files don't cover
  (cn-north-1, in CNY).
A type a source's Region lacks is written as None: known not to be sold on demand there (e.g. a Capacity-Block-only
type). A Region a source doesn't cover is absent from its table: unknown, and `verify/cost.py` falls back, per
instance type, to the partition's reference Region.
Refresh: fetch both repositories, pick the newest commit that touched the files, rerun, review the diff, and refresh
catalog/ec2_offerings.py from the same price-file commit (`python -m tools.offerings prices`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from tools.price_sources import (
    KARPENTER_FILES,
    KARPENTER_REPOSITORY,
    git_show,
    parse_karpenter_table,
    price_file_names,
    read_price_files,
    resolve_commit,
)
from verify.plan_record import ROOT

GPU_PRICES_REPOSITORY = "tsaol/aws-gpu"
GPU_PRICES = "gpu-price-files"
"""The key of the price files' source in the module."""
CURRENCY = {"aws": "USD", "aws-us-gov": "USD", "aws-cn": "CNY"}
"""The provider reads `PricePerUnit["CNY"]` in `cn-` regions, USD elsewhere (pkg/providers/pricing/pricing.go,
UpdateOnDemandPricing: `currency := "USD"; if strings.HasPrefix(p.region, "cn-") { currency = "CNY" }`); the price
files hold no aws-cn Region (their prices are USD)."""
OUTPUT = Path("catalog") / "ec2_prices.py"
COMMAND = ("python -m tools.gen_ec2_prices --karpenter <git dir of aws/karpenter-provider-aws> "
           "--karpenter-commit {karpenter} --gpu-prices <git dir of tsaol/aws-gpu> --gpu-prices-commit {gpu}")


@dataclass(frozen=True)
class Source:
    """One source's part of the module: where it comes from and the prices it gives."""

    repository: str
    commit: str
    files: str
    """The file(s) read at `commit`, comma-separated."""
    generated_at: str
    """When the source generated them (`2026-07-20T13:44:30Z`, or a date)."""
    prices: dict[str, dict[str, float | None]]
    """Region → instance type → on-demand price per hour (None: not sold on demand there)."""


def karpenter_key(partition: str) -> str:
    return f"karpenter-{partition}"


def sources(karpenter: Mapping[str, tuple[str, dict[str, dict[str, float]]]], karpenter_commit: str,
            gpu_files: Mapping[str, str], gpu_commit: str) -> dict[str, Source]:
    """Source key → Source. `karpenter`: partition → the provider's parsed table; `gpu_files`: file name → text.
    The price files give the GPU types in every Region they cover; Karpenter gives the system group's types, and the
    GPU types in its Regions the files don't cover: each (Region, type) has exactly one source."""
    gpu_types, cpu_types = sorted(GPU_INSTANCE_TYPES), sorted(CPU_INSTANCE_TYPES)
    files = read_price_files(gpu_files.values())
    result = {GPU_PRICES: Source(
        GPU_PRICES_REPOSITORY, gpu_commit, ", ".join(sorted(gpu_files)), files.as_of,
        {region: {t: files.prices.get(t, {}).get(region) for t in gpu_types} for region in files.regions})}
    for partition, (generated_at, regions) in karpenter.items():
        result[karpenter_key(partition)] = Source(
            KARPENTER_REPOSITORY, karpenter_commit, KARPENTER_FILES[partition], generated_at,
            {region: {t: prices.get(t) for t in (cpu_types if region in files.regions else gpu_types + cpu_types)}
             for region, prices in regions.items()})
    return result


def _rows(prices: Mapping[str, float | None], indent: str) -> list[str]:
    """`"type": price,` entries, as many to a line as fit in 118 columns."""
    lines, row = [], indent
    for name, price in prices.items():
        entry = f'"{name}": {price!r},'
        if len(row) + len(entry) + 1 > 118:
            lines.append(row)
            row = indent
        row += f" {entry}"
    return [*lines, row]


def render(command: str, table: Mapping[str, Source]) -> str:
    """The Python module: provenance, then per source a block per Region, a few prices per line."""
    lines = [
        '"""On-demand EC2 prices per hour (USD; CNY in aws-cn) of the instance types in `gpu_instances.py` and',
        "`cpu_instances.py`, per Region, from two published price sources.",
        "",
        f"GENERATED by `{command}` (tools/gen_ec2_prices.py); do not edit.",
        "Sources (each gives its own Regions and types; a (Region, type) has one source):",
    ]
    for key, source in table.items():
        regions = ", ".join(source.prices)
        lines.append(f"- {key}: {source.repository} @ {source.commit}, {source.files} (generated "
                     f"{source.generated_at}): {regions}.")
    lines += [
        "The price files are generated from instances.vantage.sh, which reads AWS's public price list; they give the",
        "GPU types in every Region they cover. The Karpenter provider fills its tables from the AWS Price List API's",
        "on-demand terms for Linux, shared tenancy, no pre-installed software, capacity status Used",
        # One line of the generated module's header each: catalog/ec2_prices.py is this output, byte for byte.
        "(pkg/providers/pricing/pricing.go, fetchOnDemandPricing); it gives the system group's types, and the GPU types",  # noqa: E501
        "in its Regions the price files don't cover.",
        "None: no on-demand price in that Region (not sold on demand there). A Region or type a source doesn't list is",
        "unknown: `verify/cost.py` prices that type with its partition's reference Region (as the provider falls back",
        "to us-east-1, pricing.go, Reset) and says so per node group. Spot prices and reservations are not list",
        "prices and are not here: `verify/cost.py` marks those groups as such.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "SOURCES: dict[str, tuple[str, str, str, str]] = {",
        *(f'    "{key}": ("{s.repository}", "{s.commit}", "{s.files}", "{s.generated_at}"),'
          for key, s in table.items()),
        "}",
        '"""Source key → (repository, commit, the file(s) read at that commit, when the source generated them)."""',
        "CURRENCY: dict[str, str] = {" + ", ".join(f'"{p}": "{c}"' for p, c in CURRENCY.items()) + "}",
        '"""Partition → the currency of its prices."""',
        "",
        "ON_DEMAND_PRICES: dict[str, dict[str, dict[str, float | None]]] = {",
    ]
    for key, source in table.items():
        lines.append(f'    "{key}": {{')
        for region, prices in source.prices.items():
            lines += [f'        "{region}": {{', *_rows(prices, "           "), "        },"]
        lines.append("    },")
    lines += ["}", '"""Source key → Region → instance type → on-demand price per hour (None: not sold on demand '
              'there)."""', ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gen_ec2_prices", description=__doc__.split("\n\n")[0])
    parser.add_argument("--karpenter", type=Path, required=True, help=f"a git directory of {KARPENTER_REPOSITORY}")
    parser.add_argument("--karpenter-commit", required=True, help="the commit (or ref) to read; recorded as its sha")
    parser.add_argument("--gpu-prices", type=Path, required=True, help=f"a git directory of {GPU_PRICES_REPOSITORY}")
    parser.add_argument("--gpu-prices-commit", required=True, help="the commit (or ref) to read; recorded as its sha")
    parser.add_argument("--output", type=Path, default=ROOT / OUTPUT)
    args = parser.parse_args(argv)
    try:
        karpenter_commit = resolve_commit(args.karpenter, args.karpenter_commit)
        gpu_commit = resolve_commit(args.gpu_prices, args.gpu_prices_commit)
        karpenter = {partition: parse_karpenter_table(git_show(args.karpenter, karpenter_commit, path))
                     for partition, path in KARPENTER_FILES.items()}
        gpu_files = {name: git_show(args.gpu_prices, gpu_commit, name)
                     for name in price_file_names(GPU_INSTANCE_TYPES)}
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    command = COMMAND.format(karpenter=karpenter_commit, gpu=gpu_commit)
    args.output.write_text(render(command, sources(karpenter, karpenter_commit, gpu_files, gpu_commit)))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
