"""plan-diff as a reviewer reads it: replacements, ignoreChanges, multi-line values, new inputs, versions,
policy violations and unknown stacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tools.plan as gtp_plan
from tools import plan_diff
from tools.plan_diff import diff_plans
from tests.conftest import ROOT, plan_modified, plan_stack

URN = "urn:pulumi:dev::gtp::{}::{}"


def _resource(type_: str, name: str, inputs: dict[str, Any], ignore: list[str] | None = None) -> dict[str, Any]:
    return {"urn": URN.format(type_, name), "type": type_, "name": name, "custom": True, "inputs": inputs,
            "options": {"protect": False, "ignoreChanges": ignore or []}, "dependsOn": [], "provider": None,
            "parent": None}


def _plan(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"stack": "dev", "resources": list(resources), "outputs": {}}


def test_prod_instance_type_change_is_a_replacement(tmp_path: Path) -> None:
    base = json.loads(gtp_plan.render(plan_stack("prod"))[0])
    changed = plan_modified(tmp_path, "prod",
                            lambda config: config["gtp:gpuNodeGroups"]["a100"].update(instanceTypes=["p4de.24xlarge"]))
    text = diff_plans(base, json.loads(gtp_plan.render(changed)[0]))
    assert "+- aws:eks/nodeGroup:NodeGroup  a100-nodes  (replace: instanceTypes[0] forces a new resource)" in text
    assert '    inputs.instanceTypes[0]: "p4d.24xlarge" -> "p4de.24xlarge"' in text
    assert "1 to replace" in text


def test_in_place_change_is_not_a_replacement() -> None:
    old = _resource("aws:eks/nodeGroup:NodeGroup", "g", {"scalingConfig": {"maxSize": 2}})
    new = _resource("aws:eks/nodeGroup:NodeGroup", "g", {"scalingConfig": {"maxSize": 5}})
    text = diff_plans(_plan(old), _plan(new))
    assert "~ aws:eks/nodeGroup:NodeGroup  g" in text and "+-" not in text and "0 to replace" in text


def test_ignore_changes_are_left_out() -> None:
    old = _resource("aws:eks/nodeGroup:NodeGroup", "g", {"scalingConfig": {"desiredSize": 1, "maxSize": 2}},
                    ["scalingConfig.desiredSize"])
    new = _resource("aws:eks/nodeGroup:NodeGroup", "g", {"scalingConfig": {"desiredSize": 3, "maxSize": 2}},
                    ["scalingConfig.desiredSize"])
    text = diff_plans(_plan(old), _plan(new))
    assert "desiredSize" not in text and "0 to change" in text
    wild = _resource("kubernetes:kubeflow.org/v1:PyTorchJob", "j", {"spec": {"r": [{"replicas": 1}]}}, ["spec.r[*]"])
    wild2 = _resource("kubernetes:kubeflow.org/v1:PyTorchJob", "j", {"spec": {"r": [{"replicas": 4}]}}, ["spec.r[*]"])
    assert "replicas" not in diff_plans(_plan(wild), _plan(wild2))


def test_multi_line_values_are_line_diffs() -> None:
    old = _resource("kubernetes:core/v1:ConfigMap", "c", {"data": {"a.yaml": "x: 1\ny: 2\nz: 3\n"},
                                                         "policy": json.dumps({"a": 1, "b": [1, 2]})})
    new = _resource("kubernetes:core/v1:ConfigMap", "c", {"data": {"a.yaml": "x: 1\ny: 20\nz: 3\n"},
                                                         "policy": json.dumps({"a": 1, "b": [1, 3]})})
    text = diff_plans(_plan(old), _plan(new))
    assert "    inputs.data.a.yaml:\n" in text
    assert "        -y: 2\n        +y: 20" in text
    assert "\\n" not in text
    assert '        -    2\n        +    3' in text  # the JSON document pretty-printed


def test_new_resources_show_key_inputs() -> None:
    new = _resource("aws:ecr/repository:Repository", "repo", {"name": "gtp-dev", "forceDelete": True})
    text = diff_plans(None, _plan(new))
    assert '+ aws:ecr/repository:Repository  repo\n    name: "gtp-dev"\n    forceDelete: true' in text


def test_version_changes_are_listed() -> None:
    old = _resource("kubernetes:helm.sh/v3:Release", "keda", {"chart": "keda", "version": "2.20.2"})
    new = _resource("kubernetes:helm.sh/v3:Release", "keda", {"chart": "keda", "version": "2.21.0"})
    text = diff_plans(_plan(old), _plan(new), ["    pulumi-aws: 7.1.0 -> 7.2.0"])
    assert "versions:\n    pulumi-aws: 7.1.0 -> 7.2.0\n" in text
    assert '    kubernetes:helm.sh/v3:Release  keda  version: "2.20.2" -> "2.21.0"' in text


def test_provider_pins_compare_requirements(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    (tmp_path / "a" / "requirements.txt").write_text("pulumi==3.1\npulumi-aws==7.1.0\nPyYAML==6\n")
    (tmp_path / "b" / "requirements.txt").write_text("pulumi==3.1\npulumi-aws==7.2.0\nPyYAML==7\n")
    assert plan_diff.provider_version_changes(tmp_path / "a", tmp_path / "b") == ["    pulumi-aws: 7.1.0 -> 7.2.0"]


def test_plan_tree_collects_policy_violations(tmp_path: Path) -> None:
    """A fake tree whose planner writes a plan and fails validation, as tools.plan does on a violation."""
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.x.yaml").write_text("config: {}\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "plan.py").write_text(
        "import sys, pathlib\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1]) / 'x'\n"
        "out.mkdir(parents=True)\n"
        "(out / 'resources.json').write_text('{\"stack\": \"x\", \"resources\": [], \"outputs\": {}}')\n"
        "print(\"error: the plan of stack 'x' has 1 invalid object(s):\", file=sys.stderr)\n"
        "print('  - gtp-no-public-bucket: bucket b is public', file=sys.stderr)\n"
        "sys.exit(1)\n")
    plan = plan_diff.plan_tree(tmp_path, "x", tmp_path / "out")
    assert plan["violations"] == ["gtp-no-public-bucket: bucket b is public"]
    text = diff_plans(plan, plan)
    assert "policy violations (1):\n    gtp-no-public-bucket: bucket b is public" in text


def test_cli_exits_non_zero_on_a_violation(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    head = {**_plan(), "violations": ["rule: broken"]}
    monkeypatch.setattr(plan_diff, "plan_tree", lambda tree, stack, out: head)
    assert plan_diff.main(["--stack", "dev", "--base", "HEAD"]) == 1
    assert "policy violations (1)" in capsys.readouterr().out


def test_cli_rejects_an_unknown_stack() -> None:
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "prd", "--base", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 2, result.stdout
    assert "no stack 'prd'" in result.stderr and "removed" not in result.stdout
