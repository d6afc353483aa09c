"""Offerings (class 3 of issue 29): an instance type not offered in the stack's Region is refused at its key path.

The catalog (catalog/ec2_offerings.py) covers every catalogued type; every committed EKS stack passes; each
committed EKS stack moved to every known Region that lacks one of its types is refused at exactly that type's key
path, before anything is registered (derived from the stacks and the catalog, not listed by hand); the refresh tool
parses, renders and handles missing credentials without the network.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog import ec2_offerings
from catalog.aws_regions import REGIONS
from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from stack_config import ConfigError
from stages.config import parse_stack_config
from tests.conftest import ROOT
from tools import offerings as tool
from tools import price_sources
from verify import plan as gtp_plan
from verify.plan import stack_config as read_stack

OFFERING_TEXT = "is not offered in region"


def committed_eks_stacks() -> list[str]:
    """Every committed stack file whose cluster is EKS (the default mode)."""
    found = []
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        config = yaml.safe_load(path.read_text())["config"]
        if (config.get("gtp:cluster") or {}).get("mode", "eks") == "eks":
            found.append(stack)
    return found


EKS_STACKS = committed_eks_stacks()


def raw_config(stack: str) -> tuple[str, dict[str, Any], list[str]]:
    """(project, the stack file's `gtp:` keys as YAML values, secret keys)."""
    project, _, secrets = read_stack(ROOT, stack)
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith("gtp:")}
    return project, raw, [secret.split(":", 1)[1] for secret in secrets]


def problems(stack: str, raw: dict[str, Any]) -> list[Any]:
    project, _, secrets = raw_config(stack)
    try:
        parse_stack_config(raw, project=project, stack=stack, secret_keys=secrets)
    except ConfigError as error:
        return list(error.problems)
    return []


