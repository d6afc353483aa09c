"""The reaper on a fake `pulumi` CLI and moto: only stacks both ephemeral and named bench-*, never protected or
production ones, the TTL read without decrypting secrets, the orphan audit in each stack's own region."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
from moto import mock_aws

from tests.journeys.test_destroy_flows import fake_pulumi  # noqa: F401 - the fixture
from tools import reap as reap_module
from tools.reap import CliWorkspace, StackState, decide_one, read_stack_states

NOW = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
EXPIRED = {"ephemeral": True, "protect": False, "ttlHours": 1, "createdAt": "2026-12-01T00:00:00Z"}


def test_ephemeral_needs_the_bench_name_too() -> None:
    assert decide_one(StackState("bench-a", EXPIRED), NOW).action == "destroy"
    decision = decide_one(StackState("dev", EXPIRED), NOW)
    assert (decision.action, decision.reason) == ("keep", "ephemeral but not named bench-*, never reaped")


def test_production_and_protected_stacks_are_never_touched() -> None:
    for name in ("prod", "production", "prod-eu"):
        assert decide_one(StackState(name, EXPIRED), NOW).action == "keep"
    decision = decide_one(StackState("bench-a", EXPIRED, protected=True), NOW)
    assert (decision.action, decision.reason) == ("keep", "has protected resources in its state, never reaped")


def _config(lifecycle: dict, region: str) -> str:
    return json.dumps({"gtp:lifecycle": {"value": json.dumps(lifecycle), "secret": False, "objectValue": lifecycle},
                       "gtp:region": {"value": region, "secret": False},
                       "gtp:registryPassword": {"secret": True}})


def _export(protect: bool) -> str:
    return json.dumps({"deployment": {"resources": [
        {"urn": "urn:pulumi:s::gtp::aws:s3/bucket:Bucket::b", "type": "aws:s3/bucket:Bucket", "custom": True,
         "protect": protect}]}})


def _script(script) -> None:
    script({
        "stack ls": {"stdout": json.dumps([{"name": n, "resourceCount": 9}
                                           for n in ("bench-a", "bench-p", "dev", "prod")])},
        "config bench-a": {"stdout": _config(EXPIRED, "eu-central-1")},
        "config bench-p": {"stdout": _config(EXPIRED, "us-west-2")},
        "config dev": {"stdout": _config(EXPIRED, "us-west-2")},
        "config prod": {"stdout": _config({**EXPIRED, "protect": True}, "us-east-1")},
        "stack export bench-a": {"stdout": _export(False)},
        "stack export bench-p": {"stdout": _export(True)},
        "stack export dev": {"stdout": _export(False)},
        "stack export prod": {"stdout": _export(True)},
        "destroy": {"rc": 0},
    })


def test_the_cli_workspace_never_asks_for_secrets(fake_pulumi, tmp_path) -> None:  # noqa: F811
    script, calls = fake_pulumi
    _script(script)
    workspace = CliWorkspace(str(tmp_path))
    states = {s.name: s for s in read_stack_states(workspace, protected=workspace.protected)}
    assert states["bench-a"].lifecycle == EXPIRED and states["bench-a"].region == "eu-central-1"
    assert states["bench-p"].protected and not states["bench-a"].protected
    assert calls() and not any("--show-secrets" in call for call in calls())


@mock_aws
def test_reaps_only_the_expired_bench_stack_and_audits_its_region(fake_pulumi, tmp_path, capsys) -> None:  # noqa: F811
    script, calls = fake_pulumi
    _script(script)
    logs = boto3.client("logs", region_name="eu-central-1")
    logs.create_log_group(logGroupName="/aws/eks/gtp-bench-a/cluster")
    code = reap_module.main(["--cwd", str(tmp_path), "--now", "2026-12-02T13:00:00Z"])
    out = capsys.readouterr().out
    assert code == 0, out
    destroyed = [call for call in calls() if call[0] == "destroy"]
    assert destroyed == [["destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", "bench-a"]]
    assert logs.describe_log_groups()["logGroups"] == []  # found and deleted in the stack's region
    assert "bench-p: keep: has protected resources" in out and "dev: keep: ephemeral but not named bench-*" in out
    assert "prod: keep: production stack, never reaped" in out
