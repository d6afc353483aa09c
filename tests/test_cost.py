"""Cost (issue 30): the price table's provenance and coverage, a stack's $/h at min and max size, its change in
plan-diff and a bench stack's cap in money. Every expected number is computed from `catalog/ec2_prices.py`: GPU
types priced per Region from the GPU price files, the system group's types from Karpenter's tables, and a type a
Region's data lacks priced, per type, with its partition's reference Region."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog import ec2_offerings, ec2_prices, fixed_prices
from catalog.aws_regions import AWS_REGIONS, REGIONS, partition
from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from stack_config import StackConfig
from stages.config import parse_stack_config
from tests.conftest import ROOT
from tools import bench_stack, gen_ec2_prices, price_sources
from verify import cost, plan_diff

CATALOG_TYPES = sorted(GPU_INSTANCE_TYPES) + sorted(CPU_INSTANCE_TYPES)
TABLE: dict[str, dict[str, float | None]] = {}
"""Region → instance type → price, every source's entries merged (the tests check no two sources share one)."""
for _regions in ec2_prices.ON_DEMAND_PRICES.values():
    for _region, _prices in _regions.items():
        TABLE.setdefault(_region, {}).update(_prices)
US_EAST_1, US_WEST_2, EU_CENTRAL_1 = TABLE["us-east-1"], TABLE["us-west-2"], TABLE["eu-central-1"]
GPU_FILES = ec2_prices.ON_DEMAND_PRICES[gen_ec2_prices.GPU_PRICES]
GPU_FILES_DATE = ec2_prices.SOURCES[gen_ec2_prices.GPU_PRICES][3]
KARPENTER_DATE = ec2_prices.SOURCES["karpenter-aws"][3][:10]
SECRETS = ("kubeconfig", "registryPassword", "swarmSecrets")
IMAGE = "registry.example/gtp-trainer@sha256:" + "ab" * 32
BENCH_CREATED = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
EKS_STANDARD = fixed_prices.EKS_CONTROL_PLANE["aws"]["STANDARD"]
REAP_CRON = yaml.safe_load((ROOT / ".github" / "workflows" / "reap.yml").read_text())[True]["schedule"][0]["cron"]
REAP_INTERVAL_HOURS = 24.0
"""reap.yml runs once a day (`test_the_reapers_interval_is_read_from_its_workflow` holds this to its cron)."""


def stack_raw(stack: str) -> dict[str, Any]:
    """A committed stack file's config (`gtp:` keys stripped), secrets as placeholders as the offline plan has them."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {key.split(":", 1)[1]: f"fake-{key}" if isinstance(value, dict) and set(value) == {"secure"} else value
            for key, value in document["config"].items()}


def bench_raw(ttl_hours: float = 6) -> dict[str, Any]:
    template = (ROOT / bench_stack.TEMPLATE).read_text()
    return {key.split(":", 1)[1]: value for key, value in yaml.safe_load(
        bench_stack.render(template, ttl_hours, IMAGE, BENCH_CREATED, "10.64.0.0/16"))["config"].items()}


def parse(raw: dict[str, Any], stack: str = "t") -> StackConfig:
    present = tuple(key for key in SECRETS if key in raw)
    return parse_stack_config(raw, project="gtp", stack=stack, secret_keys=present)


def edited(raw: dict[str, Any], **groups: dict[str, Any]) -> dict[str, Any]:
    """`raw` with GPU node groups' fields updated (`a100={"instanceTypes": [...]}`)."""
    raw = copy.deepcopy(raw)
    for name, fields in groups.items():
        raw["gpuNodeGroups"][name].update(fields)
    return raw


def committed_eks_stacks() -> dict[str, dict[str, Any]]:
    """Every stack the repository has (stacks/ and the bench template) whose nodes run in AWS."""
    stacks = {path.name.removeprefix("Pulumi.").removesuffix(".yaml"): path
              for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))}
    raws = {name: stack_raw(name) for name in stacks}
    raws["bench-template"] = bench_raw()
    return {name: raw for name, raw in raws.items() if (raw.get("cluster") or {}).get("mode", "eks") == "eks"}


# --- the table ------------------------------------------------------------------------------------------------


def test_the_table_names_each_sources_repository_commit_files_and_date_and_the_command_that_made_it() -> None:
    assert set(ec2_prices.SOURCES) == set(ec2_prices.ON_DEMAND_PRICES) == {
        gen_ec2_prices.GPU_PRICES, *(gen_ec2_prices.karpenter_key(p) for p in price_sources.KARPENTER_FILES)}
    header = (ROOT / "catalog" / "ec2_prices.py").read_text().split('"""')[1]
    for key, (repository, commit, files, generated_at) in ec2_prices.SOURCES.items():
        assert re.fullmatch(r"[0-9a-f]{40}", commit)
        assert f"- {key}: {repository} @ {commit}, {files} (generated {generated_at}): " in header
        if key == gen_ec2_prices.GPU_PRICES:
            assert repository == "tsaol/aws-gpu" and re.fullmatch(r"\d{4}-\d\d-\d\d", generated_at)
            assert files == ", ".join(price_sources.price_file_names(GPU_INSTANCE_TYPES))
        else:
            assert repository == price_sources.KARPENTER_REPOSITORY
            assert files == price_sources.KARPENTER_FILES[key.removeprefix("karpenter-")]
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", generated_at)
    karpenter_commit = ec2_prices.SOURCES["karpenter-aws"][1]
    command = gen_ec2_prices.COMMAND.format(karpenter=karpenter_commit, gpu=ec2_prices.SOURCES["gpu-price-files"][1])
    assert f"GENERATED by `{command}` (tools/gen_ec2_prices.py)" in header
    assert ec2_prices.CURRENCY == {"aws": "USD", "aws-us-gov": "USD", "aws-cn": "CNY"}


