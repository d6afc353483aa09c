"""Issue 14: stand-in values plan offline with a warning, and the real engine refuses them before registering."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

import stages.config
from stack_config import ConfigError
from stack_config.placeholders import find_placeholders
from tests.conftest import plan_modified, plan_stack
from verify import plan as gtp_plan


def test_the_committed_stacks_list_their_placeholders_by_key_path() -> None:
    paths = {s: [p.path for p in find_placeholders(plan_stack(s).config)] for s in ("dev", "prod")}
    assert paths["dev"] == ["cluster.publicAccessCidrs[0]", "cluster.deployer.runnerLabels[1]",
                            "cluster.deployer.cidrs[0]", "cluster.deployerRoleArn", "cluster.adminRoleArns[0]",
                            "cluster.previewRoleArns[0]"]
    assert paths["prod"] == ["cluster.deployer.runnerLabels[1]", "cluster.deployer.cidrs[0]",
                             "cluster.deployer.transitGatewayId", "cluster.deployerRoleArn", "cluster.adminRoleArns[0]",
                             "cluster.previewRoleArns[0]", "gpuNodeGroups.h100.capacityReservationId"]


@pytest.mark.program
def test_the_offline_plan_warns_and_still_plans(tmp_path: Path) -> None:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = gtp_plan.plan_one("dev", out=tmp_path, quiet=True)
    assert code == 0
    assert "warning: placeholder cluster.publicAccessCidrs[0]: '203.0.113.0/24' is a documentation range" in \
        stderr.getvalue()
    assert "`pulumi up` refuses to run until they are replaced" in stderr.getvalue()


def test_the_real_engine_refuses_before_registering_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)
    partial = gtp_plan.Plan(project="gtp", stack="prod")
    with pytest.raises(ConfigError) as caught:
        gtp_plan.run("prod", into=partial)
    assert partial.resources == []
    # Only what is the user's own (issue 41: the node monitoring agent's build and the EFA installer's digest were
    # refused too, with no way forward but editing the catalog).
    assert [p.path for p in caught.value.problems] == [
        "cluster.deployer.runnerLabels[1]", "cluster.deployer.cidrs[0]", "cluster.deployer.transitGatewayId",
        "cluster.deployerRoleArn", "cluster.adminRoleArns[0]", "cluster.previewRoleArns[0]",
        "gpuNodeGroups.h100.capacityReservationId"]
    assert all(p.message.startswith("placeholder — ") for p in caught.value.problems)


def test_the_offline_plan_knows_it_runs_under_mocks() -> None:
    assert plan_stack("dev").config is not None  # planned under mocks without refusal
    assert stages.config.under_mocks() is True


@pytest.mark.parametrize(("cidr", "documentation"), [
    ("203.0.113.0/24", True), ("192.0.2.128/25", True), ("198.51.100.7/32", True), ("2001:db8:1::/48", True),
    ("198.18.0.0/24", False),  # a benchmarking range (RFC 2544), not a documentation one
    ("10.0.0.0/8", False), ("not-a-cidr", False),
])
def test_documentation_ranges(cidr: str, documentation: bool) -> None:
    from stack_config.placeholders import _in_documentation_range
    assert _in_documentation_range(cidr) is documentation


def test_real_values_are_not_placeholders(tmp_path: Path) -> None:
    def real(config: dict[str, Any]) -> None:
        config["gtp:cluster"]["publicAccessCidrs"] = ["198.18.0.0/24"]
        config["gtp:cluster"]["adminRoleArns"] = ["arn:aws:iam::987654321098:role/platform-admins"]
        config["gtp:cluster"]["previewRoleArns"] = ["arn:aws:iam::987654321098:role/gtp-preview"]
        config["gtp:cluster"]["deployerRoleArn"] = "arn:aws:iam::987654321098:role/gtp-dev-deployer"
        config["gtp:cluster"]["deployer"] = {"access": "public-endpoint", "runnerLabels": ["self-hosted", "gtp-dev"],
                                             "cidrs": ["198.18.0.7/32"]}

    assert list(find_placeholders(plan_modified(tmp_path, "dev", real).config)) == []


@pytest.mark.parametrize(("field", "value", "placeholder"), [
    ("runnerLabels", ["self-hosted", "gtp-dev-example"], True),
    ("runnerLabels", ["self-hosted", "example"], True),
    ("runnerLabels", ["self-hosted", "gtp-dev"], False),
    ("runnerLabels", ["self-hosted", "counterexample-runner"], False),  # only a whole word 'example'
    ("transitGatewayId", "tgw-0123456789abcdef0", True),
    ("transitGatewayId", "tgw-1234567890abcdef0", True),
    ("transitGatewayId", "tgw-0a1b2c3d4e5f67890", False),
])
def test_deployer_placeholders(field: str, value: Any, placeholder: bool) -> None:
    from stages.config import parse_stack_config
    deployer = {"access": "transit-gateway", "runnerLabels": ["self-hosted", "gtp"], "transitGatewayId":
                "tgw-0a1b2c3d4e5f67890", "cidrs": ["10.250.0.0/24"], field: value}
    config = parse_stack_config({"cluster": {"mode": "eks", "deployer": deployer,
                                             "deployerRoleArn": "arn:aws:iam::987654321098:role/gtp-deployer"},
                                 "gpuNodeGroups": {"g": {"instanceTypes": ["g6.xlarge"]}},
                                 "workloads": {}}, stack="t")
    paths = [p.path for p in find_placeholders(config)]
    assert (any(path.startswith(f"cluster.deployer.{field}") for path in paths)) is placeholder, paths
