"""The offline runner CLI `make plan` calls: output, exit codes, pack-config generation."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from policy_stack_builder import compliant_stack, facts, find

from policy.gtp_policy import POLICY_NAMES

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policy.gtp_policy.offline", *args], cwd=REPOSITORY_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def plan(tmp_path):
    def write(records, facts_data):
        resources = tmp_path / "resources.json"
        facts_file = tmp_path / "policy-facts.json"
        resources.write_text(json.dumps({"resources": records}))
        facts_file.write_text(json.dumps(facts_data))
        return str(resources), str(facts_file)
    return write


def test_cli_exits_0_on_compliant_plan(plan):
    resources, facts_file = plan(compliant_stack("prod"), facts("prod"))
    result = run_cli(resources, "--facts", facts_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "0 mandatory" in result.stderr


def test_cli_exits_1_and_prints_policy_resource_and_field(plan):
    records = compliant_stack("dev")
    find(records, "-gpu-lt")["inputs"]["metadataOptions"]["httpTokens"] = "optional"
    resources, facts_file = plan(records, facts("dev"))
    result = run_cli(resources, "--facts", facts_file)
    assert result.returncode == 1
    assert ("[mandatory] nodes-imdsv2: aws:ec2/launchTemplate:LaunchTemplate 'dev-gpu-lt' "
            "(urn:pulumi:dev::gtp::aws:ec2/launchTemplate:LaunchTemplate::dev-gpu-lt): "
            "metadataOptions.httpTokens = 'optional'") in result.stdout
    assert "1 mandatory" in result.stderr


def test_cli_exits_2_on_invalid_facts(plan):
    resources, facts_file = plan(compliant_stack("dev"), {"stack": "dev", "ephemeral": "no"})
    result = run_cli(resources, "--facts", facts_file)
    assert result.returncode == 2
    assert "ephemeral: expected true or false" in result.stderr


def test_cli_exits_2_on_missing_file(tmp_path):
    result = run_cli(str(tmp_path / "missing.json"), "--facts", str(tmp_path / "facts.json"))
    assert result.returncode == 2
    assert "missing.json" in result.stderr


def test_cli_writes_pack_config_for_every_policy(plan):
    _, facts_file = plan([], facts("bench"))
    result = run_cli("--pack-config", facts_file)
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    assert sorted(config) == sorted(POLICY_NAMES)
    assert config["ephemeral-ttl-tags"] == {**facts("bench")}
