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
Besides the nodes, the fixed charges the plan sizes (`fixed_charges`, rates from `catalog/fixed_prices.py`): the EKS
control plane by its upgrade policy's support type, the NAT gateways, the shared file system and Prometheus' volume;
one without a cited rate is named "not counted", as is everything billed by use (`fixed_prices.NOT_COUNTED`).
An ephemeral stack lives until the first reaper run after its TTL: `lifetime` reads the reaper's cron.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from catalog import ec2_prices, fixed_prices
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
REAP_WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "reap.yml"
"""The nightly reaper (`tools.reap`): its schedule is when an expired stack is destroyed."""

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


def _charge(item: str, what: str, count: int, rate: fixed_prices.Rate | None, missing: str) -> dict[str, Any]:
    """One fixed line item: `count` × `rate` per hour, or not counted (`missing` says why)."""
    if rate is None:
        return {"item": item, "what": what, "count": count, "hourly": None, "note": f"not counted ({missing})"}
    return {"item": item, "what": what, "count": count, "hourly": round(count * rate.hourly, 6),
            "rate": rate.amount, "unit": rate.unit, "source": rate.source, "asOf": rate.as_of, "citation": rate.note}


def fixed_charges(config: StackConfig) -> list[dict[str, Any]]:
    """What an EKS stack is billed per hour whatever its nodes do, per line item, from the config the plan runs:
    the control plane (components/eks_cluster.py SUPPORT_TYPE), one NAT gateway per zone or a single one (created
    only in a VPC the stack creates, components/network.py), the file system `storage.kind` creates, and
    Prometheus' gp3 volume (stages/gpu.py `prometheus_volume`)."""
    from components.eks_cluster import SUPPORT_TYPE
    from stages.gpu import prometheus_volume

    region = config.region
    no_rate = f"no cited rate for {region}"
    eks = fixed_prices.EKS_CONTROL_PLANE.get(partition(region), {}).get(SUPPORT_TYPE)
    items = [_charge("eksControlPlane", f"EKS control plane ({SUPPORT_TYPE.lower()} support)", 1, eks,
                     f"no cited rate for {partition(region)}")]
    if config.network.existing_vpc_id is None:
        # A GPU group's zone outside the chosen ones adds a zone (components/network.py); it can't be known offline.
        count = 1 if config.network.nat_gateways == "single" else config.network.num_availability_zones
        items.append(_charge("natGateways", "NAT gateway" + ("s" if count > 1 else ""), count,
                             fixed_prices.NAT_GATEWAY.get(region), no_rate))
    storage = config.storage
    if storage.kind == "fsx-lustre":
        throughput = storage.fsx_throughput_per_unit if storage.fsx_deployment_type != "SCRATCH_2" else None
        shown = f" {throughput} MB/s/TiB" if throughput else ""
        items.append(_charge("fsxLustre", f"FSx for Lustre {storage.size_gib} GiB {storage.fsx_deployment_type}{shown}",
                             storage.size_gib,
                             fixed_prices.FSX_LUSTRE.get((region, storage.fsx_deployment_type, throughput)), no_rate))
    elif storage.kind == "efs":
        items.append(_charge("efs", f"EFS {storage.size_gib} GiB (billed by use)", storage.size_gib,
                             fixed_prices.EFS_STANDARD.get(region), no_rate))
    volume = prometheus_volume(config)
    if volume:
        items.append(_charge("prometheusVolume", f"Prometheus volume {volume} GiB gp3", volume,
                             fixed_prices.EBS_GP3.get(region), no_rate))
    return items


