"""What a stack's nodes cost per hour at its node groups' minimum and maximum sizes, from `catalog/ec2_prices.py`.

`verify.plan` writes it as `build/plan/<stack>/cost.json` and prints two lines; `verify.plan_diff` prints the change
between two plans; `tools.bench_stack` prints a bench stack's cap in money beside its node-hours.

Per node group (the system group and every GPU group) the hourly price of one node is the on-demand list price of its
most expensive instance type (a group of several types may launch any of them), times minSize and maxSize:
- on-demand groups: that price;
- SPOT groups: no fixed price; at most on-demand (EC2 never charges more than the On-Demand price for a Spot Instance:
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-instances.html), shown as `spot: ≤ on-demand`;
- groups on a capacity reservation or Capacity Block: billed by the reservation whether nodes run or not, so left out
  of the totals; their on-demand figure is shown for reference;
- clusters the stack doesn't provision in AWS (an existing k3s, a Swarm): not priced (your own servers).
Not counted: EBS volumes, NAT gateways, load balancers, data transfer, FSx/EFS, the EKS control plane's hourly fee.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from catalog import ec2_prices
from catalog.aws_regions import REGIONS, partition
from stack_config import StackConfig
from stack_config.schema import GpuNodeGroupConfig

REFERENCE_REGION = {"aws": "us-east-1", "aws-us-gov": "us-gov-west-1", "aws-cn": "cn-north-1"}
"""Prices for an instance type a Region's data lacks: its partition's Region here. The Karpenter provider itself
starts every region without its own data from us-east-1's prices (pkg/providers/pricing/pricing.go, Reset); within the
partition the currency stays right (aws-cn prices are in CNY)."""
NOT_OWN_SERVERS = "not priced (your own servers)"
RESERVED = "reserved (billed by the reservation)"
FILE = "cost.json"

_PRICES: dict[str, dict[str, tuple[float | None, str]]] = {}
"""Region → instance type → (on-demand price per hour or None, its source key in `ec2_prices.SOURCES`)."""
for _source, _regions in ec2_prices.ON_DEMAND_PRICES.items():
    for _region, _types in _regions.items():
        for _type, _price in _types.items():
            _PRICES.setdefault(_region, {})[_type] = (_price, _source)


def price_of(instance_type: str, region: str) -> tuple[float | None, str | None, str | None]:
    """(the on-demand price per hour of one `instance_type` node in `region`, the Region whose price it is, its
    source key). The Region's own entry when its data has the type, a price or None (known: not sold on demand
    there); else, per instance type, its partition's reference Region's; (None, None, None) when nothing is known."""
    for source_region in (region, REFERENCE_REGION.get(partition(region)) if region in REGIONS else None):
        if source_region is not None and instance_type in _PRICES.get(source_region, {}):
            price, source = _PRICES[source_region][instance_type]
            return price, source_region, source
    return None, None, None


def _group(role: str, name: str, instance_types: tuple[str, ...], purchase: str, min_size: int, max_size: int,
           region: str) -> dict[str, Any]:
    looked_up = {t: price_of(t, region) for t in instance_types}
    known = {t: p for t, (p, _, _) in looked_up.items() if p is not None}
    # Any type may launch, so the group is priced by its dearest one; a type without a price leaves it unpriced.
    priced_type = max(known, key=known.__getitem__) if known and len(known) == len(looked_up) else None
    shown = priced_type or next(t for t, (p, _, _) in looked_up.items() if p is None)
    hourly = known[priced_type] if priced_type else None
    _, prices_of, source = looked_up[shown]
    return {"role": role, "name": name, "instanceTypes": list(instance_types), "purchase": purchase,
            "minSize": min_size, "maxSize": max_size, "pricedType": shown, "hourly": hourly, "pricesOf": prices_of,
            "source": source,
            "atMin": None if hourly is None else round(hourly * min_size, 6),
            "atMax": None if hourly is None else round(hourly * max_size, 6)}


def purchase_option(group: GpuNodeGroupConfig) -> str:
    if group.reserved:
        return "reserved"
    return "spot" if group.capacity_type == "SPOT" else "on-demand"


def stack_cost(config: StackConfig) -> dict[str, Any]:
    """The cost document of one stack (what `cost.json` holds)."""
    import cluster_targets

    doc: dict[str, Any] = {"stack": config.stack, "region": config.region}
    if not cluster_targets.for_config(config).provisions_in_aws:
        return {**doc, "priced": False, "note": NOT_OWN_SERVERS}
    if config.region not in REGIONS:
        return {**doc, "priced": False, "note": f"not priced (no price data for {config.region})"}
    system = config.cluster.system_node_group
    groups = [_group("system", "system", system.instance_types, "on-demand", system.min_size, system.max_size,
                     config.region)]
    groups += [_group("gpu", name, group.instance_types, purchase_option(group),
                      group.min_size, group.max_size, config.region)
               for name, group in config.gpu_node_groups.items()]
    used = sorted({g["source"] for g in groups if g["source"] is not None})
    counted = [g for g in groups if g["purchase"] != "reserved" and g["hourly"] is not None]
    reserved = [g for g in groups if g["purchase"] == "reserved" and g["hourly"] is not None]
    return {
        **doc, "priced": True, "currency": ec2_prices.CURRENCY[partition(config.region)],
        "sources": {key: dict(zip(("repository", "commit", "file", "generatedAt"), ec2_prices.SOURCES[key],
                                  strict=True))
                    for key in used},
        "groups": groups,
        "atMin": round(sum(g["atMin"] for g in counted), 6), "atMax": round(sum(g["atMax"] for g in counted), 6),
        "spotAtMin": any(g["purchase"] == "spot" and g["atMin"] for g in counted),
        "spotAtMax": any(g["purchase"] == "spot" and g["atMax"] for g in counted),
        "reservedAtMin": round(sum(g["atMin"] for g in reserved), 6) if reserved else None,
        "reservedAtMax": round(sum(g["atMax"] for g in reserved), 6) if reserved else None,
        "unpriced": [g["name"] for g in groups if g["hourly"] is None],
    }


def write(doc: dict[str, Any], directory: Path) -> None:
    (directory / FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def read(directory: Path) -> dict[str, Any] | None:
    path = directory / FILE
    return json.loads(path.read_text()) if path.exists() else None


def money(amount: float, currency: str) -> str:
    """`$1,234.56` (USD) or `CNY 1,234.56`; 2 decimals, 4 for a price under $1 (so $0.1008 stays exact)."""
    digits = 4 if 0 < abs(amount) < 1 else 2
    text = f"{amount:,.{digits}f}"
    return f"${text}" if currency == "USD" else f"{currency} {text}"


def unit_price(amount: float, currency: str) -> str:
    """One node's price per hour as the table has it, to 4 decimals at most: `$21.9576/h`."""
    text = f"{amount:,.4f}".rstrip("0")
    text = text + "0" * (2 - len(text.split(".")[1]))
    return f"${text}/h" if currency == "USD" else f"{currency} {text}/h"


