"""The README's config reference is generated from the config models and must stay in step with them."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, clone_working_tree
from tools.config_reference import render


def test_readme_contains_the_current_config_reference() -> None:
    assert render() in (ROOT / "README.md").read_text(), "run `python -m tools.config_reference` and update README.md"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found (the README example's edit no longer applies)"
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


README_EXAMPLES = {"chart-bump": _bump_device_plugin_chart, "reserved-group-replacement": _replace_reserved_group}
"""The plan-diff examples README's "Reviewing a change" shows: name → the edit of a clone that produces it."""


def _readme_example(readme: str, name: str) -> re.Match[str]:
    start = readme.index("## Reviewing a change")
    end = readme.find("\n## ", start)
    found = re.compile(rf"<!-- plan-diff example: {name} -->\n```\n(.*?)\n```\n", re.S).search(
        readme, start, end if end >= 0 else len(readme))
    assert found, f"README's 'Reviewing a change' has no block after <!-- plan-diff example: {name} -->"
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(README_EXAMPLES))
def test_readme_plan_diff_examples_are_what_plan_diff_prints(tmp_path: Path, name: str) -> None:
    """README's plan-diff examples are the tool's output: `python -m tools.plan_diff --stack prod --base HEAD` in
    a clone of the working tree after the example's edit. UPDATE_GOLDEN=1 writes them into README.md."""
    clone = tmp_path / "clone"
    clone_working_tree(clone)
    README_EXAMPLES[name](clone)
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "prod", "--base", "HEAD"],
                            cwd=clone, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("plan-diff: prod at ")]) == 2
    output = result.stdout.rstrip("\n")
    path = ROOT / "README.md"
    readme = path.read_text()
    found = _readme_example(readme, name)
    if os.environ.get("UPDATE_GOLDEN") and found.group(1) != output:
        path.write_text(readme[:found.start(1)] + output + readme[found.end(1):])
        found = _readme_example(path.read_text(), name)
    assert found.group(1) == output, f"README's {name} example is stale; run with UPDATE_GOLDEN=1:\n{output}"


def test_readme_examples_show_what_reviewers_must_see() -> None:
    """The committed examples show the delete-before-replace with its workloads and the chart's images and RBAC."""
    readme = (ROOT / "README.md").read_text()
    replacement = _readme_example(readme, "reserved-group-replacement").group(1)
    assert replacement.splitlines()[1] == "destructive changes:"
    assert "h100-nodes  replace, DELETE BEFORE REPLACE" in replacement
    assert "runs there now: PyTorchJob training-prod/gpt-pretrain" in replacement
    bump = _readme_example(readme, "chart-bump").group(1)
    assert "release nvidia-device-plugin/nvidia-device-plugin (" in bump
    assert "~ image  DaemonSet nvidia-device-plugin/nvidia-device-plugin  " in bump and "+ rbac  ClusterRole" in bump
    assert "destructive" not in bump


def test_readme_destroy_section_matches_the_cli() -> None:
    readme = (ROOT / "README.md").read_text()
    for flag in ("--yes", "--timeout-minutes"):
        assert flag in readme and flag in (ROOT / "tools" / "destroy.py").read_text()
    assert "named `bench-*`" in readme and "--show-secrets" in readme