def reap_cron(workflow: Path = REAP_WORKFLOW) -> str:
    """The reaper's schedule, as its workflow has it (`on.schedule[0].cron`)."""
    document = yaml.safe_load(workflow.read_text())
    triggers = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on:` key as True
    return str(triggers["schedule"][0]["cron"])


def _cron_field(text: str, low: int, high: int) -> list[int]:
    values: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"(\*|\d+)(?:-(\d+))?(?:/(\d+))?", part)
        if match is None:
            raise ValueError(f"cron field {text!r}: only numbers, ranges, lists, * and steps are understood")
        start = low if match[1] == "*" else int(match[1])
        end = int(match[2]) if match[2] else (high if match[1] == "*" or match[3] else start)
        values.update(range(start, end + 1, int(match[3] or 1)))
    return sorted(values)


def daily_runs(cron: str) -> list[int]:
    """The minutes of the day (UTC, as GitHub schedules) a daily cron runs at; ValueError for one that names days
    (then the interval would depend on the date: say so rather than guess)."""
    minute, hour, *days = cron.split()
    if days != ["*", "*", "*"]:
        raise ValueError(f"reaper cron {cron!r}: only schedules that run every day are understood")
    return [h * 60 + m for h in _cron_field(hour, 0, 23) for m in _cron_field(minute, 0, 59)]


def reap_interval_hours(cron: str) -> float:
    """The longest wait between two reaper runs: how long an expired stack may live on."""
    runs = daily_runs(cron)
    gaps = [later - earlier for earlier, later in zip(runs, [*runs[1:], runs[0] + 24 * 60], strict=True)]
    return max(gaps) / 60


def next_reap(cron: str, after: datetime) -> datetime:
    """The first scheduled reaper run at or after `after` (GitHub may start a scheduled run late)."""
    day = after.replace(hour=0, minute=0, second=0, microsecond=0)
    return min(when for offset in (0, 1) for minute in daily_runs(cron)
               if (when := day + timedelta(days=offset, minutes=minute)) >= after)


def lifetime(config: StackConfig, cron: str | None = None) -> dict[str, Any] | None:
    """An ephemeral stack's expiry and when the reaper destroys it at the latest (None for a stack without a TTL):
    `boundHours`, the TTL plus the reaper's longest interval, is what a bench stack's spend is bounded by."""
    lifecycle = config.lifecycle
    if lifecycle.ttl_hours is None:
        return None
    cron = cron or reap_cron()
    expires = lifecycle.expires_at
    return {"ttlHours": lifecycle.ttl_hours, "reapCron": cron, "reapIntervalHours": reap_interval_hours(cron),
            "boundHours": lifecycle.ttl_hours + reap_interval_hours(cron),
            "expiresAt": None if expires is None else _timestamp(expires),
            "reapedBy": None if expires is None else _timestamp(next_reap(cron, expires))}


def _timestamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


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
    fixed = fixed_charges(config)
    fixed_hourly = round(sum(item["hourly"] for item in fixed if item["hourly"] is not None), 6)
    at_min, at_max = round(sum(g["atMin"] for g in counted), 6), round(sum(g["atMax"] for g in counted), 6)
    return {
        **doc, "priced": True, "currency": ec2_prices.CURRENCY[partition(config.region)],
        "sources": {key: dict(zip(("repository", "commit", "file", "generatedAt"), ec2_prices.SOURCES[key],
                                  strict=True))
                    for key in used},
        "groups": groups,
        "atMin": at_min, "atMax": at_max,  # the nodes alone, as plan-diff has always compared them
        "spotAtMin": any(g["purchase"] == "spot" and g["atMin"] for g in counted),
        "spotAtMax": any(g["purchase"] == "spot" and g["atMax"] for g in counted),
        "reservedAtMin": round(sum(g["atMin"] for g in reserved), 6) if reserved else None,
        "reservedAtMax": round(sum(g["atMax"] for g in reserved), 6) if reserved else None,
        "unpriced": [g["name"] for g in groups if g["hourly"] is None],
        "fixed": fixed, "fixedHourly": fixed_hourly,
        "totalAtMin": round(at_min + fixed_hourly, 6), "totalAtMax": round(at_max + fixed_hourly, 6),
        "notCounted": [item["what"] for item in fixed if item["hourly"] is None] + list(fixed_prices.NOT_COUNTED),
        "lifetime": lifetime(config),
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


def _total(doc: dict[str, Any], at: str, key: str = "at") -> str:
    bound = "≤ " if doc[f"spotAt{at}"] else ""
    return f"{bound}{money(doc[f'{key}{at}'], doc['currency'])}/h"


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


def _fixed_lines(doc: dict[str, Any]) -> list[str]:
    """`fixed: $0.235/h: EKS control plane (standard support) $0.10/h · 3 NAT gateways $0.135/h (3 × $0.045/h)` and
    `not counted: FSx for Lustre ... (no cited rate for us-east-1); node root volumes, data transfer, ...`."""
    if "fixed" not in doc:  # a cost.json of older code: nodes only
        return []
    currency = doc["currency"]
    counted = []
    for item in (item for item in doc["fixed"] if item["hourly"] is not None):
        text = f"{item['what']} {unit_price(item['hourly'], currency)}"
        if item["unit"] == "hour" and item["count"] > 1:
            text = f"{item['count']} {text} ({item['count']} × {unit_price(item['rate'], currency)})"
        elif item["unit"] != "hour":
            text += f" ({unit_price(item['rate'], currency).removesuffix('/h')}/{item['unit']})"
        counted.append(text)
    reasons: dict[str, list[str]] = {}
    for item in (item for item in doc["fixed"] if item["hourly"] is None):
        reasons.setdefault(item["note"].removeprefix("not counted (").removesuffix(")"), []).append(item["what"])
    missing = [f"{', '.join(whats)} ({reason})" for reason, whats in reasons.items()]
    general = [what for what in doc["notCounted"] if all(what != item["what"] for item in doc["fixed"])]
    lines = [f"fixed: {unit_price(doc['fixedHourly'], currency)}: {' · '.join(counted) or 'none counted'}"]
    return [*lines, f"not counted: {'; '.join([*missing, ', '.join(general)])}"]


def lifetime_line(life: dict[str, Any]) -> str:
    """`lifetime: expires 2026-12-02T19:00:00Z (6 h TTL); reaped at the first reap.yml run after it ("17 3 * * *",
    every 24 h): 2026-12-03T03:17:00Z`."""
    expires = f"expires {life['expiresAt']}" if life["expiresAt"] else "expires createdAt +"
    reaped = f": {life['reapedBy']}" if life["reapedBy"] else ""
    return (f"lifetime: {expires} ({life['ttlHours']:g} h TTL); reaped at the first {REAP_WORKFLOW.name} run after it "
            f"(\"{life['reapCron']}\", every {life['reapIntervalHours']:g} h){reaped}")


def summary(doc: dict[str, Any]) -> list[str]:
    """Lines for a terminal: the totals (nodes and fixed charges, and where the prices come from), each node group,
    the fixed charges, what is not counted and, for an ephemeral stack, when it expires and is reaped."""
    if not doc["priced"]:
        return [f"cost: {doc['note']}"]
    currency = doc["currency"]
    if "fixed" in doc:
        line = (f"cost: {_total(doc, 'Min', 'totalAt')} at min, {_total(doc, 'Max', 'totalAt')} at max (nodes "
                f"{money(doc['atMin'], currency)}..{money(doc['atMax'], currency)}/h + fixed "
                f"{unit_price(doc['fixedHourly'], currency)})")
    else:  # a cost.json of older code: nodes only
        line = f"cost: {_total(doc, 'Min')} at min, {_total(doc, 'Max')} at max"
    if doc["spotAtMin"] or doc["spotAtMax"]:
        line += " (spot: at most on-demand)"
    if doc["reservedAtMax"] is not None:
        line += (f"; + {RESERVED}: on-demand {money(doc['reservedAtMin'], currency)}.."
                 f"{money(doc['reservedAtMax'], currency)}/h")
    if doc["unpriced"]:
        line += f"; without {', '.join(doc['unpriced'])} (no price)"
    groups = " · ".join(_per_group(g, doc) for g in doc["groups"])
    life = [lifetime_line(doc["lifetime"])] if doc.get("lifetime") else []
    return [f"{line}; {provenance(doc)}", f"node groups: {groups}", *_fixed_lines(doc), *life]


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
    if "fixedHourly" in head and base.get("fixedHourly") != head["fixedHourly"]:
        was = "not in the base plan" if "fixedHourly" not in base else unit_price(base["fixedHourly"], currency)
        lines.append(f"  fixed charges: {was} -> {_fixed_lines(head)[0].removeprefix('fixed: ')}")
    return lines


def bench_cap(config: StackConfig) -> list[str]:
    """An ephemeral stack's cap in money beside its node-hours: `maxGpuNodeHours` at its dearest GPU group's price,
    and what this stack can spend at most: every GPU group at maxSize, its system group and its fixed charges until
    the reaper destroys it (the TTL plus up to the reaper's interval, `lifetime`)."""
    lifecycle = config.lifecycle
    doc = stack_cost(config)
    if not doc["priced"]:
        return summary(doc)
    life = doc["lifetime"]
    if life is None:  # not a bench stack: no lifetime to price
        return []
    hours = life["boundHours"]
    currency = doc["currency"]
    gpu = [g for g in doc["groups"] if g["role"] == "gpu"]
    node_hours = sum(g["maxSize"] for g in gpu) * hours
    spot = any(g["purchase"] == "spot" for g in gpu)
    bound = "spot: ≤ " if spot else "≤ "
    lines = []
    priced = [g for g in gpu if g["hourly"] is not None and g["purchase"] != "reserved"]
    if lifecycle.max_gpu_node_hours is not None and priced:
        dearest = max(priced, key=lambda g: g["hourly"])
        lines.append(f"cost cap: {lifecycle.max_gpu_node_hours:g} GPU node-hours, {bound}"
                     f"{money(lifecycle.max_gpu_node_hours * dearest['hourly'], currency)} at {dearest['pricedType']} "
                     f"on-demand {unit_price(dearest['hourly'], currency)}; {provenance(doc)}")
    spend = sum(g["hourly"] * g["maxSize"] for g in priced) * hours
    system = next(g for g in doc["groups"] if g["role"] == "system")
    line = (f"this stack at most: {node_hours:g} GPU node-hours (maxSize × {hours:g} h: {life['ttlHours']:g} h TTL "
            f"+ up to {life['reapIntervalHours']:g} h until the reaper runs), {bound}{money(spend, currency)}")
    if system["hourly"] is not None:
        line += f", + system group ≤ {money(system['atMax'] * hours, currency)}"
    line += f", + fixed {money(doc['fixedHourly'] * hours, currency)}"
    reserved = [g["name"] for g in gpu if g["purchase"] == "reserved"]
    if reserved:
        line += f"; {', '.join(reserved)} {RESERVED}"
    unpriced = [g["name"] for g in gpu if g["hourly"] is None]
    if unpriced:
        line += f"; without {', '.join(unpriced)} (no price)"
    return [*lines, line, *_fixed_lines(doc)[1:], lifetime_line(life)]
