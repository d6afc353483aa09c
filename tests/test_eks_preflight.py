"""Issue 41 item 5 and its minors: what only the AWS account knows, asked at `preview`/`up` before anything is
registered (cluster_targets/eks_preflight.py). The judges run on planted answers as plain data; the whole program
runs with answers planted in the offline plan's fakes (verify/plan.py FAKE_INVOKES)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cluster_targets import eks_preflight as preflight
from stack_config import ConfigError, StackConfig
from stages.config import parse_stack_config
from tests.conftest import ROOT, plan_modified
from verify import plan as gtp_plan

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
OFFERINGS = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
INSTANCE_TYPE = "aws:ec2/getInstanceType:getInstanceType"
QUOTA = "aws:servicequotas/getServiceQuota:getServiceQuota"
TRANSIT_GATEWAY = "aws:ec2transitgateway/getTransitGateway:getTransitGateway"


def _prod(edit: Callable[[dict[str, Any]], None] = lambda raw: None) -> StackConfig:
    _, config, secrets = gtp_plan.stack_config(ROOT, "prod")
    raw = {k.split(":", 1)[1]: json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v
           for k, v in config.items() if k.startswith("gtp:")}
    raw = copy.deepcopy(raw)
    edit(raw)
    return parse_stack_config(raw, stack="prod", secret_keys=[s.split(":", 1)[1] for s in secrets])


def _facts(**changes: Any) -> preflight.AccountFacts:
    """prod's answers as the account would give them when all is well; `changes` plant others."""
    everywhere = frozenset(ZONES)
    answers: dict[str, Any] = {
        "region": "us-east-1", "network_zones": ZONES,
        "offered_in": {"p5.48xlarge": everywhere, "p4d.24xlarge": everywhere},
        "instance_types": {"p5.48xlarge": preflight.InstanceTypeAnswer(True, 32),
                           "p4d.24xlarge": preflight.InstanceTypeAnswer(True, 4)},
        "quotas": {"L-417A185B": 4096.0},
        "transit_gateway": ("tgw-0123456789abcdef0", "available"),
    }
    answers.update(changes)
    return preflight.AccountFacts(**answers)


def test_prod_passes() -> None:
    assert preflight.judge(_prod(), _facts()) == []


def test_a_zone_that_does_not_offer_the_groups_type_is_refused_naming_the_zones_that_do() -> None:
    # Before: a single-zone group got the first subnet by zone name, whatever EC2 offers there, and a named zone
    # (a reservation's) was never checked.
    facts = _facts(offered_in={"p5.48xlarge": frozenset(ZONES), "p4d.24xlarge": frozenset({"us-east-1c",
                                                                                          "us-east-1b"})})
    [problem] = preflight.judge(_prod(), facts)
    assert problem.path == "gpuNodeGroups.a100.availabilityZone"
    assert problem.message == (
        "'us-east-1a' does not offer p4d.24xlarge in this account (EC2 DescribeInstanceTypeOfferings over the "
        "stack's zones us-east-1a, us-east-1b, us-east-1c: p4d.24xlarge in us-east-1b, us-east-1c); allowed: a zone "
        "that offers every type of the group (us-east-1b, us-east-1c)")
    # ...and a reservation's zone too.
    facts = _facts(offered_in={"p5.48xlarge": frozenset({"us-east-1b"}), "p4d.24xlarge": frozenset(ZONES)})
    [problem] = preflight.judge(_prod(), facts)
    assert problem.path == "gpuNodeGroups.h100.availabilityZone" and "and the reservation's own zone" in problem.message


def test_no_zone_offering_every_type_of_a_single_zone_group_is_refused_with_the_offers() -> None:
    def two_types(raw: dict[str, Any]) -> None:
        raw["gpuNodeGroups"]["a100"]["instanceTypes"] = ["p4d.24xlarge", "p4de.24xlarge"]

    facts = _facts(offered_in={"p5.48xlarge": frozenset(ZONES), "p4d.24xlarge": frozenset({"us-east-1a"}),
                               "p4de.24xlarge": frozenset({"us-east-1b"})},
                   instance_types={**_facts().instance_types,
                                   "p4de.24xlarge": preflight.InstanceTypeAnswer(True, 4)})
    [problem] = preflight.judge(_prod(two_types), facts)
    assert problem.path == "gpuNodeGroups.a100.availabilityZone"
    assert ("p4d.24xlarge in us-east-1a; p4de.24xlarge in us-east-1b); allowed: a zone that offers every type of the "
            "group (none of these)") in problem.message


def test_a_single_zone_group_names_its_zone_in_the_stack_file() -> None:
    """The zone is the stack's choice: chosen by the program from today's offerings, it could be another at the
    next `up`, and a node group's subnets change only by replacing it (its running gang with it)."""
    def no_zone(raw: dict[str, Any]) -> None:
        del raw["gpuNodeGroups"]["a100"]["availabilityZone"]

    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.a100\.availabilityZone: is required: the group uses EFA "
                                          r"or a cluster placement group, which work within one zone; .*"
                                          r"Values=p4d\.24xlarge\); `preview` checks it"):
        _prod(no_zone)