def test_each_region_and_type_has_one_source_gpu_types_from_the_price_files_system_types_from_karpenter() -> None:
    owner: dict[tuple[str, str], str] = {}
    for key, regions in ec2_prices.ON_DEMAND_PRICES.items():
        for region, prices in regions.items():
            assert region in REGIONS, (key, region)
            for name, price in prices.items():
                assert (region, name) not in owner, (region, name, owner.get((region, name)), key)
                owner[region, name] = key
                assert price is None or (isinstance(price, float) and price > 0), (region, name, price)
    file_regions = set(GPU_FILES)
    assert len(file_regions) == 30 and not any(partition(region) == "aws-cn" for region in file_regions)
    for region in file_regions:  # every catalogued GPU type, with a price or an explicit None
        assert list(GPU_FILES[region]) == sorted(GPU_INSTANCE_TYPES), region
    for key, regions in ec2_prices.ON_DEMAND_PRICES.items():
        if key == gen_ec2_prices.GPU_PRICES:
            continue
        for region, prices in regions.items():  # Karpenter: the system types, and GPU types where the files are silent
            gpu = [] if region in file_regions else sorted(GPU_INSTANCE_TYPES)
            assert list(prices) == gpu + sorted(CPU_INSTANCE_TYPES), f"{region}: regenerate with tools.gen_ec2_prices"
    # Each partition's reference Region knows every catalogued type: the fallback always finds an answer.
    for name, reference in cost.REFERENCE_REGION.items():
        assert set(TABLE[reference]) == set(CATALOG_TYPES), name
        assert reference in AWS_REGIONS[name]


def test_the_gpu_prices_and_the_offerings_catalog_come_from_the_same_price_files() -> None:
    """catalog/ec2_offerings.py (where a type may run) and the GPU prices (what it costs there) read the same files at
    the same commit through one parser: a type is offered in a covered Region exactly where it has a price."""
    _, commit, files, generated_at = ec2_prices.SOURCES[gen_ec2_prices.GPU_PRICES]
    assert ((f"tsaol/aws-gpu {files} @{commit}", generated_at),) == ec2_offerings.SOURCES
    assert tuple(GPU_FILES) == ec2_offerings.KNOWN_REGIONS
    for name, offered in ec2_offerings.OFFERED_IN.items():
        assert offered == tuple(region for region, prices in GPU_FILES.items() if prices[name] is not None), name


def test_the_table_is_the_generators_output_for_its_numbers() -> None:
    """Not hand-edited: rendering the same numbers again gives the committed file byte for byte (a type added to a
    catalog without regenerating fails the test above)."""
    header = (ROOT / gen_ec2_prices.OUTPUT).read_text()
    command = re.search(r"^GENERATED by `(.*?)` \(tools/gen_ec2_prices.py\)", header, re.M).group(1)
    table = {key: gen_ec2_prices.Source(*ec2_prices.SOURCES[key], prices)
             for key, prices in ec2_prices.ON_DEMAND_PRICES.items()}
    assert gen_ec2_prices.render(command, table) == header


KARPENTER_GIT = Path(os.environ.get("GTP_KARPENTER_GIT", "/nonexistent"))
GPU_PRICES_GIT = Path(os.environ.get("GTP_GPU_PRICES_GIT", "/nonexistent"))
"""Git copies of the two sources (what a maintainer refreshing the table fetched); CI has none."""


def test_rerunning_the_documented_command_on_the_sources_gives_the_committed_module(tmp_path: Path) -> None:
    if not (KARPENTER_GIT.is_dir() and GPU_PRICES_GIT.is_dir()):
        print("\nno git copies of aws/karpenter-provider-aws and tsaol/aws-gpu "
              "(GTP_KARPENTER_GIT, GTP_GPU_PRICES_GIT): checked the committed data's render only")
        test_the_table_is_the_generators_output_for_its_numbers()
        return
    out = tmp_path / "ec2_prices.py"
    assert gen_ec2_prices.main(["--karpenter", str(KARPENTER_GIT), "--karpenter-commit",
                                ec2_prices.SOURCES["karpenter-aws"][1], "--gpu-prices", str(GPU_PRICES_GIT),
                                "--gpu-prices-commit", ec2_prices.SOURCES["gpu-price-files"][1],
                                "--output", str(out)]) == 0
    assert out.read_text() == (ROOT / gen_ec2_prices.OUTPUT).read_text()


PRICE_FILE = """\
// Last updated: 2026-01-21

var instanceData = [
  {"apiName": "g6.xlarge", "pricing": {"us-east-1": {"onDemand": 0.8048}, "eu-west-3": {"onDemand": 1.0},
                                       "us-east-1-bos-1": {"onDemand": 9.9}, "ap-south-1": {"reserved": 0.5}}},
  {"apiName": "zz9.large", "pricing": {"ap-south-1": {"onDemand": 1.0}}}
];
"""
KARPENTER_TABLE = ('package pricing\n\n// generated at 2026-07-20T13:44:30Z for us-east-1\n\n'
                   'var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{\n'
                   '\t// us-east-1\n\t"us-east-1": {\n\t\t// g6 family\n'
                   '\t\t"g6.xlarge": 0.805000, "g6.2xlarge": 0.977600,\n'
                   '\t\t"m7i.large": 0.100800,\n\t},\n\t"cn-north-1": {\n'
                   '\t\t"g6.xlarge": 7.5, "m7i.large": 1.0,\n\t},\n}\n')


