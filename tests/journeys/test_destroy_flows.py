"""tools.destroy end to end with a fake `pulumi` on PATH and AWS mocked by moto: confirmation, the wall-clock
limit and its report, the control-plane log group EKS leaves behind, and the stack's region."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tools import destroy as destroy_module
from tests.conftest import ROOT

HERE = Path(__file__).parent


@pytest.fixture
def fake_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "pulumi"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fake_pulumi.py'} \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PULUMI_DIR", str(tmp_path))
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", "eu-west-1")):
        monkeypatch.setenv(key, value)

    def script(answers: dict[str, Any]) -> None:
        (tmp_path / "script.json").write_text(json.dumps(answers))

    def calls() -> list[list[str]]:
        path = tmp_path / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    script({})
    return script, calls


EXPORT = json.dumps({"deployment": {"resources": [
    {"urn": "urn:pulumi:dev::gtp::pulumi:providers:aws::default", "type": "pulumi:providers:aws", "custom": True},
    {"urn": "urn:pulumi:dev::gtp::gtp:cluster:Network$aws:ec2/vpc:Vpc::network-vpc", "type": "aws:ec2/vpc:Vpc",
     "custom": True},
    {"urn": "urn:pulumi:dev::gtp::aws:s3/bucket:Bucket::results", "type": "aws:s3/bucket:Bucket", "custom": True},
]}})


def test_without_yes_it_previews_and_a_wrong_answer_deletes_nothing(fake_pulumi, monkeypatch, capsys) -> None:
    script, calls = fake_pulumi
    monkeypatch.setattr("builtins.input", lambda prompt: "prod")
    assert destroy_module.main(["dev", "--cwd", str(ROOT)]) == 1
    assert calls() == [["destroy", "--preview-only", "--non-interactive", "--stack", "dev"]]
    assert "not confirmed: nothing deleted" in capsys.readouterr().out


@mock_aws
def test_confirmed_destroy_deletes_the_log_group_eks_left_behind(fake_pulumi, monkeypatch, capsys) -> None:
    script, calls = fake_pulumi
    monkeypatch.setattr("builtins.input", lambda prompt: "dev")
    # dev's stack file says us-west-2: the group (and the audit) must be looked for there, not in eu-west-1
    logs = boto3.client("logs", region_name="us-west-2")
    logs.create_log_group(logGroupName="/aws/eks/gtp-dev/cluster")
    assert destroy_module.main(["dev", "--cwd", str(ROOT)]) == 0, capsys.readouterr().out
    assert [call[:2] for call in calls()] == [["destroy", "--preview-only"], ["destroy", "--yes"]]
    assert logs.describe_log_groups(logGroupNamePrefix="/aws/eks/gtp-dev")["logGroups"] == []
    out = capsys.readouterr().out
    assert "deleted log group /aws/eks/gtp-dev/cluster" in out and "no orphaned resources found" in out


def test_stack_region_comes_from_the_stack_file() -> None:
    assert destroy_module.stack_region("dev", str(ROOT)) == "us-west-2"
    assert destroy_module.stack_region("no-such-stack", str(ROOT)) is None


@mock_aws
def test_wall_clock_limit_stops_the_destroy_and_reports_what_remains(fake_pulumi, capsys) -> None:
    script, calls = fake_pulumi
    script({"destroy": {"sleep": 60, "rc": 0}, "stack export": {"stdout": EXPORT, "rc": 0}})
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="gtp-dev-results", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_bucket_tagging(Bucket="gtp-dev-results", Tagging={"TagSet": [{"Key": "gtp:stack", "Value": "dev"}]})
    s3.put_object(Bucket="gtp-dev-results", Key="bench/result.json", Body=b"{}")
    assert destroy_module.main(["dev", "--yes", "--cwd", str(ROOT), "--timeout-minutes", "0.03"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: wall-clock limit reached; pulumi destroy stopped" in out
    assert "2 resource(s) remain in the stack's state:\n    aws:ec2/vpc:Vpc  network-vpc\n" \
           "    aws:s3/bucket:Bucket  results" in out
    assert "arn:aws:s3:::gtp-dev-results" in out  # the non-empty bucket is reported, not silently kept
    assert ["stack", "export", "--stack", "dev"] in calls()  # never --show-secrets
    assert not any("--show-secrets" in call for call in calls())
