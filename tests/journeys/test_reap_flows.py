"""The reaper on a fake `pulumi` CLI and moto: only stacks both ephemeral and named bench-*, never protected or
production ones, the TTL read without decrypting secrets, the orphan audit in each stack's own region."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
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
    assert decision.action == "problem"  # never destroyed, and never a silent success either
    assert decision.reason.startswith("expired at 2026-12-01T01:00:00Z, but its state has protected resources")


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
    states = {s.name: s for s in read_stack_states(workspace)}
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
    destroyed = [call for call in calls() if call[0] == "destroy"]
    assert destroyed == [["destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", "bench-a"]]
    assert logs.describe_log_groups()["logGroups"] == []  # found and deleted in the stack's region
    assert "dev: keep: ephemeral but not named bench-*" in out
    assert "prod: keep: production stack, never reaped" in out
    # The expired protected stack is not destroyed, and the run says so: exit 1 after handling the others.
    assert "bench-p: problem: expired at 2026-12-01T01:00:00Z, but its state has protected resources" in out
    assert code == 1, out
    assert out.splitlines()[-1].startswith("FAILED: bench-p (problem: expired at")


def _unknowns_script(script, **extra) -> None:
    """bench-a expired; bench-u its state unreadable; bench-c its config unreadable; bench-j its lifecycle not JSON;
    bench-e expired and empty; bench-x no stack file here (its last deployment's config says expired)."""
    history = json.dumps([{"version": 3, "kind": "update", "config": json.loads(_config(EXPIRED, "us-east-1"))}])
    script({
        "stack ls": {"stdout": json.dumps([{"name": n, "resourceCount": 9} for n in
                                           ("bench-a", "bench-c", "bench-e", "bench-j", "bench-u", "bench-x", "dev")])},
        "config bench-a": {"stdout": _config(EXPIRED, "eu-central-1")},
        "config bench-c": {"rc": 1, "stdout": ""},
        "config bench-e": {"stdout": _config(EXPIRED, "eu-central-1")},
        "config bench-j": {"stdout": json.dumps({"gtp:lifecycle": {"value": "{not json", "secret": False}})},
        "config bench-u": {"stdout": _config(EXPIRED, "eu-central-1")},
        "config bench-x": {"stdout": "{}"},
        "config dev": {"stdout": "{}"},
        "stack history bench-x": {"stdout": history},
        "stack export bench-a": {"stdout": _export(False)},
        "stack export bench-c": {"stdout": _export(False)},
        "stack export bench-e": {"stdout": json.dumps({"deployment": {"resources": []}})},
        "stack export bench-j": {"stdout": _export(False)},
        "stack export bench-u": {"rc": 1, "stdout": ""},
        "stack export bench-x": {"stdout": _export(False)},
        **extra,
    })


def test_a_dry_run_runs_only_read_only_commands_and_reports_every_unknown(fake_pulumi, tmp_path, capsys) -> None:  # noqa: F811
    script, calls = fake_pulumi
    _unknowns_script(script)
    code = reap_module.main(["--dry-run", "--cwd", str(tmp_path), "--now", "2026-12-02T13:00:00Z"])
    out = capsys.readouterr().out
    # Exactly what a dry run runs: every command reads. Before, bench-x's missing stack file was pulled with
    # `pulumi config refresh --force`, which writes it.
    expected = [["stack", "ls", "--json"]]
    for stack in ("bench-a", "bench-c", "bench-e", "bench-j", "bench-u", "bench-x", "dev"):
        expected.append(["config", "--json", "--stack", stack])
        if stack == "bench-x":
            expected.append(["stack", "history", "--json", "--page-size", "1", "--stack", stack])
        if stack.startswith("bench-"):  # a bench stack's state is read even when its config is not
            expected.append(["stack", "export", "--stack", stack])
    assert calls() == [[*command, "--non-interactive"] for command in expected]
    assert all(reap_module.is_read_only(call) for call in calls())
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bin", "calls.jsonl", "script.json"]
    # Every unknown is a problem with its own reason; what is known is still decided.
    assert "bench-a: would destroy: expired at 2026-12-01T01:00:00Z" in out
    assert "bench-x: would destroy: expired at 2026-12-01T01:00:00Z" in out
    assert "bench-e: would remove: expired at 2026-12-01T01:00:00Z, no resources left" in out
    assert "bench-u: problem: cannot read its state (RuntimeError: pulumi stack export --stack bench-u failed" in out
    assert "bench-c: problem: cannot read its config (RuntimeError: pulumi config --json --stack bench-c failed" in out
    assert "bench-j: problem: cannot read its config (ValueError: gtp:lifecycle is not valid JSON" in out
    assert "has protected resources" not in out and ": keep: has" not in out
    assert "7 stack(s): 2 to destroy, 1 empty to remove, 1 kept, 3 with problems (dry run" in out
    assert code == 1


def test_under_dry_run_the_workspace_refuses_every_writing_command(fake_pulumi, tmp_path) -> None:  # noqa: F811
    _script, calls = fake_pulumi
    workspace = CliWorkspace(str(tmp_path), dry_run=True)
    with pytest.raises(RuntimeError, match=r"refusing `pulumi config refresh --force --stack bench-x` under --dry-run"):
        workspace.write_config_file("bench-x")
    with pytest.raises(RuntimeError, match=r"refusing `pulumi stack rm --yes --preserve-config --stack bench-e`"):
        workspace.remove_stack("bench-e")
    assert calls() == []
    assert reap_module.command_words(["config", "refresh", "--force"]) == ("config", "refresh")
    assert not reap_module.is_read_only(["destroy", "--yes"]) and reap_module.is_read_only(["config", "--json"])


@mock_aws
def test_a_real_run_removes_the_empty_stack_and_writes_a_missing_stack_file_only_to_destroy(
        fake_pulumi, tmp_path, capsys) -> None:  # noqa: F811
    script, calls = fake_pulumi
    _unknowns_script(script)
    code = reap_module.main(["--cwd", str(tmp_path), "--now", "2026-12-02T13:00:00Z"])
    out = capsys.readouterr().out
    writes = [call for call in calls() if not reap_module.is_read_only(call)]
    assert writes == [
        ["destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", "bench-a"],
        ["stack", "rm", "--yes", "--preserve-config", "--stack", "bench-e", "--non-interactive"],
        ["config", "refresh", "--force", "--stack", "bench-x", "--non-interactive"],
        ["destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", "bench-x"],
    ]
    assert "bench-e: removed the empty stack" in out
    assert code == 1  # bench-c, bench-j, bench-u
    assert "FAILED: bench-c (problem: cannot read its config" in out