def _total(doc: dict[str, Any], at: str) -> str:
    bound = "≤ " if doc[f"spotAt{at}"] else ""
    return f"{bound}{money(doc[f'at{at}'], doc['currency'])}/h"


def _prices_of(group: dict[str, Any], doc: dict[str, Any]) -> str | None:
    """The Region whose price a group carries. A cost.json written before prices were looked up per instance type
    (a plan-diff base planned with older code) has one `pricesOf` for the whole stack."""
    return group["pricesOf"] if "pricesOf" in group else doc.get("pricesOf")


def _per_group(group: dict[str, Any], doc: dict[str, Any]) -> str:
    """`g6 0..2 × g6.2xlarge spot: ≤ on-demand $0.9776/h`; a price of another Region says so:
    `system 1..2 × m7i.large $0.1008/h, us-east-1 price (no us-west-2 data)`."""
    sizes = f"{group['name']} {group['minSize']}..{group['maxSize']} × {group['pricedType']}"
    region, prices_of = doc["region"], _prices_of(group, doc)
    if prices_of is None:
        return f"{sizes} no price data for {region}"
    stand_in = "" if prices_of == region else f" (no {region} data)"
    if group["hourly"] is None:
        return f"{sizes} no on-demand price in {prices_of}{stand_in}"
    price = unit_price(group["hourly"], doc["currency"])
    if stand_in:
        price += f", {prices_of} price{stand_in}"
    if group["purchase"] == "spot":
        return f"{sizes} spot: ≤ on-demand {price}"
    if group["purchase"] == "reserved":
        return f"{sizes} {RESERVED}, on-demand {price}"
    return f"{sizes} {price}"


def provenance(doc: dict[str, Any]) -> str:
    """Whose prices of when, per group: `on-demand prices: us-west-2 of 2026-01-21 (g6), us-east-1 of 2026-07-20
    (system; no us-west-2 data)`; the group names are left out when one Region and date price every group."""
    if "sources" not in doc:  # a cost.json of older code: one Region and source for the stack
        line = f"{doc['pricesOf']} on-demand prices of {doc['source']['generatedAt'][:10]}"
        return line if doc["pricesOf"] == doc["region"] else f"{line} (no {doc['region']} data)"
    clauses: dict[tuple[str, str], list[str]] = {}
    for group in doc["groups"]:
        if group["source"] is not None:
            date = doc["sources"][group["source"]]["generatedAt"][:10]
            clauses.setdefault((group["pricesOf"], date), []).append(group["name"])
    if not clauses:
        return f"no price data for {doc['region']}"
    parts = []
    for (region, date), names in clauses.items():
        notes = [] if len(clauses) == 1 else [", ".join(names)]
        if region != doc["region"]:
            notes.append(f"no {doc['region']} data")
        parts.append(f"{region} of {date}" + (f" ({'; '.join(notes)})" if notes else ""))
    return "on-demand prices: " + ", ".join(parts)