def test_the_generator_takes_gpu_types_from_the_price_files_and_the_rest_from_karpenter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    monkeypatch.setattr(gen_ec2_prices, "GPU_INSTANCE_TYPES", {"g6.xlarge": None, "g6.2xlarge": None})
    monkeypatch.setattr(gen_ec2_prices, "CPU_INSTANCE_TYPES", {"m7i.large": SimpleNamespace()})
    table = gen_ec2_prices.sources({"aws": price_sources.parse_karpenter_table(KARPENTER_TABLE)}, "k" * 40,
                                   {"data/g6_instances.js": PRICE_FILE}, "f" * 40)
    module: dict[str, Any] = {}
    exec(compile(gen_ec2_prices.render("python -m tools.gen_ec2_prices ...", table), "ec2_prices.py", "exec"),
         module)
    assert module["SOURCES"] == {"gpu-price-files": ("tsaol/aws-gpu", "f" * 40, "data/g6_instances.js", "2026-01-21"),
                                 "karpenter-aws": ("aws/karpenter-provider-aws", "k" * 40,
                                                   price_sources.KARPENTER_FILES["aws"], "2026-07-20T13:44:30Z")}
    assert module["ON_DEMAND_PRICES"] == {
        # every Region any file prices (ap-south-1 through another type) is covered; no on-demand price: None
        "gpu-price-files": {"ap-south-1": {"g6.2xlarge": None, "g6.xlarge": None},
                            "eu-west-3": {"g6.2xlarge": None, "g6.xlarge": 1.0},
                            "us-east-1": {"g6.2xlarge": None, "g6.xlarge": 0.8048}},
        # us-east-1's GPU types come from the files (covered there); cn-north-1's from Karpenter (not covered)
        "karpenter-aws": {"us-east-1": {"m7i.large": 0.1008},
                          "cn-north-1": {"g6.2xlarge": None, "g6.xlarge": 7.5, "m7i.large": 1.0}},
    }


def test_the_generator_says_which_commit_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gen_ec2_prices.main(["--karpenter", str(tmp_path), "--karpenter-commit", "0" * 40, "--gpu-prices",
                                str(tmp_path), "--gpu-prices-commit", "0" * 40,
                                "--output", str(tmp_path / "x.py")]) == 2
    assert "no commit" in capsys.readouterr().err and not (tmp_path / "x.py").exists()


def expected_price(instance_type: str, region: str) -> tuple[float | None, str | None]:
    """(price, the Region whose price it is) by the rule, from the merged table: the Region's own entry (a price or
    None) when its data has the type, else its partition's reference Region's entry."""
    if instance_type in TABLE.get(region, {}):
        return TABLE[region][instance_type], region
    if region not in REGIONS:
        return None, None
    reference = cost.REFERENCE_REGION[partition(region)]
    return TABLE[reference][instance_type], reference


@pytest.mark.parametrize("region", [*REGIONS, "mars-north-1"])
def test_every_type_in_every_region_is_priced_by_its_own_region_when_known_else_its_partitions_reference(
        region: str) -> None:
    for instance_type in CATALOG_TYPES:
        price, prices_of, source = cost.price_of(instance_type, region)
        assert (price, prices_of) == expected_price(instance_type, region), instance_type
        if prices_of is not None:
            assert instance_type in ec2_prices.ON_DEMAND_PRICES[source][prices_of]
        if region in GPU_FILES and instance_type in GPU_INSTANCE_TYPES:  # the Region's own GPU price, never another's
            assert (prices_of, source) == (region, gen_ec2_prices.GPU_PRICES), instance_type


def test_every_region_a_committed_stack_runs_in_prices_every_catalog_type_or_says_none() -> None:
    stacks = committed_eks_stacks()
    assert {"dev", "prod", "bench-template"} <= set(stacks)
    for name, raw in stacks.items():
        config = parse(raw, name)
        for instance_type in CATALOG_TYPES:
            assert cost.price_of(instance_type, config.region)[1] is not None, (name, instance_type)
        # ...and every type the stack itself runs has a price.
        doc = cost.stack_cost(config)
        assert doc["priced"] and doc["unpriced"] == [], (name, doc)


# --- a stack's cost -----------------------------------------------------------------------------------------


def test_dev_in_us_west_2_its_gpu_group_at_us_west_2s_price_its_system_group_at_us_east_1s() -> None:
    doc = cost.stack_cost(parse(stack_raw("dev"), "dev"))
    assert "m7i.large" not in US_WEST_2 and "g6.2xlarge" in US_WEST_2  # no us-west-2 price of the system type
    system, gpu = US_EAST_1["m7i.large"], max(US_WEST_2["g6.xlarge"], US_WEST_2["g6.2xlarge"])
    assert doc["region"] == "us-west-2" and doc["currency"] == "USD"
    [system_group, g6] = doc["groups"]
    assert (system_group["pricesOf"], system_group["source"], system_group["hourly"]) == (
        "us-east-1", "karpenter-aws", system)
    assert (g6["pricesOf"], g6["source"], g6["hourly"]) == ("us-west-2", gen_ec2_prices.GPU_PRICES, gpu)
    assert set(doc["sources"]) == {"karpenter-aws", gen_ec2_prices.GPU_PRICES}
    assert doc["atMin"] == pytest.approx(1 * system)
    assert doc["atMax"] == pytest.approx(2 * system + 2 * gpu)
    assert (doc["spotAtMin"], doc["spotAtMax"]) == (False, True)  # the spot group scales to zero
    assert g6["purchase"] == "spot" and g6["pricedType"] == "g6.2xlarge"
    first, groups, *_ = cost.summary(doc)
    fixed = EKS_STANDARD.hourly  # dev's NAT gateway, EFS and Prometheus volume have no cited us-west-2 rate
    assert first.startswith(f"cost: {cost.money(system + fixed, 'USD')}/h at min, "
                            f"≤ {cost.money(2 * system + 2 * gpu + fixed, 'USD')}/h at max (nodes "
                            f"{cost.money(system, 'USD')}..{cost.money(2 * system + 2 * gpu, 'USD')}/h + fixed "
                            f"{cost.unit_price(fixed, 'USD')}) (spot: at most on-demand)")
    assert first.endswith(f"; on-demand prices: us-east-1 of {KARPENTER_DATE} (system; no us-west-2 data), "
                          f"us-west-2 of {GPU_FILES_DATE} (g6)")
    assert groups == (f"node groups: system 1..2 × m7i.large {cost.unit_price(system, 'USD')}, us-east-1 price "
                      f"(no us-west-2 data) · g6 0..2 × g6.2xlarge spot: ≤ on-demand {cost.unit_price(gpu, 'USD')}")