def test_a_type_offered_in_no_zone_of_the_network_is_refused() -> None:
    def multi_zone(raw: dict[str, Any]) -> None:
        del raw["gpuNodeGroups"]["a100"]["availabilityZone"]
        raw["gpuNodeGroups"]["a100"]["efa"] = False
        raw["gpuNodeGroups"]["a100"]["placementGroup"] = False

    facts = _facts(offered_in={"p5.48xlarge": frozenset(ZONES)})
    [problem] = preflight.judge(_prod(multi_zone), facts)
    assert problem.path == "gpuNodeGroups.a100.instanceTypes[0]"
    assert "'p4d.24xlarge' is offered in none of the stack's zones" in problem.message


def test_a_vcpu_quota_below_the_groups_at_max_size_is_refused_with_the_need_and_the_code() -> None:
    [problem] = preflight.judge(_prod(), _facts(quotas={"L-417A185B": 512.0}))
    assert problem.path == "gpuNodeGroups.{h100,a100}.maxSize"
    assert problem.message == (
        "needs 960 vCPUs at maxSize (h100 4 × 192 (p5.48xlarge) + a100 2 × 96 (p4d.24xlarge)), but quota "
        "L-417A185B (Running On-Demand P instances) is 512 vCPUs in us-east-1: request an increase of quota code "
        "L-417A185B (service ec2) in Service Quotas, or lower maxSize")


def test_spot_and_on_demand_count_against_different_quotas() -> None:
    def spot(raw: dict[str, Any]) -> None:
        raw["gpuNodeGroups"]["a100"]["capacityType"] = "SPOT"

    assert preflight.quota_needs(_prod(spot)) == {"L-417A185B": [("h100", 4, "p5.48xlarge", 192)],
                                                  "L-7212CCBC": [("a100", 2, "p4d.24xlarge", 96)]}
    [problem] = preflight.judge(_prod(spot), _facts(quotas={"L-417A185B": 768.0, "L-7212CCBC": 64.0}))
    assert problem.path == "gpuNodeGroups.a100.maxSize"
    assert "quota L-7212CCBC (All P Spot Instance Requests) is 64 vCPUs" in problem.message


def test_a_quota_service_quotas_does_not_answer_is_refused_naming_the_code() -> None:
    facts = _facts(quotas={"L-417A185B": "AccessDeniedException: not authorized to perform GetServiceQuota"})
    [problem] = preflight.judge(_prod(), facts)
    assert "Service Quotas has no value for quota L-417A185B" in problem.message
    assert "servicequotas:GetServiceQuota" in problem.message


def test_the_catalogs_efa_count_disagreeing_with_ec2_is_refused_naming_the_catalog_row() -> None:
    facts = _facts(instance_types={"p5.48xlarge": preflight.InstanceTypeAnswer(True, 32),
                                   "p4d.24xlarge": preflight.InstanceTypeAnswer(False, 0)})
    [problem] = preflight.judge(_prod(), facts)
    assert problem.path == "gpuNodeGroups.a100.instanceTypes[0]"
    assert problem.message.startswith("'p4d.24xlarge': catalog/gpu_instances.py says 4 EFA interface(s), EC2 "
                                      "DescribeInstanceTypes in us-east-1 says efaSupported=false, "
                                      "maximumEfaInterfaces=0: correct the catalog's p4d.24xlarge row")


def test_a_type_the_catalog_says_lacks_efa_but_ec2_supports_is_refused_unless_efa_is_off() -> None:
    # The catalog said 0 for g6.12xlarge, which EC2 says has EFA (now corrected): a default group silently ran
    # without it. Planted here on g6.4xlarge, which the catalog says has none.
    def g6(raw: dict[str, Any]) -> None:
        raw["gpuNodeGroups"]["a100"]["instanceTypes"] = ["g6.4xlarge"]
        del raw["workloads"]["gpt-finetune"]  # sized for p4d

    facts = _facts(offered_in={"p5.48xlarge": frozenset(ZONES), "g6.4xlarge": frozenset(ZONES)},
                   instance_types={"p5.48xlarge": preflight.InstanceTypeAnswer(True, 32),
                                   "g6.4xlarge": preflight.InstanceTypeAnswer(True, 1)},
                   quotas={"L-417A185B": 4096.0, "L-DB2E81BA": 4096.0})
    [problem] = preflight.judge(_prod(g6), facts)
    assert "catalog/gpu_instances.py says 0 EFA interface(s)" in problem.message

    def g6_without_efa(raw: dict[str, Any]) -> None:
        g6(raw)
        raw["gpuNodeGroups"]["a100"]["efa"] = False

    assert preflight.judge(_prod(g6_without_efa), facts) == []


