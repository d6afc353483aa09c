"""The plan-diff PR comment (verify/pr_comment.py): every stack's count line in its `<summary>`, production stacks
first, destructive changes open, a failed stack's error, and a cut that keeps every stack's summary and destructive
changes under GitHub's comment limit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from verify import plan_diff, pr_comment
from verify.plan_diff import Section, diff_plans
from verify.pr_comment import StackDiff, render

URN = "urn:pulumi:{}::gtp::{}::{}"


def _group(stack: str, instance: str) -> dict[str, Any]:
    return {"urn": URN.format(stack, "aws:eks/nodeGroup:NodeGroup", "h100-nodes"),
            "type": "aws:eks/nodeGroup:NodeGroup", "name": "h100-nodes", "custom": True,
            "inputs": {"instanceTypes": [instance], "labels": {"gtp.dev/node-group": "h100"}},
            "options": {"deleteBeforeReplace": True}, "dependsOn": [], "provider": None, "parent": None}


def _role(stack: str, index: int) -> dict[str, Any]:
    return {"urn": URN.format(stack, "aws:iam/role:Role", f"role-{index}"), "type": "aws:iam/role:Role",
            "name": f"role-{index}", "custom": True, "inputs": {"path": f"/r{index}/"}, "options": {},
            "dependsOn": [], "provider": None, "parent": None}


def _prod_json(extra_roles: int = 0) -> str:
    """prod's plan diff: its reserved group's instance type changes (a replacement, deleted first), plus
    `extra_roles` new roles."""
    base = {"stack": "prod", "resources": [_group("prod", "p5.48xlarge")], "outputs": {},
            "placements": {"h100": {"workloads": ["PyTorchJob training-prod/gpt-pretrain Worker ×4"]}}}
    head = {"stack": "prod", "resources": [_group("prod", "p5en.48xlarge"),
                                           *(_role("prod", index) for index in range(extra_roles))], "outputs": {}}
    return diff_plans(base, head, fmt="json")


def _prod(extra_roles: int = 0) -> StackDiff:
    return StackDiff.from_json("prod", True, _prod_json(extra_roles))


def _dev_json() -> str:
    same = {"stack": "dev", "resources": [_role("dev", 0)], "outputs": {}}
    return diff_plans(same, same, fmt="json")


def _dev() -> StackDiff:
    return StackDiff.from_json("dev", False, _dev_json())


def _edge_failed() -> StackDiff:
    return StackDiff("edge", False, failure="plan-diff failed (exit 1)\nerror: planning edge failed: gtp:cluster: bad")


def _details(comment: str) -> list[str]:
    return re.findall(r"^<details.*$", comment, re.MULTILINE)


def _names(comment: str) -> list[str]:
    return re.findall(r"^<details[^>]*><summary><b>([^<]+)</b>", comment, re.MULTILINE)


def test_production_stacks_come_first_then_the_rest_in_listing_order() -> None:
    comment = render([_dev(), _edge_failed(), _prod()], base="origin/main")
    assert _names(comment) == ["prod", "dev", "edge"]
    assert comment.startswith("### Offline plan diff against `origin/main`\n")


def test_each_summary_has_its_count_line_and_destructive_or_failed_stacks_are_open() -> None:
    prod, dev, edge = _details(render([_dev(), _edge_failed(), _prod()], base="origin/main"))
    assert prod == ("<details open><summary><b>prod</b> (production): 0 to add, 0 to change, 1 to replace, "
                    "0 to delete :warning: destructive changes</summary>")
    assert dev == "<details><summary><b>dev</b>: 0 to add, 0 to change, 0 to replace, 0 to delete</summary>"
    assert edge == "<details open><summary><b>edge</b>: :x: plan-diff failed</summary>"


def test_a_failed_stack_shows_its_error_and_counts_as_failed() -> None:
    comment = render([_dev(), _edge_failed(), _prod()], base="origin/main")
    assert "error: planning edge failed: gtp:cluster: bad" in comment
    assert "3 stacks: 1 with destructive changes (prod), 1 failed (edge)" in comment
    assert [diff.stack for diff in [_dev(), _edge_failed(), _prod()] if diff.failed] == ["edge"]


def test_a_replacement_is_coloured_as_a_change_not_an_addition() -> None:
    comment = render([_prod()], base="origin/main")
    block = comment.split("````diff\n", 1)[1].split("````", 1)[0]
    assert block.startswith("! +- aws:eks/nodeGroup:NodeGroup  h100-nodes  (replace: instanceTypes[0]")
    assert not re.search(r"^\+-", block, re.MULTILINE)  # a `+` line is an addition (green) in a diff block
    assert plan_diff.markdown_section(Section(None, ["+ a", "- b", "+- c", "~ d"])) == [
        "**Resources**", "", "````diff", "+ a", "- b", "! +- c", "~ d", "````"]


def test_a_tiny_limit_keeps_every_stacks_summary_and_destructive_changes_and_names_the_cut() -> None:
    diffs = [_dev(), _edge_failed(), _prod(extra_roles=200)]
    whole = render(diffs, base="origin/main", limit=10**6)
    assert "+ aws:iam/role:Role  role-199" in whole and "cut" not in whole
    limit = 3_000
    comment = render(diffs, base="origin/main", limit=limit)
    assert len(comment) <= limit
    assert len(_details(comment)) == 3
    assert "0 to add, 0 to change, 0 to replace, 0 to delete</summary>" in comment  # dev
    assert "200 to add, 0 to change, 1 to replace, 0 to delete" in comment  # prod
    destructive = comment.split("**Destructive changes** :warning:\n\n", 1)[1]
    assert destructive.startswith("- `+- aws:eks/nodeGroup:NodeGroup  h100-nodes  replace, DELETE BEFORE REPLACE")
    assert "runs there now: PyTorchJob training-prod/gpt-pretrain Worker ×4" in destructive
    assert "error: planning edge failed" in comment
    assert "+ aws:iam/role:Role  role-199" not in comment
    note = re.search(r"^\*Cut to fit GitHub's comment limit: (.+)\. The whole diff: "
                     r"`make plan-diff STACK=prod BASE=origin/main`\*$", comment, re.MULTILINE)
    assert note, comment
    assert re.fullmatch(r"resources \(\d+ of \d+ lines\)", note[1]), note[1]
    kept = comment.split("````diff\n", 1)[1].split("\n````", 1)[0].splitlines()
    assert kept[-1].startswith("    path: "), kept[-3:]  # cut between resources, none without its inputs
    assert comment.count("````") % 2 == 0  # every cut code block is closed


def test_the_cut_starts_with_the_stacks_listed_last() -> None:
    """Production first: with room for one stack's resources, prod keeps them and the other stack is cut."""
    other = StackDiff.from_json("staging", False, _prod_json(extra_roles=40))
    prod = _prod(extra_roles=40)
    size = len(render([prod], base="origin/main", limit=10**6))
    comment = render([other, prod], base="origin/main", limit=size + 1_500)
    assert "STACK=staging" in comment and "STACK=prod" not in comment
    assert comment.index("<b>prod</b>") < comment.index("<b>staging</b>")