def test_dev_moved_to_eu_central_1_prices_its_gpus_with_eu_central_1s_own_prices() -> None:
    doc = cost.stack_cost(parse({**stack_raw("dev"), "region": "eu-central-1"}, "dev"))
    gpu = max(EU_CENTRAL_1["g6.xlarge"], EU_CENTRAL_1["g6.2xlarge"])
    assert gpu != max(US_EAST_1["g6.xlarge"], US_EAST_1["g6.2xlarge"])  # the Region's own price matters here
    system = US_EAST_1["m7i.large"]
    assert doc["atMax"] == pytest.approx(2 * system + 2 * gpu)
    first, groups, *_ = cost.summary(doc)
    assert first.endswith(f"us-east-1 of {KARPENTER_DATE} (system; no eu-central-1 data), "
                          f"eu-central-1 of {GPU_FILES_DATE} (g6)")
    assert f"g6 0..2 × g6.2xlarge spot: ≤ on-demand {cost.unit_price(gpu, 'USD')}" in groups


def test_a_reserved_group_is_billed_by_its_reservation_and_shown_at_on_demand_for_reference() -> None:
    doc = cost.stack_cost(parse(stack_raw("prod"), "prod"))
    system, p5, p4d = US_EAST_1["m7i.xlarge"], US_EAST_1["p5.48xlarge"], US_EAST_1["p4d.24xlarge"]
    assert {g["pricesOf"] for g in doc["groups"]} == {"us-east-1"}
    assert doc["atMin"] == pytest.approx(2 * system)  # h100's 2 reserved nodes are not in the total
    assert doc["atMax"] == pytest.approx(4 * system + 2 * p4d)
    assert (doc["reservedAtMin"], doc["reservedAtMax"]) == (pytest.approx(2 * p5), pytest.approx(4 * p5))
    first, groups, *_ = cost.summary(doc)
    assert f"+ reserved (billed by the reservation): on-demand {cost.money(2 * p5, 'USD')}.." in first
    # us-east-1's own prices throughout, from two sources of two dates
    assert first.endswith(f"; on-demand prices: us-east-1 of {KARPENTER_DATE} (system), "
                          f"us-east-1 of {GPU_FILES_DATE} (h100, a100)")
    assert f"h100 2..4 × p5.48xlarge reserved (billed by the reservation), on-demand {cost.unit_price(p5, 'USD')}" \
        in groups
    assert f"a100 0..2 × p4d.24xlarge {cost.unit_price(p4d, 'USD')}" in groups and "data)" not in groups
    # A Capacity Block is a reservation too.
    block = cost.stack_cost(parse(edited(stack_raw("prod"), a100={"capacityType": "CAPACITY_BLOCK",
                                                                  "capacityReservationId": "cr-0fedcba9876543210",
                                                                  "availabilityZone": "us-east-1a"}), "prod"))
    assert block["atMax"] == pytest.approx(4 * system)
    assert block["reservedAtMax"] == pytest.approx(4 * p5 + 2 * p4d)


@pytest.mark.parametrize("stack", ["edge", "edge-swarm"])
def test_a_cluster_on_your_own_servers_is_not_priced(stack: str) -> None:
    doc = cost.stack_cost(parse(stack_raw(stack), stack))
    assert doc == {"stack": stack, "region": doc["region"], "priced": False, "note": "not priced (your own servers)"}
    assert cost.summary(doc) == ["cost: not priced (your own servers)"]


def test_a_region_without_data_is_priced_by_its_partitions_reference_region_and_says_so() -> None:
    assert "cn-northwest-1" not in TABLE
    raw = edited({**stack_raw("dev"), "region": "cn-northwest-1"}, g6={"instanceTypes": ["g5.xlarge"]})
    raw["cluster"]["systemNodeGroup"]["instanceTypes"] = ["m6i.large"]
    doc = cost.stack_cost(parse(raw, "dev"))
    cn = TABLE["cn-north-1"]
    assert doc["currency"] == "CNY" and {g["pricesOf"] for g in doc["groups"]} == {"cn-north-1"}  # CNY stays CNY
    assert doc["atMin"] == pytest.approx(cn["m6i.large"])
    assert doc["atMax"] == pytest.approx(2 * cn["m6i.large"] + 2 * cn["g5.xlarge"])
    first, groups, *_ = cost.summary(doc)
    assert first.endswith("; on-demand prices: cn-north-1 of 2024-11-06 (no cn-northwest-1 data)")
    assert groups.count("cn-north-1 price (no cn-northwest-1 data)") == 2
    assert cost.money(1234.5, "CNY") == "CNY 1,234.50"


def test_a_type_not_sold_on_demand_in_the_region_leaves_its_group_unpriced_and_named() -> None:
    assert US_EAST_1["p5e.48xlarge"] is None
    # only as a Capacity Block: the config refuses it on demand where the Region doesn't sell it (offerings)
    block = {"instanceTypes": ["p5e.48xlarge"], "capacityType": "CAPACITY_BLOCK",
             "capacityReservationId": "cr-0123456789abcdef0", "availabilityZone": "us-east-1a"}
    doc = cost.stack_cost(parse(edited(stack_raw("prod"), a100=block), "prod"))
    assert doc["unpriced"] == ["a100"]
    assert doc["atMax"] == pytest.approx(4 * US_EAST_1["m7i.xlarge"])
    first, groups, *_ = cost.summary(doc)
    assert "; without a100 (no price)" in first
    assert "a100 0..2 × p5e.48xlarge no on-demand price in us-east-1" in groups


