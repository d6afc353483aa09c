"""Issue 14: CI runs each stack's jobs on the runner its config declares (`cluster.deployer.runnerLabels`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tools import deployer


def test_the_committed_stacks_and_the_bench_template_name_their_runners(capsys: pytest.CaptureFixture[str]) -> None:
    assert deployer.main(["dev", "prod", "--template", "bench"]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert json.loads(lines["dev"]) == ["self-hosted", "gtp-dev-example"]
    assert json.loads(lines["prod"]) == ["self-hosted", "gtp-prod-example"]
    assert json.loads(lines["bench"]) == ["self-hosted", "gtp-bench-example"]
    assert json.loads(lines["matrix"]) == {"include": [
        {"stack": "dev", "runs-on": ["self-hosted", "gtp-dev-example"], "region": "us-west-2"},
        {"stack": "prod", "runs-on": ["self-hosted", "gtp-prod-example"], "region": "us-east-1"},
        {"stack": "bench", "runs-on": ["self-hosted", "gtp-bench-example"], "region": "us-west-2"}]}
    # Each stack's own region: dev and prod live in different ones (one repository AWS_REGION served both).
    assert (lines["dev_region"], lines["prod_region"], lines["bench_region"]) == ("us-west-2", "us-east-1", "us-west-2")


def test_deploying_jobs_refuse_placeholder_labels_instead_of_queueing(capsys: pytest.CaptureFixture[str]) -> None:
    assert deployer.main(["--require-real", "dev"]) == 2
    assert "placeholder runner label(s)" in capsys.readouterr().err
    assert deployer.main(["--require-real", "--template", "bench"]) == 2


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "stacks", root / "stacks")
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    return root


def test_real_labels_pass_require_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path)
    stack = root / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("gtp-dev-example", "gtp-dev"))
    monkeypatch.setattr(deployer, "ROOT", root)
    assert deployer.main(["--require-real", "dev"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == 'dev=["self-hosted", "gtp-dev"]'


def test_a_stack_whose_deployer_cannot_reach_the_api_names_no_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path)
    stack = root / "stacks" / "Pulumi.prod.yaml"
    stack.write_text(stack.read_text().replace("runnerLabels: [self-hosted, gtp-prod-example]",
                                               "runnerLabels: [ubuntu-24.04]"))
    monkeypatch.setattr(deployer, "ROOT", root)
    assert deployer.main(["prod"]) == 2
    assert "cluster.deployer.runnerLabels[0]: 'ubuntu-24.04' is a GitHub-hosted runner" in capsys.readouterr().err


def test_a_stack_without_runner_labels_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert deployer.main(["edge"]) == 2
    assert "edge: cluster.deployer.runnerLabels is not set" in capsys.readouterr().err