def summary(doc: dict[str, Any]) -> list[str]:
    """Two lines for a terminal: the totals (and where the prices come from), then each group."""
    if not doc["priced"]:
        return [f"cost: {doc['note']}"]
    line = f"cost: {_total(doc, 'Min')} at min, {_total(doc, 'Max')} at max"
    if doc["spotAtMin"] or doc["spotAtMax"]:
        line += " (spot: at most on-demand)"
    if doc["reservedAtMax"] is not None:
        line += (f"; + {RESERVED}: on-demand {money(doc['reservedAtMin'], doc['currency'])}.."
                 f"{money(doc['reservedAtMax'], doc['currency'])}/h")
    if doc["unpriced"]:
        line += f"; without {', '.join(doc['unpriced'])} (no price)"
    groups = " · ".join(_per_group(g, doc) for g in doc["groups"])
    return [f"{line}; {provenance(doc)}", f"node groups: {groups}"]


def delta(base: dict[str, Any] | None, head: dict[str, Any] | None) -> list[str]:
    """The cost change between two plans' cost documents, for plan-diff (None: that plan wrote none)."""
    if head is None:
        return []
    if base is None:
        return [f"{summary(head)[0]} (no {FILE} in the base plan)"]
    if not (base["priced"] and head["priced"]) or base["currency"] != head["currency"]:
        before = "; ".join(summary(base)[:1]).removeprefix("cost: ")
        after = "; ".join(summary(head)[:1]).removeprefix("cost: ")
        return [f"cost: {after}" if before == after else f"cost: {before} -> {after}"]
    currency = head["currency"]

    def change(at: str, key: str) -> str:
        old, new = base[key] or 0.0, head[key] or 0.0
        sign = "+" if new >= old else "-"
        bound_old = "≤ " if base.get(f"spotAt{at}") and key.startswith("at") else ""
        bound_new = "≤ " if head.get(f"spotAt{at}") and key.startswith("at") else ""
        return (f"at {at.lower()} {bound_old}{money(old, currency)} -> {bound_new}{money(new, currency)}/h "
                f"({sign}{money(abs(new - old), currency)})")

    lines = [f"cost: {change('Min', 'atMin')}, {change('Max', 'atMax')}; {provenance(head)}"]
    if (base["reservedAtMin"], base["reservedAtMax"]) != (head["reservedAtMin"], head["reservedAtMax"]):
        lines.append(f"  {RESERVED}, on-demand for reference: {change('Min', 'reservedAtMin')}, "
                     f"{change('Max', 'reservedAtMax')}")
    old_groups = {(g.get("role"), g["name"]): g for g in base["groups"]}
    for group in head["groups"]:
        old = old_groups.pop((group.get("role"), group["name"]), None)
        was, now = ("new" if old is None else _per_group(old, base)), _per_group(group, head)
        if was != now:  # a group is listed when what its line shows changed
            lines.append(f"  {was} -> {now}")
    lines.extend(f"  {_per_group(g, base)} -> removed" for g in old_groups.values())
    return lines


def bench_cap(config: StackConfig) -> list[str]:
    """An ephemeral stack's cap in money beside its node-hours: `maxGpuNodeHours` at its dearest GPU group's price,
    and what this stack can spend at most (every GPU group at maxSize for ttlHours, and its system group)."""
    lifecycle = config.lifecycle
    doc = stack_cost(config)
    if not doc["priced"]:
        return summary(doc)
    if lifecycle.ttl_hours is None:  # not a bench stack: no lifetime to price
        return []
    currency = doc["currency"]
    gpu = [g for g in doc["groups"] if g["role"] == "gpu"]
    node_hours = sum(g["maxSize"] for g in gpu) * lifecycle.ttl_hours
    spot = any(g["purchase"] == "spot" for g in gpu)
    bound = "spot: ≤ " if spot else "≤ "
    lines = []
    priced = [g for g in gpu if g["hourly"] is not None and g["purchase"] != "reserved"]
    if lifecycle.max_gpu_node_hours is not None and priced:
        dearest = max(priced, key=lambda g: g["hourly"])
        lines.append(f"cost cap: {lifecycle.max_gpu_node_hours:g} GPU node-hours, {bound}"
                     f"{money(lifecycle.max_gpu_node_hours * dearest['hourly'], currency)} at {dearest['pricedType']} "
                     f"on-demand {unit_price(dearest['hourly'], currency)}; {provenance(doc)}")
    spend = sum(g["hourly"] * g["maxSize"] for g in priced) * lifecycle.ttl_hours
    system = next(g for g in doc["groups"] if g["role"] == "system")
    line = (f"this stack at most: {node_hours:g} GPU node-hours (maxSize × {lifecycle.ttl_hours:g} h), {bound}"
            f"{money(spend, currency)}")
    if system["hourly"] is not None:
        line += f", + system group ≤ {money(system['atMax'] * lifecycle.ttl_hours, currency)}"
    reserved = [g["name"] for g in gpu if g["purchase"] == "reserved"]
    if reserved:
        line += f"; {', '.join(reserved)} {RESERVED}"
    unpriced = [g["name"] for g in gpu if g["hourly"] is None]
    if unpriced:
        line += f"; without {', '.join(unpriced)} (no price)"
    return lines + [line]