def test_known_not_sold_in_the_region_is_not_replaced_by_the_reference_regions_price() -> None:
    """None (the Region's data says: not on demand here) is an answer; only a type the data lacks falls back."""
    pairs = [(t, r) for r, prices in GPU_FILES.items() for t, p in prices.items()
             if p is None and US_EAST_1[t] is not None]
    assert ("g5.xlarge", "af-south-1") in pairs
    for instance_type, region in pairs:
        assert cost.price_of(instance_type, region) == (None, region, gen_ec2_prices.GPU_PRICES)
    group = cost._group("gpu", "l", ("g5.xlarge",), "on-demand", 0, 2, "af-south-1")
    assert group["hourly"] is None and group["pricesOf"] == "af-south-1"
    assert cost._per_group(group, {"region": "af-south-1", "currency": "USD"}) == \
        "l 0..2 × g5.xlarge no on-demand price in af-south-1"


# --- plan-diff ---------------------------------------------------------------------------------------------


def cost_lines(base: dict[str, Any] | None, head: dict[str, Any] | None) -> list[str]:
    """plan-diff's cost section for two plans with these cost documents (None: the plan wrote none)."""
    section = plan_diff.cost_section(plan_diff.PlanDiff({"resources": [], "cost": base},
                                                        {"stack": "prod", "resources": [], "cost": head}))
    return section.lines if section else []


def test_plan_diff_prints_the_price_change_of_p4d_to_p4de(tmp_path: Path) -> None:
    base = cost.stack_cost(parse(stack_raw("prod"), "prod"))
    head = cost.stack_cost(parse(edited(stack_raw("prod"), a100={"instanceTypes": ["p4de.24xlarge"]}), "prod"))
    for name, doc in (("base", base), ("head", head)):
        (tmp_path / name).mkdir()
        cost.write(doc, tmp_path / name)
    lines = cost_lines(cost.read(tmp_path / "base"), cost.read(tmp_path / "head"))
    step = 2 * (US_EAST_1["p4de.24xlarge"] - US_EAST_1["p4d.24xlarge"])
    assert lines[0].startswith(f"at min {cost.money(base['atMin'], 'USD')} -> {cost.money(base['atMin'], 'USD')}"
                               f"/h (+{cost.money(0, 'USD')}), at max {cost.money(base['atMax'], 'USD')} -> "
                               f"{cost.money(base['atMax'] + step, 'USD')}/h (+{cost.money(step, 'USD')})")
    assert lines[1:] == [f"a100 0..2 × p4d.24xlarge {cost.unit_price(US_EAST_1['p4d.24xlarge'], 'USD')} -> "
                         f"a100 0..2 × p4de.24xlarge {cost.unit_price(US_EAST_1['p4de.24xlarge'], 'USD')}"]


def test_plan_diff_cost_of_a_reservation_resize_a_new_group_and_a_base_without_cost_json(tmp_path: Path) -> None:
    base = cost.stack_cost(parse(stack_raw("prod"), "prod"))
    raw = edited(stack_raw("prod"), h100={"maxSize": 5})
    raw["gpuNodeGroups"]["l4"] = {"instanceTypes": ["g6.xlarge"], "capacityType": "SPOT", "maxSize": 3}
    head = cost.stack_cost(parse(raw, "prod"))
    lines = cost.delta(base, head)
    p5, g6 = US_EAST_1["p5.48xlarge"], US_EAST_1["g6.xlarge"]
    assert f"≤ {cost.money(base['atMax'] + 3 * g6, 'USD')}/h (+{cost.money(3 * g6, 'USD')})" in lines[0]
    assert lines[1] == (f"  reserved (billed by the reservation), on-demand for reference: at min "
                        f"{cost.money(2 * p5, 'USD')} -> {cost.money(2 * p5, 'USD')}/h (+$0.00), at max "
                        f"{cost.money(4 * p5, 'USD')} -> {cost.money(5 * p5, 'USD')}/h (+{cost.money(p5, 'USD')})")
    assert f"  new -> l4 0..3 × g6.xlarge spot: ≤ on-demand {cost.unit_price(g6, 'USD')}" in lines
    assert any(line.startswith("  h100 2..4 × p5.48xlarge") and "-> h100 2..5 ×" in line for line in lines)
    # Removing it again reads as a removal; a base planned before cost.json existed still shows the head's cost.
    assert cost.delta(head, base)[-1].startswith("  l4 0..3 × g6.xlarge") and cost.delta(head, base)[-1].endswith(
        "-> removed")
    (tmp_path / "head").mkdir()
    cost.write(head, tmp_path / "head")
    [line] = cost_lines(cost.read(tmp_path / "no-base"), cost.read(tmp_path / "head"))
    assert line == f"{cost.summary(head)[0].removeprefix('cost: ')} (no cost.json in the base plan)"