def test_a_transit_gateway_not_found_is_refused_naming_the_key() -> None:
    facts = _facts(transit_gateway=("tgw-0123456789abcdef0", "not found: no matching EC2 Transit Gateway found"))
    [problem] = preflight.judge(_prod(), facts)
    assert problem.path == "cluster.deployer.transitGatewayId"
    assert problem.message.startswith("'tgw-0123456789abcdef0' is not an available Transit Gateway in us-east-1 "
                                      "(EC2 DescribeTransitGateways: not found: no matching EC2 Transit Gateway "
                                      "found)")


# The whole program, answers planted in the offline plan's fakes.

def _plant(monkeypatch: pytest.MonkeyPatch, token: str, answer: Callable[[str, dict[str, Any]], Any]) -> None:
    monkeypatch.setitem(gtp_plan.FAKE_INVOKES, token, answer)


def _fails(reason: str) -> Callable[[str, dict[str, Any]], Any]:
    def answer(region: str, arguments: dict[str, Any]) -> Any:
        raise gtp_plan.FakeInvokeFailure(reason)
    return answer


def test_the_program_refuses_every_planted_problem_at_once_before_any_resource(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offerings = gtp_plan.FAKE_INVOKES[OFFERINGS]
    _plant(monkeypatch, OFFERINGS, lambda region, arguments: {
        **(answer := offerings(region, arguments)),
        **{key: [v for v, t in zip(answer[key], answer["instanceTypes"]) if t != "p4d.24xlarge"]
           for key in ("instanceTypes", "locations", "locationTypes")}})
    quota = gtp_plan.FAKE_INVOKES[QUOTA]
    _plant(monkeypatch, QUOTA, lambda region, arguments: {**quota(region, arguments), "value": 256.0})
    instance_type = gtp_plan.FAKE_INVOKES[INSTANCE_TYPE]
    _plant(monkeypatch, INSTANCE_TYPE, lambda region, arguments: {
        **instance_type(region, arguments),
        **({"efaMaximumInterfaces": 16} if arguments["instanceType"] == "p5.48xlarge" else {})})
    _plant(monkeypatch, TRANSIT_GATEWAY, _fails("no matching EC2 Transit Gateway found"))
    plan = gtp_plan.Plan(project="gtp", stack="prod")
    with pytest.raises(ConfigError) as refused:
        gtp_plan.run("prod", into=plan)
    paths = [problem.path for problem in refused.value.problems]
    assert paths == ["gpuNodeGroups.a100.availabilityZone", "gpuNodeGroups.{h100,a100}.maxSize",
                     "gpuNodeGroups.h100.instanceTypes[0]", "cluster.deployer.transitGatewayId"]
    message = str(refused.value)
    assert "preflight — 'us-east-1a' does not offer p4d.24xlarge in this account" in message
    assert "is 256 vCPUs in us-east-1" in message
    assert "EC2 DescribeInstanceTypes in us-east-1 says efaSupported=true, maximumEfaInterfaces=16" in message
    assert "not found: invoke of aws:ec2transitgateway/getTransitGateway:getTransitGateway failed" in message
    assert plan.resources == []  # refused before anything was registered


def test_a_transit_gateway_that_is_not_available_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def only_by_id(region: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments.get("filters"):  # the `state = available` filter matches nothing: it is pending or deleted
            raise gtp_plan.FakeInvokeFailure("no matching EC2 Transit Gateway found")
        return {"id": arguments["id"]}

    _plant(monkeypatch, TRANSIT_GATEWAY, only_by_id)
    with pytest.raises(ConfigError, match=r"cluster.deployer.transitGatewayId: preflight — 'tgw-0123456789abcdef0' "
                                          r"is not an available Transit Gateway in us-east-1 \(EC2 "
                                          r"DescribeTransitGateways: not available: "):
        gtp_plan.run("prod")


def test_the_efa_group_lands_in_its_zone_and_a_zone_without_its_type_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: its nodes got the first private subnet (us-east-1a) whether or not EC2 offers p4d there.
    a100 = next(r for r in gtp_plan.run("prod").by_type("aws:eks/nodeGroup:NodeGroup") if r.name == "a100-nodes")
    assert [urn.rsplit("::", 1)[1] for urn in a100.depends_on if "aws:ec2/subnet:Subnet" in urn] == [
        "network-private-us-east-1a"]
    offerings = gtp_plan.FAKE_INVOKES[OFFERINGS]

    def p4d_not_in_a(region: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = offerings(region, arguments)
        keep = [not (t == "p4d.24xlarge" and z == "us-east-1a")
                for t, z in zip(answer["instanceTypes"], answer["locations"])]
        return {**answer, **{key: [v for v, k in zip(answer[key], keep) if k]
                             for key in ("instanceTypes", "locations", "locationTypes")}}

    _plant(monkeypatch, OFFERINGS, p4d_not_in_a)
    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.a100\.availabilityZone: preflight — 'us-east-1a' does not "
                                          r"offer p4d\.24xlarge .* allowed: a zone that offers every type of the group "
                                          r"\(us-east-1b, us-east-1c\)"):
        plan_modified(tmp_path, "prod", lambda config: None)
