"""The docs stay true: the config reference is generated from the config models, the plan-diff and destroy
sections say what the tools do, the README stays short, and every link and docs/ path points somewhere real."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, clone_working_tree
from tools.config_reference import render

DOCS = ROOT / "docs"
CONFIG_REFERENCE = DOCS / "config-reference.md"
PLAN_AND_REVIEW = DOCS / "plan-and-review.md"
"""Where "Reviewing a change" and its plan-diff examples live."""
DEPLOY = DOCS / "deploy.md"


def test_docs_contain_the_current_config_reference() -> None:
    assert render() in CONFIG_REFERENCE.read_text(), "run `python -m tools.config_reference --update`"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found (the docs example's edit no longer applies)"
    path.write_text(text.replace(old, new))


def _bump_device_plugin_chart(clone: Path) -> None:
    """The NVIDIA device plugin chart bumped as a bump PR does it: the pin (catalog/versions.py), the vendored
    directory and the compatibility rows re-verified at the new version. The vendored 0.20.0 chart copied as 0.21.0
    stands for the new release, and its ClusterRole lets the plugin list pods, standing for an upstream RBAC change."""
    _edit(clone / "catalog" / "versions.py", '"nvidia-device-plugin", "0.20.0")', '"nvidia-device-plugin", "0.21.0")')
    _edit(clone / "catalog" / "compatibility.py", '{"NVIDIA_DEVICE_PLUGIN": "0.20.0"}',
          '{"NVIDIA_DEVICE_PLUGIN": "0.21.0"}')
    charts = clone / "vendor" / "charts"
    (charts / "nvidia-device-plugin-0.20.0").rename(charts / "nvidia-device-plugin-0.21.0")
    _edit(charts / "nvidia-device-plugin-0.21.0" / "Chart.yaml", 'version: "0.20.0"\nappVersion: "0.20.0"',
          'version: "0.21.0"\nappVersion: "0.21.0"')
    _edit(charts / "nvidia-device-plugin-0.21.0" / "templates" / "role.yml",
          'resources: ["pods"]\n    verbs: ["get"]', 'resources: ["pods"]\n    verbs: ["get", "list"]')


def _replace_reserved_group(clone: Path) -> None:
    """prod's reserved H100 group (a capacity reservation, deleteBeforeReplace) moved to p5en.48xlarge."""
    _edit(clone / "stacks" / "Pulumi.prod.yaml", "instanceTypes: [p5.48xlarge]", "instanceTypes: [p5en.48xlarge]")


PLAN_DIFF_EXAMPLES = {"chart-bump": _bump_device_plugin_chart, "reserved-group-replacement": _replace_reserved_group}
"""The plan-diff examples docs/plan-and-review.md's "Reviewing a change" shows: name → the edit of a clone that
produces it."""


def _docs_example(text: str, name: str) -> re.Match[str]:
    start = text.index("## Reviewing a change")
    end = text.find("\n## ", start)
    found = re.compile(rf"<!-- plan-diff example: {name} -->\n```\n(.*?)\n```\n", re.S).search(
        text, start, end if end >= 0 else len(text))
    assert found, f"{PLAN_AND_REVIEW.name}'s 'Reviewing a change' has no block after <!-- plan-diff example: {name} -->"
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLAN_DIFF_EXAMPLES))
def test_docs_plan_diff_examples_are_what_plan_diff_prints(tmp_path: Path, name: str) -> None:
    """The plan-diff examples are the tool's output: `python -m tools.plan_diff --stack prod --base HEAD` in
    a clone of the working tree after the example's edit. UPDATE_GOLDEN=1 writes them into docs/plan-and-review.md."""
    clone = tmp_path / "clone"
    clone_working_tree(clone)
    PLAN_DIFF_EXAMPLES[name](clone)
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "prod", "--base", "HEAD"],
                            cwd=clone, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("plan-diff: prod at ")]) == 2
    output = result.stdout.rstrip("\n")
    path = PLAN_AND_REVIEW
    text = path.read_text()
    found = _docs_example(text, name)
    if os.environ.get("UPDATE_GOLDEN") and found.group(1) != output:
        path.write_text(text[:found.start(1)] + output + text[found.end(1):])
        found = _docs_example(path.read_text(), name)
    assert found.group(1) == output, f"{path.name}'s {name} example is stale; run with UPDATE_GOLDEN=1:\n{output}"


def test_docs_examples_show_what_reviewers_must_see() -> None:
    """The committed examples show the delete-before-replace with its workloads and the chart's images and RBAC."""
    text = PLAN_AND_REVIEW.read_text()
    replacement = _docs_example(text, "reserved-group-replacement").group(1)
    assert replacement.splitlines()[1] == "destructive changes:"
    assert "h100-nodes  replace, DELETE BEFORE REPLACE" in replacement
    assert "runs there now: PyTorchJob training-prod/gpt-pretrain" in replacement
    bump = _docs_example(text, "chart-bump").group(1)
    assert "release nvidia-device-plugin/nvidia-device-plugin (" in bump
    assert "~ image  DaemonSet nvidia-device-plugin/nvidia-device-plugin  " in bump and "+ rbac  ClusterRole" in bump
    assert "destructive" not in bump


def test_docs_destroy_section_matches_the_cli() -> None:
    text = DEPLOY.read_text()
    for flag in ("--yes", "--timeout-minutes"):
        assert flag in text and flag in (ROOT / "tools" / "destroy.py").read_text()
    assert "named `bench-*`" in text and "--show-secrets" in text