def test_plan_diff_against_a_base_planned_before_per_type_prices_lists_the_groups_whose_price_region_changed() -> None:
    """A plan-diff base is planned with the base's code: its cost.json may have one `pricesOf` and `source` for the
    whole stack (as verify/cost.py wrote it when every type of a Region was priced from one Region)."""
    head = cost.stack_cost(parse(stack_raw("dev"), "dev"))
    base = {key: value for key, value in copy.deepcopy(head).items() if key != "sources"}
    for group in base["groups"]:
        del group["pricesOf"], group["source"]
    base.update(pricesOf="us-east-1", source={"repository": "aws/karpenter-provider-aws", "commit": "6" * 40,
                                              "file": "pkg/providers/pricing/zz_generated.pricing_aws.go",
                                              "generatedAt": "2026-07-20T13:44:30Z"})
    g6 = cost.unit_price(max(US_WEST_2["g6.xlarge"], US_WEST_2["g6.2xlarge"]), "USD")
    first, *groups = cost.delta(base, head)
    assert first.endswith(cost.provenance(head))
    # the system group was and is priced with us-east-1's price: not listed; g6 now carries us-west-2's own
    assert groups == [f"  g6 0..2 × g6.2xlarge spot: ≤ on-demand {g6}, us-east-1 price (no us-west-2 data) -> "
                      f"g6 0..2 × g6.2xlarge spot: ≤ on-demand {g6}"]
    assert cost.provenance(base) == "us-east-1 on-demand prices of 2026-07-20 (no us-west-2 data)"


def test_plan_diff_cost_of_a_stack_on_your_own_servers_and_of_a_move_out_of_aws() -> None:
    edge = cost.stack_cost(parse(stack_raw("edge"), "edge"))
    dev = cost.stack_cost(parse(stack_raw("dev"), "dev"))
    assert cost.delta(edge, edge) == ["cost: not priced (your own servers)"]
    [line] = cost.delta(dev, edge)
    assert line.startswith(f"cost: {cost.money(dev['totalAtMin'], 'USD')}/h at min") and line.endswith(
        "-> not priced (your own servers)")


