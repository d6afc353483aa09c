"""The offline plan: the real program under mocks, deterministic, validated, and readable as a diff."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, clone_working_tree, plan_modified, plan_stack
from verify import plan as gtp_plan
from verify.plan_diff import diff_plans
from verify.validate import Report, close_schema, validate_objects


@pytest.mark.parametrize("stack", ["dev", "edge", "edge-swarm", "prod"])
@pytest.mark.program
def test_plan_renders_and_is_deterministic(stack: str) -> None:
    first = gtp_plan.render(plan_stack(stack))
    second = gtp_plan.render(gtp_plan.run(stack))
    assert first == second
    document = json.loads(first[0])
    assert document["stack"] == stack and document["resources"]
    for resource in document["resources"]:
        assert set(resource) == {"urn", "type", "name", "custom", "parent", "provider", "dependsOn", "options",
                                 "inputs"}
        options = set(resource["options"])
        assert {"protect", "retainOnDelete", "deleteBeforeReplace", "ignoreChanges"} <= options
        assert options <= {"protect", "retainOnDelete", "deleteBeforeReplace", "ignoreChanges", "aliases",
                           "replaceOnChanges"}  # the last two only where set


def test_secrets_are_masked_and_computed_values_marked() -> None:
    dev = plan_stack("dev")
    text = gtp_plan.render(dev)[0]
    assert "fake-secret" not in text and "fake-ecr-password" not in text
    assert dev.one("pulumi:providers:kubernetes").inputs["kubeconfig"] == gtp_plan.SECRET
    assert dev.one("aws:eks/cluster:Cluster").inputs["roleArn"] == gtp_plan.COMPUTED
    assert dev.outputs["kubeconfig"] == gtp_plan.SECRET and dev.outputs["endpoint"] == gtp_plan.COMPUTED
    edge = plan_stack("edge")
    assert edge.one("pulumi:providers:kubernetes").inputs["kubeconfig"] == gtp_plan.SECRET


def test_invalid_config_fails_before_any_resource_is_registered(tmp_path: Path) -> None:
    def break_it(config: dict) -> None:
        config["gtp:gpuNodeGroups"]["g6"]["minSize"] = 3  # > maxSize 2
        config["gtp:gpuNodeGroups"]["g6"]["instanceTyps"] = ["g6.xlarge"]
        config["gtp:gpu"]["sharing"]["mode"] = "mpx"

    from stack_config import ConfigError

    with pytest.raises(ConfigError) as caught:
        plan_modified(tmp_path, "dev", break_it)
    message = str(caught.value)
    for expected in ("gpuNodeGroups.g6.maxSize: 2 is less than minSize 3",
                     "gpuNodeGroups.g6.instanceTyps: unknown key (did you mean 'instanceTypes'?)",
                     "gpu.sharing.mode: 'mpx' is not allowed"):
        assert expected in message
    # The CLI says the same, exits 2, and writes no plan.
    assert_cli_rejects(next(tmp_path.glob("Pulumi.dev.yaml")), tmp_path,
                       "gpuNodeGroups.g6.maxSize: 2 is less than minSize 3")


def broken_dev(tmp_path: Path, section: str, key: str, value: object) -> Path:
    """A copy of the dev stack file with `gtp:<section>.<key>` set to `value`."""
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"][f"gtp:{section}"][key] = value
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    return stack_file


def assert_registers_nothing(stack_file: Path, problem: str) -> None:
    partial = gtp_plan.Plan(project="gtp", stack="dev")
    with pytest.raises(Exception, match=problem):
        gtp_plan.run("dev", stack_file=stack_file, into=partial)
    assert partial.resources == []


def assert_cli_rejects(stack_file: Path, tmp_path: Path, problem: str) -> None:
    """The CLI says `problem`, exits 2, prints no traceback and writes no plan."""
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "dev", "--stack-file", str(stack_file),
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 2, result.stderr
    assert problem in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_no_resource_is_registered_when_config_is_invalid(tmp_path: Path) -> None:
    assert_registers_nothing(broken_dev(tmp_path, "cluster", "mode", "gke"), "cluster.mode: 'gke' is not allowed")


def test_builtin_objects_are_validated_strictly() -> None:
    report = Report()
    bad = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {"finalizerz": []}}
    validate_objects([bad], "1.34", report)
    assert len(report.errors) == 1
    assert report.errors[0].startswith("Namespace x (stack): spec: ") and "finalizerz" in report.errors[0]


def test_a_secret_with_masked_data_validates_by_shape() -> None:
    report = Report()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pull", "namespace": "n"},
              "type": "kubernetes.io/dockerconfigjson", "stringData": gtp_plan.SECRET}
    validate_objects([secret], "1.34", report)
    assert report.errors == []
    validate_objects([{**secret, "typo": 1}], "1.34", report)
    assert len(report.errors) == 1 and "typo" in report.errors[0]


def test_a_builtin_kind_the_version_lacks_is_an_error() -> None:
    report = Report()
    validate_objects([{"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "c"}}], "1.34", report)
    assert report.errors == ["CronJob c (stack): batch/v1beta1 CronJob does not exist in Kubernetes 1.34"]


def test_close_schema_rejects_undeclared_fields_but_keeps_preserved_ones() -> None:
    schema = close_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {}}},
                                                           "free": {"x-kubernetes-preserve-unknown-fields": True,
                                                                    "properties": {"b": {}}}}})
    assert schema["properties"]["spec"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["free"]


@pytest.mark.program
def test_plan_diff_shows_a_changed_field(tmp_path: Path) -> None:
    base = json.loads(gtp_plan.render(gtp_plan.run("dev"))[0])
    changed = plan_modified(tmp_path, "dev", lambda config: config["gtp:gpuNodeGroups"]["g6"].update(maxSize=5))
    text = diff_plans(base, json.loads(gtp_plan.render(changed)[0]))
    assert "~ aws:eks/nodeGroup:NodeGroup  g6-nodes" in text
    assert "    inputs.scalingConfig.maxSize: 2 -> 5" in text
    assert "0 to add" in text and "0 to delete" in text


@pytest.mark.program
def test_plan_diff_cli_against_a_git_ref(tmp_path: Path) -> None:
    """`make plan-diff` end to end: a clone, an edited stack value, the diff against HEAD."""
    clone = tmp_path / "clone"
    clone_working_tree(clone)  # the working tree as it is, so the test plans the code under test
    stack_file = clone / "stacks" / "Pulumi.edge.yaml"
    document = yaml.safe_load(stack_file.read_text())
    document["config"]["gtp:gpuNodeGroups"]["orin"]["maxSize"] = 7
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "edge", "--base", "HEAD"], cwd=clone,
                            capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "stack edge:" in result.stdout
    assert "gpuNodeGroups.orin.maxNodes: 3 -> 7" in result.stdout, result.stdout


@pytest.mark.program
def test_unknown_stack_and_unknown_base_ref_are_clear_errors(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "nope", "--out", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "no stack file" in result.stderr and "(stacks: " in result.stderr
    assert "Traceback" not in result.stderr
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "dev", "--base", "no-such-ref"],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "can't check out 'no-such-ref'" in result.stderr


def test_a_duplicate_key_in_the_stack_file_fails_the_plan_before_anything_is_registered(tmp_path: Path) -> None:
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(text + "  gtp:region: us-east-1\n")
    assert_registers_nothing(stack_file, r"region: duplicate key 'gtp:region' \(lines \d+ and \d+\)")


def test_a_malformed_quantity_exits_2_with_its_key_path_and_registers_nothing(tmp_path: Path) -> None:
    stack_file = broken_dev(tmp_path, "workloads", "mnist", {"kind": "pytorchjob", "nodeGroup": "g6",
                                                             "memory": "64GB"})
    assert_registers_nothing(stack_file, r"workloads\.mnist\.memory: '64GB' is not a memory quantity like '16Gi'")
    assert_cli_rejects(stack_file, tmp_path, "workloads.mnist.memory: '64GB'")


@pytest.mark.parametrize("stack", ["dev", "edge"])
def test_urns_are_the_engines(stack: str) -> None:
    """As the engine makes them (pkg/v3 resource/deploy/deployment.go:859-867 `generateURN` at v3.274.0): no root
    stack type in a URN, and a child's type qualified by its parent's whole chain; the SDK's MockMonitor did
    neither, and every URN of the plan differed from the real state's (`make up-test`)."""
    plan = plan_stack(stack)
    by_urn = {resource.urn: resource for resource in plan.resources}
    for resource in plan.resources:
        assert "pulumi:pulumi:Stack" not in resource.urn.split("::")[2], resource.urn
        parent = by_urn.get(resource.parent or "")
        expected = resource.type if parent is None else f"{parent.urn.split('::')[2]}${resource.type}"
        assert resource.urn == f"urn:pulumi:{stack}::{plan.project}::{expected}::{resource.name}"