def type_fields(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """(key path, instance type) of every instance type the offerings rule judges in a raw EKS config."""
    fields = []  # the system group's types are not in the catalog: never judged
    for group_name, group in (raw.get("gpuNodeGroups") or {}).items():
        if group.get("capacityType") == "CAPACITY_BLOCK":
            continue
        for index, name in enumerate(group.get("instanceTypes", [])):
            fields.append((f"gpuNodeGroups.{group_name}.instanceTypes[{index}]", name))
    return fields


def moved(raw: dict[str, Any], region: str) -> dict[str, Any]:
    """The config in another Region, with its groups' zones moved along (so only offerings can be wrong)."""
    raw = copy.deepcopy(raw)
    old = raw.get("region", "us-west-2")
    raw["region"] = region
    for group in (raw.get("gpuNodeGroups") or {}).values():
        if isinstance(group.get("availabilityZone"), str) and group["availabilityZone"].startswith(old):
            group["availabilityZone"] = region + group["availabilityZone"][len(old):]
    return raw


# ---- the catalog -------------------------------------------------------------------------------------------------

def test_every_catalogued_instance_type_has_an_offerings_entry_and_none_is_stale() -> None:
    # Fails when a type is added to catalog/gpu_instances.py without regenerating the offerings.
    assert set(ec2_offerings.OFFERED_IN) == set(GPU_INSTANCE_TYPES)
    assert not set(ec2_offerings.OFFERED_IN) & set(CPU_INSTANCE_TYPES)  # the system group's types: not judged
    assert set(ec2_offerings.OFFERED_IN) == set(tool.catalogued_types())


def test_the_catalog_is_cited_dated_and_its_regions_are_real() -> None:
    assert ec2_offerings.SOURCE and ec2_offerings.SOURCES
    assert all(len(as_of) == 10 and as_of[4] == "-" for _, as_of in ec2_offerings.SOURCES)
    assert max(as_of for _, as_of in ec2_offerings.SOURCES) == ec2_offerings.AS_OF
    assert set(ec2_offerings.KNOWN_REGIONS) <= set(REGIONS)
    for instance_type, regions in ec2_offerings.OFFERED_IN.items():
        assert set(regions) <= set(ec2_offerings.KNOWN_REGIONS), instance_type
        assert list(regions) == sorted(regions), instance_type
    # the committed stacks' own types are offered somewhere the catalog knows
    assert ec2_offerings.OFFERED_IN["p5.48xlarge"] and ec2_offerings.OFFERED_IN["g6.xlarge"]


# ---- the rule on the committed stacks ----------------------------------------------------------------------------

def test_there_are_committed_eks_stacks() -> None:
    assert {"dev", "prod"} <= set(EKS_STACKS)


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_every_committed_eks_stack_passes(stack: str) -> None:
    assert problems(stack, raw_config(stack)[1]) == []


def ec2_offerings_nearest(offered: tuple[str, ...], region: str) -> str:
    """The first Region the message should name: one of the same partition when there is one."""
    from catalog.aws_regions import partition

    same = [other for other in offered if partition(other) == partition(region)]
    return sorted(same, key=lambda other: (other.split("-")[0] != region.split("-")[0], other))[0] if same \
        else sorted(offered, key=lambda other: (other.split("-")[0] != region.split("-")[0], other))[0]


def _moves() -> list[tuple[str, str]]:
    """(stack, known Region) for every committed EKS stack and every Region the catalog knows."""
    return [(stack, region) for stack in EKS_STACKS for region in ec2_offerings.KNOWN_REGIONS]


@pytest.mark.parametrize(("stack", "region"), _moves())
def test_in_every_known_region_exactly_the_types_not_offered_there_are_refused(stack: str, region: str) -> None:
    """Covers every field: each system and GPU instance type of the stack is judged, and only those."""
    raw = moved(raw_config(stack)[1], region)
    expected = {path: name for path, name in type_fields(raw) if region not in ec2_offerings.OFFERED_IN[name]}
    found = {problem.path: problem.message for problem in problems(stack, raw) if OFFERING_TEXT in problem.message}
    assert set(found) == set(expected)
    for path, name in expected.items():
        assert f"{name!r} is not offered in region {region!r}" in found[path]
        offered = ec2_offerings.OFFERED_IN[name]
        if offered:
            assert "offered in " + ec2_offerings_nearest(offered, region) in found[path]
        else:
            assert "none of the" in found[path]


def _refusals() -> list[tuple[str, str, str, str]]:
    """(stack, GPU group, index, a known Region not offering that group's type there) — one per group and type."""
    cases = []
    for stack in EKS_STACKS:
        raw = raw_config(stack)[1]
        for group_name, group in raw.get("gpuNodeGroups", {}).items():
            if group.get("capacityType") == "CAPACITY_BLOCK":
                continue
            for index, name in enumerate(group["instanceTypes"]):
                lacking = [r for r in ec2_offerings.KNOWN_REGIONS if r not in ec2_offerings.OFFERED_IN[name]]
                if lacking:
                    cases.append((stack, group_name, str(index), lacking[0]))
    return cases


REFUSALS = _refusals()


def test_every_committed_gpu_group_has_a_known_region_that_lacks_its_type() -> None:
    groups = {(stack, group) for stack in EKS_STACKS for group in raw_config(stack)[1].get("gpuNodeGroups", {})}
    assert {(stack, group) for stack, group, _, _ in REFUSALS} == groups


@pytest.mark.parametrize(("stack", "group", "index", "region"), REFUSALS,
                         ids=[f"{s}-{g}[{i}]-{r}" for s, g, i, r in REFUSALS])
def test_a_committed_stack_moved_where_its_gpu_type_is_not_offered_is_refused_before_anything_registers(
        stack: str, group: str, index: str, region: str, tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    raw = moved({key.split(":", 1)[1]: value for key, value in document["config"].items()}, region)
    document["config"] = {f"gtp:{key}": value for key, value in raw.items()}
    stack_file = tmp_path / f"Pulumi.{stack}.yaml"
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    partial = gtp_plan.Plan(project="gtp", stack=stack)
    with pytest.raises(ConfigError) as caught:
        gtp_plan.run(stack, stack_file=stack_file, into=partial)
    assert partial.resources == []
    path = f"gpuNodeGroups.{group}.instanceTypes[{index}]"
    name = raw["gpuNodeGroups"][group]["instanceTypes"][int(index)]
    messages = [problem.message for problem in caught.value.problems if problem.path == path]
    assert messages and f"{name!r} is not offered in region {region!r}" in messages[0]


def test_a_gpu_type_swapped_for_one_the_region_lacks_is_refused() -> None:
    """For each committed stack in a known Region: each group's first type swapped for a catalogued GPU type of
    the same architecture that the Region doesn't offer."""
    swapped = 0
    for stack in EKS_STACKS:
        raw = raw_config(stack)[1]
        region = raw.get("region", "us-west-2")
        if region not in ec2_offerings.KNOWN_REGIONS:
            continue
        for group_name, group in raw.get("gpuNodeGroups", {}).items():
            architecture = GPU_INSTANCE_TYPES[group["instanceTypes"][0]].architecture
            lacking = [name for name, facts in GPU_INSTANCE_TYPES.items()
                       if facts.architecture == architecture and region not in ec2_offerings.OFFERED_IN[name]]
            if not lacking or group.get("capacityType") == "CAPACITY_BLOCK":
                continue
            changed = copy.deepcopy(raw)
            changed["gpuNodeGroups"][group_name]["instanceTypes"] = [lacking[0]]
            paths = [p.path for p in problems(stack, changed) if OFFERING_TEXT in p.message]
            assert paths == [f"gpuNodeGroups.{group_name}.instanceTypes[0]"], (stack, group_name, lacking[0])
            swapped += 1
    assert swapped >= 1


def test_a_region_the_catalog_does_not_know_is_not_judged() -> None:
    # us-west-2 is a real Region the committed data has no table for: even a type offered nowhere known passes.
    raw = moved(raw_config("prod")[1], "us-west-2")
    unknown = next(r for r in REGIONS if r not in ec2_offerings.KNOWN_REGIONS)
    raw = moved(raw, unknown)
    raw["gpuNodeGroups"]["a100"]["instanceTypes"] = ["p4d.24xlarge"]
    assert [p for p in problems("prod", raw) if OFFERING_TEXT in p.message] == []


def test_a_capacity_block_group_is_left_to_its_reservation() -> None:
    raw = moved(raw_config("prod")[1], "us-gov-east-1")
    raw["gpuNodeGroups"]["h100"]["capacityType"] = "CAPACITY_BLOCK"
    paths = [p.path for p in problems("prod", raw) if OFFERING_TEXT in p.message]
    assert "gpuNodeGroups.h100.instanceTypes[0]" not in paths
    assert "gpuNodeGroups.a100.instanceTypes[0]" in paths


def test_a_type_offered_nowhere_known_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = raw_config("prod")[1]
    lacking = [name for name, regions in ec2_offerings.OFFERED_IN.items()
               if not regions and name in GPU_INSTANCE_TYPES and GPU_INSTANCE_TYPES[name].architecture == "amd64"]
    if not lacking:  # the data has none today: make one (a catalogued type the catalog says nobody offers)
        lacking = ["p4d.24xlarge"]
        monkeypatch.setitem(ec2_offerings.OFFERED_IN, "p4d.24xlarge", ())
    raw["gpuNodeGroups"]["a100"]["instanceTypes"] = [lacking[0]]
    messages = [p.message for p in problems("prod", raw) if p.path == "gpuNodeGroups.a100.instanceTypes[0]"]
    assert messages and "none of the" in messages[0] and "choose another instance type" in messages[0]


# ---- the refresh tool --------------------------------------------------------------------------------------------

PRICE_FILE = """\
// Auto-generated from instances.vantage.sh data
// Last updated: 2026-01-21

var instanceData = [
  {"name": "p5.48xlarge", "apiName": "p5.48xlarge",
   "pricing": {"us-east-1": {"onDemand": 55.04}, "eu-north-1": {"onDemand": 60.1},
               "us-east-1-bos-1": {"onDemand": 70.0}, "ap-south-1": {}}},
  {"name": "zz9.large", "apiName": "zz9.large", "pricing": {"sa-east-1": {"onDemand": 1.0}}}
];
"""


def test_the_price_file_parser_reads_the_date_and_the_on_demand_price_of_each_region() -> None:
    as_of, types = price_sources.parse_price_file(PRICE_FILE)
    assert as_of == "2026-01-21"
    # a Local Zone is not a Region; a Region without an on-demand price is left out
    assert types == {"p5.48xlarge": {"us-east-1": 55.04, "eu-north-1": 60.1}, "zz9.large": {"sa-east-1": 1.0}}
    with pytest.raises(ValueError, match="Last updated"):
        price_sources.parse_price_file("var instanceData = [];\n")


def test_the_price_files_make_every_priced_region_known_and_keep_only_catalogued_types(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "p5_instances.js").write_text(PRICE_FILE)
    offerings = tool.from_prices([data / "p5_instances.js"], "owner/repo", "1" * 40, "python -m tools.offerings ...")
    module = _load(tool.render(offerings))
    # sa-east-1 is known through the uncatalogued type's price, so p5.48xlarge's absence there is a finding
    assert module["KNOWN_REGIONS"] == ("eu-north-1", "sa-east-1", "us-east-1")
    assert module["OFFERED_IN"]["p5.48xlarge"] == ("eu-north-1", "us-east-1")
    assert "zz9.large" not in module["OFFERED_IN"] and module["OFFERED_IN"]["g6.xlarge"] == ()
    assert module["AS_OF"] == "2026-01-21" and "owner/repo data/p5_instances.js @" + "1" * 40 in module["SOURCE"]

KARPENTER_TABLE = """\
package pricing

// generated at 2026-07-20T13:44:30Z for us-east-1

var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{
\t// us-east-1
\t"us-east-1": {
\t\t// g6 family
\t\t"g6.xlarge": 0.805000, "g6.2xlarge": 0.977600, "zz9.large": 0.1,
\t\t// m7i family
\t\t"m7i.large": 0.100800,
\t},
\t"eu-west-9": {
\t\t"p5.48xlarge": 55.04,
\t},
}
"""


def test_the_karpenter_parser_reads_regions_times_and_prices() -> None:
    generated_at, regions = price_sources.parse_karpenter_table(KARPENTER_TABLE)
    assert generated_at == "2026-07-20T13:44:30Z"
    assert regions == {"us-east-1": {"g6.xlarge": 0.805, "g6.2xlarge": 0.9776, "zz9.large": 0.1, "m7i.large": 0.1008},
                       "eu-west-9": {"p5.48xlarge": 55.04}}
    with pytest.raises(ValueError, match="generated at"):
        price_sources.parse_karpenter_table("package pricing\n")
    with pytest.raises(ValueError, match="no Region blocks"):
        price_sources.parse_karpenter_table("// generated at 2026-07-20T13:44:30Z for us-east-1\n")


def test_one_parser_per_source_format() -> None:
    """Both generators read a source through tools/price_sources.py; neither keeps a parser of its own."""
    from tools import gen_ec2_prices

    for module in (tool, gen_ec2_prices):
        text = Path(module.__file__).read_text()
        assert "json.loads" not in text and "re.compile" not in text, module.__name__
    assert tool.parse_karpenter_table is price_sources.parse_karpenter_table
    assert gen_ec2_prices.read_price_files is tool.read_price_files is price_sources.read_price_files


def _load(text: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(text, "ec2_offerings.py", "exec"), namespace)
    return namespace


def test_the_writer_renders_a_module_with_every_type_known_regions_and_sources(tmp_path: Path) -> None:
    table = tmp_path / "zz_generated.pricing_aws.go"
    table.write_text(KARPENTER_TABLE)
    offerings = tool.from_karpenter([table], "0" * 40, "python -m tools.offerings karpenter ...")
    out = tmp_path / "ec2_offerings.py"
    tool.write(offerings, out)
    module = _load(out.read_text())
    assert module["KNOWN_REGIONS"] == ("eu-west-9", "us-east-1")
    assert module["AS_OF"] == "2026-07-20"
    assert "zz_generated.pricing_aws.go @" + "0" * 40 in module["SOURCE"]
    assert set(module["OFFERED_IN"]) == set(tool.catalogued_types())  # not the uncatalogued zz9.large
    assert module["OFFERED_IN"]["g6.xlarge"] == ("us-east-1",)
    assert module["OFFERED_IN"]["p5.48xlarge"] == ("eu-west-9",)
    assert module["OFFERED_IN"]["p4d.24xlarge"] == ()
    assert "GENERATED by `python -m tools.offerings karpenter ...`" in out.read_text()


class FakeEc2:
    """A stand-in EC2 client: DescribeRegions and a paginated DescribeInstanceTypeOfferings, with its calls."""

    def __init__(self, offered: set[str], regions: list[str] | None = None) -> None:
        self.offered, self.regions, self.calls = offered, regions or [], []

    def describe_regions(self) -> dict[str, Any]:
        return {"Regions": [{"RegionName": region} for region in self.regions]}

    def describe_instance_type_offerings(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        assert kwargs["LocationType"] == "region"
        wanted = [name for name in kwargs["Filters"][0]["Values"] if name in self.offered]
        if "NextToken" not in kwargs and len(wanted) > 1:  # two pages: the tool must follow NextToken
            return {"InstanceTypeOfferings": [{"InstanceType": wanted[0]}], "NextToken": "more"}
        rest = wanted[1:] if "NextToken" in kwargs else wanted
        return {"InstanceTypeOfferings": [{"InstanceType": name} for name in rest]}


class FakeSession:
    def __init__(self, clients: dict[str, FakeEc2]) -> None:
        self.clients = clients

    def client(self, service: str, region_name: str) -> FakeEc2:
        assert service == "ec2"
        return self.clients[region_name]


def test_the_ec2_refresh_asks_every_enabled_region_with_filtered_paginated_calls() -> None:
    from datetime import date

    session = FakeSession({
        "us-east-1": FakeEc2({"g6.xlarge", "p5.48xlarge"}, regions=["us-east-1", "eu-west-1"]),
        "eu-west-1": FakeEc2({"g6.xlarge"}),
    })
    offerings = tool.from_ec2(session, "us-east-1", "python -m tools.offerings ec2", today=date(2026, 12, 4))
    assert offerings.by_region == {"us-east-1": {"g6.xlarge", "p5.48xlarge"},
                                   "eu-west-1": {"g6.xlarge"}}
    calls = session.clients["us-east-1"].calls
    assert all(len(call["Filters"][0]["Values"]) <= tool.FILTER_CHUNK for call in calls)
    asked = {name for call in calls if "NextToken" not in call for name in call["Filters"][0]["Values"]}
    assert asked == set(tool.catalogued_types())
    module = _load(tool.render(offerings))
    assert module["AS_OF"] == "2026-12-04"
    assert module["OFFERED_IN"]["g6.xlarge"] == ("eu-west-1", "us-east-1")
    assert module["OFFERED_IN"]["p5.48xlarge"] == ("us-east-1",)


def test_the_ec2_refresh_without_credentials_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A real boto3 session with every credential source empty and the instance metadata service off: botocore
    # raises NoCredentialsError before sending anything.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = tmp_path / "ec2_offerings.py"
    assert tool.main(["--out", str(out), "ec2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no usable AWS credentials" in err and "Traceback" not in err
    assert not out.exists()


def test_expired_credentials_are_the_no_credentials_case(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="AKIAEXAMPLE",
                          aws_secret_access_key="example")
    stubber = Stubber(client)
    stubber.add_client_error("describe_regions", service_error_code="AuthFailure",
                             service_message="AWS was not able to validate the provided access credentials")
    stubber.activate()

    class StubbedSession:
        def client(self, service: str, region_name: str) -> Any:
            return client

    monkeypatch.setattr(boto3, "Session", StubbedSession)
    assert tool.main(["--out", str(tmp_path / "x.py"), "ec2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "AuthFailure" in err and "Traceback" not in err


def test_check_mode_reports_a_stale_module(tmp_path: Path) -> None:
    table = tmp_path / "zz_generated.pricing_aws.go"
    table.write_text(KARPENTER_TABLE)
    out = tmp_path / "ec2_offerings.py"
    args = ["--out", str(out), "karpenter", "--commit", "0" * 40, str(table)]
    assert tool.main(["--check", *args]) == 1
    assert tool.main(args) == 0
    assert tool.main(["--check", *args]) == 0


def test_the_committed_catalog_is_the_generators_output_for_its_data() -> None:
    """Not hand-edited: rendering the committed data again (with the command its header names) gives the file."""
    text = (ROOT / "catalog" / "ec2_offerings.py").read_text()
    command = text.split("GENERATED by `", 1)[1].split("` (tools/offerings.py)", 1)[0]
    assert command.startswith("python -m tools.offerings prices --repository tsaol/aws-gpu --commit ")
    by_region = {region: frozenset(t for t, where in ec2_offerings.OFFERED_IN.items() if region in where)
                 for region in ec2_offerings.KNOWN_REGIONS}
    sources = tuple(tool.Source(description, as_of,
                                tuple(r for r, d in ec2_offerings.REGION_AS_OF.items() if d == as_of))
                    for description, as_of in ec2_offerings.SOURCES)
    assert tool.render(tool.Offerings(by_region, sources, command)) == text


PRICES_GIT = Path(os.environ.get("GTP_GPU_PRICES_GIT", "/nonexistent"))
"""A git copy of tsaol/aws-gpu (the `fetch` of a maintainer refreshing the catalog); CI has none."""


def test_rerunning_the_documented_command_on_the_price_files_gives_the_committed_catalog(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not PRICES_GIT.is_dir():
        print("\nno git copy of tsaol/aws-gpu (GTP_GPU_PRICES_GIT): checked the committed data's render only")
        test_the_committed_catalog_is_the_generators_output_for_its_data()
        return
    text = (ROOT / "catalog" / "ec2_offerings.py").read_text()
    command = text.split("GENERATED by `", 1)[1].split("`", 1)[0].split()
    commit = command[command.index("--commit") + 1]
    names = [word for word in command if word.startswith("data/")]
    assert names == price_sources.price_file_names(GPU_INSTANCE_TYPES)
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(price_sources.git_show(PRICES_GIT, commit, name))
    out = tmp_path / "ec2_offerings.py"
    args = command[command.index("prices"):]
    monkeypatch.chdir(tmp_path)  # the command names the files relative to a checkout of the repository
    assert tool.main(["--out", str(out), *args]) == 0
    assert out.read_text() == text