def test_plan_diff_cli_prints_the_cost_section(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    base = cost.stack_cost(parse(stack_raw("dev"), "dev"))
    head = cost.stack_cost(parse(edited(stack_raw("dev"), g6={"maxSize": 3}), "dev"))

    def fake_plan_tree(tree: Path, stack: str, out: Path) -> dict[str, Any]:
        (out / stack).mkdir(parents=True)
        cost.write(head if tree == plan_diff.ROOT else base, out / stack)
        return {"stack": stack, "resources": [], "outputs": {}, "cost": cost.read(out / stack)}

    monkeypatch.setattr(plan_diff, "plan_tree", fake_plan_tree)
    assert plan_diff.main(["--stack", "dev", "--base", "HEAD"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("stack dev: 0 to add")
    g6 = max(US_WEST_2["g6.xlarge"], US_WEST_2["g6.2xlarge"])
    assert out[1] == "cost:"
    assert out[2].startswith("    at min") and f"(+{cost.unit_price(g6, 'USD').removesuffix('/h')})" in out[2]


# --- fixed charges ---------------------------------------------------------------------------------------------


def golden_resources(stack: str) -> list[dict[str, Any]]:
    return json.loads((ROOT / "tests" / "golden" / stack / "resources.json").read_text())["resources"]


def test_prod_counts_the_eks_fee_and_three_nat_gateways_and_names_fsx_and_prometheus_as_not_counted() -> None:
    doc = cost.stack_cost(parse(stack_raw("prod"), "prod"))
    nat = fixed_prices.NAT_GATEWAY["us-east-1"]
    fixed = EKS_STANDARD.amount + 3 * nat.amount
    assert [(item["item"], item["count"], item["hourly"]) for item in doc["fixed"]] == [
        ("eksControlPlane", 1, pytest.approx(EKS_STANDARD.amount)), ("natGateways", 3, pytest.approx(3 * nat.amount)),
        ("fsxLustre", 4800, None), ("prometheusVolume", doc["fixed"][3]["count"], None)]
    assert doc["fixedHourly"] == pytest.approx(fixed)
    assert (doc["totalAtMin"], doc["totalAtMax"]) == (pytest.approx(doc["atMin"] + fixed),
                                                      pytest.approx(doc["atMax"] + fixed))
    assert doc["atMin"] == pytest.approx(2 * US_EAST_1["m7i.xlarge"])  # the nodes' key keeps its meaning
    assert doc["fixed"][0]["source"] == EKS_STANDARD.source and doc["fixed"][1]["asOf"] == nat.as_of
    assert {"FSx for Lustre 4800 GiB PERSISTENT_2 250 MB/s/TiB", "data transfer", "CloudWatch logs", "ECR storage",
            "S3"} <= set(doc["notCounted"])
    first, _, fixed_line, not_counted = cost.summary(doc)
    assert first.startswith(f"cost: {cost.money(doc['atMin'] + fixed, 'USD')}/h at min, "
                            f"{cost.money(doc['atMax'] + fixed, 'USD')}/h at max (nodes "
                            f"{cost.money(doc['atMin'], 'USD')}..{cost.money(doc['atMax'], 'USD')}/h + fixed "
                            f"{cost.unit_price(fixed, 'USD')}); ")
    assert fixed_line == (f"fixed: {cost.unit_price(fixed, 'USD')}: EKS control plane (standard support) "
                          f"{cost.unit_price(EKS_STANDARD.amount, 'USD')} · 3 NAT gateways "
                          f"{cost.unit_price(3 * nat.amount, 'USD')} (3 × {cost.unit_price(nat.amount, 'USD')})")
    assert not_counted.startswith("not counted: FSx for Lustre 4800 GiB PERSISTENT_2 250 MB/s/TiB, Prometheus volume ")
    assert "(no cited rate for us-east-1); node root volumes, NAT gateway data processing, data transfer" in not_counted


def test_the_counted_nat_gateways_and_support_type_are_what_the_golden_plan_creates() -> None:
    """The cost's model of the network and the cluster, held to what the program registers (one oracle)."""
    doc = cost.stack_cost(parse(stack_raw("prod"), "prod"))
    resources = golden_resources("prod")
    nat_gateways = [r for r in resources if r["type"] == "aws:ec2/natGateway:NatGateway"]
    [cluster] = [r for r in resources if r["type"] == "aws:eks/cluster:Cluster"]
    assert next(i["count"] for i in doc["fixed"] if i["item"] == "natGateways") == len(nat_gateways)
    support_type = cluster["inputs"]["upgradePolicy"]["supportType"]
    assert doc["fixed"][0]["what"] == f"EKS control plane ({support_type.lower()} support)"


def test_nat_gateways_follow_network_nat_gateways_and_an_adopted_vpc_has_none_of_ours() -> None:
    raw = stack_raw("prod")
    single = cost.stack_cost(parse({**raw, "network": {**raw["network"], "natGateways": "single"}}, "prod"))
    four = cost.stack_cost(parse({**raw, "network": {**raw["network"], "numAvailabilityZones": 4}}, "prod"))
    in_vpc = {**raw["cluster"], "deployer": {"access": "in-vpc", "runnerLabels": ["self-hosted"],
                                             "cidrs": ["192.0.2.0/24"]}}
    adopted = cost.stack_cost(parse({**raw, "cluster": in_vpc, "network": {
        "existingVpcId": "vpc-0123456789abcdef0",
        "existingPrivateSubnetIds": ["subnet-0a1b2c3d", "subnet-0b1c2d3e"]}}, "prod"))
    rate = fixed_prices.NAT_GATEWAY["us-east-1"].amount

    def nat(doc: dict[str, Any]) -> tuple[int, float] | None:
        return next(((i["count"], i["hourly"]) for i in doc["fixed"] if i["item"] == "natGateways"), None)

    assert nat(single) == (1, pytest.approx(rate)) and nat(four) == (4, pytest.approx(4 * rate))
    assert nat(adopted) is None
    # plan-diff says what the fixed charges did
    assert cost.delta(single, cost.stack_cost(parse(raw, "prod")))[-1].startswith(
        f"  fixed charges: {cost.unit_price(EKS_STANDARD.amount + rate, 'USD')} -> "
        f"{cost.unit_price(EKS_STANDARD.amount + 3 * rate, 'USD')}: EKS control plane")


def test_extended_support_is_priced_at_its_own_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    from components import eks_cluster

    monkeypatch.setattr(eks_cluster, "SUPPORT_TYPE", "EXTENDED")
    doc = cost.stack_cost(parse(stack_raw("prod"), "prod"))
    extended = fixed_prices.EKS_CONTROL_PLANE["aws"]["EXTENDED"]
    assert (doc["fixed"][0]["what"], doc["fixed"][0]["hourly"]) == ("EKS control plane (extended support)",
                                                                    pytest.approx(extended.amount))


def test_efs_is_counted_per_gb_month_where_a_rate_is_cited_and_named_where_none_is() -> None:
    raw = {**stack_raw("prod"), "storage": {"kind": "efs", "sizeGib": 100}}
    rate = fixed_prices.EFS_STANDARD["us-east-1"]
    [efs] = [i for i in cost.stack_cost(parse(raw, "prod"))["fixed"] if i["item"] == "efs"]
    assert (efs["hourly"], efs["unit"]) == (pytest.approx(100 * rate.amount / fixed_prices.HOURS_PER_MONTH, abs=1e-6),
                                          "GB-month")
    dev = cost.stack_cost(parse(stack_raw("dev"), "dev"))  # EFS in us-west-2: no cited rate
    assert {"item": "efs", "what": "EFS 100 GiB (billed by use)", "count": 100, "hourly": None,
            "note": "not counted (no cited rate for us-west-2)"} in dev["fixed"]


def test_every_cited_rate_names_its_page_and_date() -> None:
    rates = [*fixed_prices.NAT_GATEWAY.values(), *fixed_prices.EFS_STANDARD.values(),
             *fixed_prices.FSX_LUSTRE.values(), *fixed_prices.EBS_GP3.values(),
             *(rate for types in fixed_prices.EKS_CONTROL_PLANE.values() for rate in types.values())]
    for rate in rates:
        assert rate.source.startswith("https://") and rate.as_of and rate.unit in ("hour", "GB-month")


# --- the reaper's schedule ------------------------------------------------------------------------------------


def test_the_reapers_interval_is_read_from_its_workflow() -> None:
    assert cost.reap_cron() == REAP_CRON
    assert cost.reap_interval_hours(REAP_CRON) == REAP_INTERVAL_HOURS


@pytest.mark.parametrize(("cron", "hours"), [("17 3 * * *", 24), ("0 */6 * * *", 6), ("30 1,5 * * *", 20),
                                             ("0,30 * * * *", 0.5), ("0 8-10 * * *", 22)])
def test_the_longest_wait_between_two_runs_of_a_daily_cron(cron: str, hours: float) -> None:
    assert cost.reap_interval_hours(cron) == hours


def test_a_cron_that_names_days_is_refused_rather_than_guessed() -> None:
    with pytest.raises(ValueError, match="only schedules that run every day are understood"):
        cost.reap_interval_hours("17 3 * * 1")


def test_a_bench_stack_expires_at_its_ttl_and_is_reaped_at_the_next_run() -> None:
    doc = cost.stack_cost(parse(bench_raw(ttl_hours=6), "bench-x"))
    assert doc["lifetime"] == {"ttlHours": 6, "reapCron": REAP_CRON, "reapIntervalHours": REAP_INTERVAL_HOURS,
                               "boundHours": 6 + REAP_INTERVAL_HOURS, "expiresAt": "2026-12-02T19:00:00Z",
                               "reapedBy": "2026-12-03T03:17:00Z"}
    assert cost.summary(doc)[-1].startswith("lifetime: expires 2026-12-02T19:00:00Z (6 h TTL)")
    assert cost.next_reap("17 3 * * *", datetime(2026, 12, 3, 3, 17, tzinfo=UTC)) == datetime(
        2026, 12, 3, 3, 17, tzinfo=UTC)
    assert cost.stack_cost(parse(stack_raw("prod"), "prod"))["lifetime"] is None


# --- the plan and the bench stack -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_plan_writes_cost_json_and_prints_its_lines(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from verify import plan as gtp_plan

    assert gtp_plan.plan_one("dev", out=tmp_path, quiet=True) == 0
    written = json.loads((tmp_path / "dev" / cost.FILE).read_text())
    assert written == cost.stack_cost(parse(stack_raw("dev"), "dev"))
    err = capsys.readouterr().err.splitlines()
    shown = ("plan: dev: cost: ", "plan: dev: node groups:", "plan: dev: fixed:", "plan: dev: not counted:")
    lines = [line for line in err if line.startswith(shown)]
    assert [line.removeprefix("plan: dev: ") for line in lines] == cost.summary(written)


def test_bench_cap_in_money_beside_node_hours() -> None:
    config = parse(bench_raw(ttl_hours=6), "bench-x")
    assert config.lifecycle.max_gpu_node_hours == 48
    assert config.region == "us-west-2"
    price, system = US_WEST_2["g6.12xlarge"], US_EAST_1["m7i.large"]
    cap, stack, not_counted, life = cost.bench_cap(config)
    assert cap == (f"cost cap: 48 GPU node-hours, spot: ≤ {cost.money(48 * price, 'USD')} at g6.12xlarge on-demand "
                   f"{cost.unit_price(price, 'USD')}; on-demand prices: us-east-1 of {KARPENTER_DATE} "
                   f"(system; no us-west-2 data), us-west-2 of {GPU_FILES_DATE} (bench)")
    # Until the reaper's first run after the TTL: 6 h + up to the cron's 24 h.
    hours = 6 + REAP_INTERVAL_HOURS
    assert stack == (f"this stack at most: {2 * hours:g} GPU node-hours (maxSize × {hours:g} h: 6 h TTL + up to "
                     f"{REAP_INTERVAL_HOURS:g} h until the reaper runs), spot: ≤ {cost.money(2 * hours * price, 'USD')}"
                     f", + system group ≤ {cost.money(2 * system * hours, 'USD')}, + fixed "
                     f"{cost.money(EKS_STANDARD.hourly * hours, 'USD')}")
    assert not_counted.startswith("not counted: NAT gateway, Prometheus volume 10 GiB gp3 (no cited rate for "
                                  "us-west-2)")
    assert life == (f'lifetime: expires 2026-12-02T19:00:00Z (6 h TTL); reaped at the first reap.yml run after it '
                    f'("{REAP_CRON}", every {REAP_INTERVAL_HOURS:g} h): 2026-12-03T03:17:00Z')


def test_bench_cap_of_an_on_demand_and_a_reserved_group() -> None:
    raw = bench_raw(ttl_hours=4)
    raw["gpuNodeGroups"]["bench"].update(capacityType="ON_DEMAND")
    raw["gpuNodeGroups"]["held"] = {"instanceTypes": ["g6.12xlarge"], "capacityReservationId": "cr-0fedcba9876543210",
                                    "availabilityZone": "us-west-2a", "maxSize": 1}
    cap, stack, *_ = cost.bench_cap(parse(raw, "bench-x"))
    price, hours = US_WEST_2["g6.12xlarge"], 4 + REAP_INTERVAL_HOURS
    assert price is not None
    assert cap.startswith(f"cost cap: 48 GPU node-hours, ≤ {cost.money(48 * price, 'USD')} at g6.12xlarge")
    assert stack.startswith(f"this stack at most: {3 * hours:g} GPU node-hours (maxSize × {hours:g} h: 4 h TTL + up "
                            f"to {REAP_INTERVAL_HOURS:g} h until the reaper runs), "
                            f"≤ {cost.money(2 * hours * price, 'USD')}")
    assert stack.endswith("; held reserved (billed by the reservation)")


def test_bench_stack_prints_its_cap_in_money(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture) -> None:
    shutil.copy2(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    monkeypatch.setattr(bench_stack, "ROOT", tmp_path)
    monkeypatch.setattr(bench_stack, "create", functools.partial(bench_stack.create, root=tmp_path))
    assert bench_stack.main(["--name", "sweep", "--ttl-hours", "6", "--image-ref", IMAGE]) == 0
    out = capsys.readouterr().out.splitlines()
    price = US_WEST_2["g6.12xlarge"]
    assert out[1].startswith(f"cost cap: 48 GPU node-hours, spot: ≤ {cost.money(48 * price, 'USD')}")
    assert out[2].startswith(f"this stack at most: {2 * (6 + REAP_INTERVAL_HOURS):g} GPU node-hours")


def test_docs_cost_examples_are_what_the_tools_print() -> None:
    section = (ROOT / "docs" / "cost.md").read_text().split("# Cost\n", 1)[1].split("\n## ", 1)[0]
    plan_block, diff_block, bench_block = re.findall(r"```\n(.*?)\n```", section, re.S)
    printed = [f"plan: {stack}: {line}" for stack in ("dev", "prod", "edge")
               for line in cost.summary(cost.stack_cost(parse(stack_raw(stack), stack)))]
    assert set(plan_block.splitlines()) <= set(printed)
    head = parse(edited(stack_raw("prod"), a100={"instanceTypes": ["p4de.24xlarge"]}), "prod")
    assert diff_block.splitlines() == cost.delta(cost.stack_cost(parse(stack_raw("prod"), "prod")),
                                                 cost.stack_cost(head))
    assert bench_block.splitlines() == cost.bench_cap(parse(bench_raw(ttl_hours=6), "bench-sweep"))