def test_production_is_read_from_the_stack_config_not_the_name(tmp_path: Path) -> None:
    assert pr_comment.is_production("prod") and not pr_comment.is_production("dev")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks" / "Pulumi.live.yaml").write_text("config:\n  gtp:lifecycle:\n    protect: true\n")
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text("config:\n  gtp:region: us-east-1\n")
    assert pr_comment.is_production("live", root=tmp_path)
    assert not pr_comment.is_production("prod", root=tmp_path)
    assert not pr_comment.is_production("gone", root=tmp_path)  # deleted in the working tree


def test_the_command_diffs_every_stack_and_prints_the_failed_ones(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """Each stack's `python -m tools.plan_diff --format json` runs on its own; one that fails still leaves the
    others in the comment, and the command prints `failed=<stacks>` for $GITHUB_OUTPUT."""
    calls: list[list[str]] = []

    def fake_run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        stack = command[command.index("--stack") + 1]
        if stack == "edge":
            return subprocess.CompletedProcess(command, 1, "", "plan-diff: edge at origin/main: 1 resources\n"
                                                               "error: planning edge failed:\n"
                                                               "plan: edge: running the program under mocks\n"
                                                               "error: boom\n")
        return subprocess.CompletedProcess(command, 0, _dev_json(), "")

    out = tmp_path / "comment.md"
    code = pr_comment.main(["--base", "origin/main", "--out", str(out), "--stacks", "dev", "edge", "prod"],
                           run=fake_run)
    assert code == 0  # the comment gets posted; the workflow fails the job afterwards
    assert capsys.readouterr().out.strip() == "failed=edge"
    assert [call[call.index("--stack") + 1] for call in calls] == ["dev", "edge", "prod"]
    assert all(call[-2:] == ["--format", "json"] for call in calls)
    comment = out.read_text()
    assert _names(comment) == ["prod", "dev", "edge"]
    assert "````\npython -m tools.plan_diff exited 1:\nerror: planning edge failed:\nerror: boom\n````" in comment
    assert "plan-diff: edge at" not in comment and "plan: edge:" not in comment  # progress lines
