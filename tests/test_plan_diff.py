"""plan-diff as a reviewer reads it: replacements, ignoreChanges, multi-line values, new inputs, versions,
policy violations and unknown stacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import verify.plan as gtp_plan
from tests.conftest import ROOT, plan_modified, plan_stack
from verify import plan_diff
from verify.plan_diff import PlanDiff, diff_plans
from verify.render import ClusterObject

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


def test_whole_numbered_list_items_gone_or_new_are_one_line_per_run() -> None:
    card = {"deviceIndex": 1, "interfaceType": "efa", "securityGroups": [None]}  # a nested list goes with its item
    old = _resource("aws:ec2/launchTemplate:LaunchTemplate", "t",
                    {"networkInterfaces": [dict(card, networkCardIndex=i) for i in range(6)], "tags": ["a"]})
    # items 2..3 and 5 gone, item 1 changed in place, a tag added
    kept = [dict(card, networkCardIndex=0), dict(card, networkCardIndex=1, deviceIndex=0),
            dict(card, networkCardIndex=4)]
    new = _resource("aws:ec2/launchTemplate:LaunchTemplate", "t", {"networkInterfaces": kept, "tags": ["a", "b"]})
    lines = diff_plans(_plan(old), _plan(new)).splitlines()
    # numbered items are compared by index: [2] now holds card 4, so only [3..5] are gone as a whole
    assert "    inputs.networkInterfaces[3..5]: 3 items removed" in lines
    assert '    inputs.tags[1]: (absent) -> "b"' in lines  # a scalar item keeps its value
    assert '    inputs.networkInterfaces[1].deviceIndex: 1 -> 0' in lines
    assert '    inputs.networkInterfaces[2].networkCardIndex: 2 -> 4' in lines
    assert not any(re.search(r"networkInterfaces\[[345]\]\.", line) for line in lines)
    # the same lists the other way round read as added
    back = diff_plans(_plan(new), _plan(old)).splitlines()
    assert "    inputs.networkInterfaces[3..5]: 3 items added" in back and '    inputs.tags[1]: "b" -> (absent)' in back


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
    pins = plan_diff.provider_pins(tmp_path / "a"), plan_diff.provider_pins(tmp_path / "b")
    assert plan_diff.pin_changes(*pins) == ["    pulumi-aws: 7.1.0 -> 7.2.0"]


def test_plan_tree_collects_policy_violations(tmp_path: Path) -> None:
    """A fake tree whose planner writes a plan and fails validation, as verify.plan does on a violation."""
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


def test_cli_rejects_an_unknown_base_before_planning_anything(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(plan_diff, "plan_tree", lambda tree, stack, out: pytest.fail("planned for an unknown base"))
    assert plan_diff.main(["--stack", "dev", "--base", "no-such-ref-anywhere"]) == 2
    assert "can't check out 'no-such-ref-anywhere': not a commit of this repository" in capsys.readouterr().err


def test_cli_rejects_an_unknown_stack() -> None:
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "prd", "--base", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 2, result.stdout
    assert "no stack 'prd'" in result.stderr and "removed" not in result.stdout


# --- reviewers' view: dependsOn, named list items, renames, destructive changes, the cluster, formats ---------


def test_a_depends_on_only_change_is_not_listed() -> None:
    old = _resource("pulumi:providers:kubernetes", "k8s", {"kubeconfig": "x"})
    new = {**_resource("pulumi:providers:kubernetes", "k8s", {"kubeconfig": "x"}),
           "dependsOn": [URN.format("aws:eks/cluster:Cluster", "c")]}
    text = diff_plans(_plan(old), _plan(new))
    assert "0 to change" in text and "dependsOn" not in text and "~" not in text


def test_named_list_items_are_matched_by_name_not_index() -> None:
    def job(containers: list[dict[str, Any]]) -> dict[str, Any]:
        return _resource("kubernetes:batch/v1:Job", "j", {"spec": {"template": {"spec": {"containers": containers}}}})

    trainer = {"name": "trainer", "image": "t:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    moved = {**trainer, "env": [{"name": "NEW", "value": "0"}, *trainer["env"]]}
    text = diff_plans(_plan(job([trainer])), _plan(job([{"name": "sidecar", "image": "s:1"}, moved])))
    # a whole named item added is one line, matched by its name
    assert "containers[sidecar]: item added" in text
    assert "containers[trainer].env[NEW]: item added" in text
    assert "[0]" not in text and "[1]" not in text and "[2]" not in text
    # Unnamed (or duplicate-named) items keep their index.
    assert plan_diff.flatten({"a": [{"x": 1}, {"x": 2}]}) == {"a[0].x": 1, "a[1].x": 2}
    assert plan_diff.flatten({"a": [{"name": "n"}, {"name": "n"}]}) == {"a[0].name": "n", "a[1].name": "n"}


def test_ignore_changes_wildcards_cover_named_items() -> None:
    old = _resource("kubernetes:apps/v1:Deployment", "d", {"c": [{"name": "x", "image": "1"}]}, ["c[*].image"])
    new = _resource("kubernetes:apps/v1:Deployment", "d", {"c": [{"name": "x", "image": "2"}]}, ["c[*].image"])
    assert "0 to change" in diff_plans(_plan(old), _plan(new))


def test_a_rename_is_shown_as_a_rename() -> None:
    old = [_resource("aws:iam/role:Role", f"old-{n}", {"name": f"old-{n}", "path": "/"}) for n in range(3)]
    new = [_resource("aws:iam/role:Role", f"new-{n}", {"name": f"new-{n}", "path": "/"}) for n in range(3)]
    text = diff_plans(_plan(*old), _plan(*new))
    assert text.splitlines()[0] == "stack dev: 0 to add, 0 to change, 0 to replace, 0 to delete, 3 to rename"
    assert "=> aws:iam/role:Role  old-0 -> new-0" in text and "\n+ " not in text and "\n- " not in text
    # Other inputs changed as well: not a rename.
    changed = [_resource("aws:iam/role:Role", "new-0", {"name": "new-0", "path": "/other/"})]
    text = diff_plans(_plan(old[0]), _plan(*changed))
    assert "1 to add" in text and "1 to delete" in text and "=>" not in text


def _group(name: str, delete_first: bool, instance: str) -> dict[str, Any]:
    resource = _resource("aws:eks/nodeGroup:NodeGroup", f"{name}-nodes",
                         {"instanceTypes": [instance], "labels": {"gtp.dev/node-group": name}})
    resource["options"]["deleteBeforeReplace"] = delete_first
    return resource


def test_destructive_changes_come_first_with_what_runs_there() -> None:
    base = {**_plan(_group("h100", True, "p5.48xlarge"), _group("a100", False, "p4d.24xlarge")),
            "placements": {"h100": {"workloads": ["PyTorchJob t/pretrain Worker ×4"], "daemonsets": 6},
                           "a100": {"workloads": []}}}
    head = _plan(_group("h100", True, "p5e.48xlarge"), _group("a100", False, "p4de.24xlarge"))
    text = diff_plans(base, head)
    lines = text.splitlines()
    assert lines[1] == "destructive changes:"
    assert lines[2] == ("    +- aws:eks/nodeGroup:NodeGroup  a100-nodes  replace (instanceTypes[0])")
    h100 = lines.index("    +- aws:eks/nodeGroup:NodeGroup  h100-nodes  replace, DELETE BEFORE REPLACE "
                       "(instanceTypes[0])")
    assert "stops first" in lines[h100 + 1]
    assert lines[h100 + 2] == "        runs there now: PyTorchJob t/pretrain Worker ×4; 6 DaemonSet pod(s) per node"
    assert "        runs there now: no workload" in lines
    assert "deleted before the replacement is created" in text.split("destructive changes:", 1)[1].split("\n+- ", 1)[1]
    # An in-place change is not destructive.
    grown = _group("h100", True, "p5.48xlarge")
    grown["inputs"]["scalingConfig"] = {"maxSize": 9}
    assert "destructive" not in diff_plans(base, _plan(grown, _group("a100", False, "p4d.24xlarge")))


@pytest.mark.parametrize("type_", sorted(plan_diff.STATEFUL))
def test_deleting_a_data_holding_resource_says_what_is_lost(type_: str) -> None:
    text = diff_plans(_plan(_resource(type_, "r", {})), _plan())
    assert f"destructive changes:\n    - {type_}  r  delete\n        holds data: {plan_diff.STATEFUL[type_]}" in text


def test_every_data_holding_type_the_stacks_register_is_known() -> None:
    """STATEFUL covers the committed stacks' volumes, file systems, buckets, keys and repositories."""
    data = re.compile(r"(volume|Volume|fileSystem|FileSystem|bucket:Bucket|bucketV2|kms/key|ecr/repository|"
                      r"eks/cluster:Cluster|core/v1:Namespace)")
    types = {r["type"] for path in (ROOT / "tests" / "golden").glob("*/resources.json")
             for r in json.loads(path.read_text())["resources"] if r.get("custom", True)}
    assert {t for t in types if data.search(t)} - set(plan_diff.STATEFUL) == set()
    assert "aws:fsx/lustreFileSystem:LustreFileSystem" in types  # the pattern does find the stacks' types


def test_protected_and_retained_resources_are_marked() -> None:
    protected = _resource("aws:iam/role:Role", "r", {})
    protected["options"].update(protect=True, retainOnDelete=True)
    text = diff_plans(_plan(protected), _plan())
    assert "protected: `pulumi up` refuses to delete it" in text and "retainOnDelete: Pulumi forgets it" in text


def _objects(source: str, *objs: dict[str, Any]) -> list[Any]:
    from verify.render import ClusterObject

    return [ClusterObject(source, obj) for obj in objs]


def _daemonset(image: str, security: dict[str, Any], host_network: bool = False) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dp", "namespace": "gpu",
                                                                        "labels": {"chart": "x"}},
            "spec": {"template": {"spec": {"hostNetwork": host_network, "containers": [
                {"name": "ctr", "image": image, "securityContext": security},
                {"name": "sidecar", "image": image}]}}}}


def test_the_cluster_diff_per_release_names_images_rbac_security_and_pod_security() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "dp-role"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
    wider = {**role, "rules": [*role["rules"], {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "gpu", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    relaxed = {**namespace, "metadata": {"name": "gpu", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    old = _objects("chart vendor/charts/dp-1.0.0 release gpu/dp", role, _daemonset("reg.example/nv/dp:v1", {}),
                   {"kind": "ConfigMap", "metadata": {"name": "gone", "namespace": "gpu"}})
    new = _objects("chart vendor/charts/dp-1.1.0 release gpu/dp", wider,
                   {**_daemonset("reg.example/nv/dp:v2", {"privileged": True}, host_network=True),
                    "metadata": {"name": "dp", "namespace": "gpu", "labels": {"chart": "y"}}},
                   {"kind": "Service", "metadata": {"name": "new", "namespace": "gpu"}})
    lines = plan_diff.cluster_changes(old + _objects("stack", namespace), new + _objects("stack", relaxed))
    assert lines == [
        "stack:",
        '    ~ pod security  Namespace gpu  pod-security.kubernetes.io/enforce: "restricted" -> "privileged"',
        "release gpu/dp (vendor/charts/dp-1.0.0 -> vendor/charts/dp-1.1.0):",
        "    + Service  gpu/new",
        "    - ConfigMap  gpu/gone",
        "    + rbac  ClusterRole dp-role  apiGroups \"\" resources pods verbs list",
        "    ~ image  DaemonSet gpu/dp  nv/dp: v1 -> v2 (containers ctr, sidecar)",
        "    ~ security  DaemonSet gpu/dp  container ctr securityContext.privileged: (absent) -> true",
        "    ~ security  DaemonSet gpu/dp  pod hostNetwork: false -> true",
        "    ~ other  DaemonSet gpu/dp: metadata.labels.chart",
    ]


def test_a_moved_image_shows_both_references_and_an_unchanged_cluster_shows_nothing() -> None:
    old = _objects("stack", _daemonset("reg.example/nv/dp:v1", {}))
    new = _objects("stack", _daemonset("other.example/nv/dp:v1", {}))
    assert plan_diff.cluster_changes(old, new) == [
        "stack:", '    ~ image  DaemonSet gpu/dp  "reg.example/nv/dp:v1" -> "other.example/nv/dp:v1" '
                  "(containers ctr, sidecar)"]
    assert plan_diff.cluster_changes(old, old) == []


@pytest.mark.parametrize(("source", "group"), [
    ("chart vendor/charts/keda-2.20.2 release keda/keda", "release keda/keda"),
    ("operator build/kueue/prod/kueue-v0.19.2-a1cb6e4f252a.yaml", "operator kueue"),
    ("operator vendor/operators/training-operator-v1.9.4.yaml", "operator training-operator"),
    ("operator build/offline/prod/training-operator-v1.9.5-0ab3f17c9ead.yaml", "operator training-operator"),
    ("stack", "stack"),
])
def test_cluster_objects_are_compared_per_release_and_operator_across_versions(source: str, group: str) -> None:
    assert plan_diff.cluster_group(source) == group


def test_placements_come_from_the_scheduling_simulation() -> None:
    """A real simulation: prod's pre-training lands on the reserved h100 group."""
    from verify import render as cluster
    from verify import simulate

    plan = plan_stack("prod")
    found = plan_diff.placements(simulate.simulate(plan, cluster.render_cluster(plan)))
    assert "PyTorchJob training-prod/gpt-pretrain Worker ×4" in found["h100"]["workloads"]
    assert found["h100"]["daemonsets"] > 0 and "system" in found


def test_markdown_format_for_the_pr_comment() -> None:
    base = {**_plan(_group("h100", True, "p5.48xlarge")), "placements": {"h100": {"workloads": ["W ×2"]}}}
    head = _plan(_group("h100", True, "p5e.48xlarge"))
    text = diff_plans(base, head, fmt="markdown")
    assert text.startswith("**stack dev**: 0 to add, 0 to change, 1 to replace, 0 to delete\n")
    assert "**Destructive changes** :warning:\n\n- `+- aws:eks/nodeGroup:NodeGroup  h100-nodes  replace, DELETE" in text
    assert "\n  - runs there now: W ×2\n" in text
    # a replacement reads as a change (`!`), not an addition (`+`), in GitHub's diff colours
    assert "**Resources**\n\n````diff\n! +- aws:eks/nodeGroup:NodeGroup  h100-nodes" in text
    assert "````" not in diff_plans(base, head)


def test_sections_render_in_the_order_of_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new section (cost) is one function appended to SECTIONS."""
    monkeypatch.setattr(plan_diff, "SECTIONS", [*plan_diff.SECTIONS, lambda d: plan_diff.Section("cost", ["$1/h"])])
    assert diff_plans(_plan(), _plan()).endswith("cost:\n    $1/h")


def test_cli_prints_one_progress_line_per_plan(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(plan_diff, "plan_tree", lambda tree, stack, out: {**_plan(), "cluster": []})
    assert plan_diff.main(["--stack", "dev", "--base", "HEAD", "--format", "markdown"]) == 0
    captured = capsys.readouterr()
    progress = captured.err.splitlines()
    assert len(progress) == 2 and progress[0].startswith("plan-diff: dev at HEAD: 0 resources, 0 cluster objects in")
    assert progress[1].startswith("plan-diff: dev at the working tree: ")
    assert captured.out.startswith("**stack dev**")


def test_the_stacks_to_diff_are_every_stack_file_at_base_and_in_the_tree(tmp_path: Path) -> None:
    assert plan_diff.stacks_to_diff("HEAD") == sorted(p.name[7:-5] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    (tmp_path / "stacks").mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "--quiet"], cwd=tmp_path, check=True)
    (tmp_path / "stacks" / "Pulumi.gone.yaml").write_text("config: {}\n")
    (tmp_path / "stacks" / "README.md").write_text("not a stack\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "base"], cwd=tmp_path, check=True)
    (tmp_path / "stacks" / "Pulumi.gone.yaml").unlink()
    (tmp_path / "stacks" / "Pulumi.new-site.yaml").write_text("config: {}\n")
    assert plan_diff.stacks_to_diff("HEAD", root=tmp_path) == ["gone", "new-site"]


def test_a_named_kubernetes_object_is_deleted_before_its_replacement() -> None:
    """pulumi-kubernetes deletes first when the replacement keeps the object's fixed name and namespace."""
    def job(name: str, image: str) -> dict[str, Any]:
        return _resource("kubernetes:batch/v1:Job", "j", {"metadata": {"name": name, "namespace": "t"},
                                                         "spec": {"template": {"spec": {"image": image}}}})

    text = diff_plans(_plan(job("check", "a")), _plan(job("check", "b")))
    assert "kubernetes:batch/v1:Job  j  replace, DELETE BEFORE REPLACE (spec.template.spec.image)" in text
    assert "(a Kubernetes object's fixed name)" in text
    renamed = diff_plans(_plan(job("check", "a")), _plan(job("check-2", "b")))
    assert "DELETE BEFORE REPLACE" not in renamed and "the replacement is created first" in renamed


def test_what_depends_on_a_delete_first_replacement_is_deleted_first_too() -> None:
    """The engine deletes every replaced dependent of a delete-first replacement before it (`make up-test`: the
    auto-named readiness Job went first because its fixed-name ConfigMap did); an unrelated replacement and a
    dependent that is only updated keep their own order."""
    def script(data: str) -> dict[str, Any]:
        return _resource("kubernetes:core/v1:ConfigMap", "script", {"metadata": {"name": "gate", "namespace": "t"},
                                                                   "data": {"check": data}})

    def job(name: str, image: str, depends: bool) -> dict[str, Any]:
        job = _resource("kubernetes:batch/v1:Job", name, {"metadata": {"namespace": "t"},
                                                          "spec": {"template": {"spec": {"image": image}}}})
        job["dependsOn"] = [URN.format("kubernetes:core/v1:ConfigMap", "script")] if depends else []
        return job

    def quota(limit: str) -> dict[str, Any]:
        found = _resource("kubernetes:core/v1:ResourceQuota", "quota", {"metadata": {"name": "q", "namespace": "t"},
                                                                        "spec": {"hard": {"pods": limit}}})
        found["dependsOn"] = [URN.format("kubernetes:core/v1:ConfigMap", "script")]
        return found

    diff = plan_diff.PlanDiff(_plan(script("a"), job("gate", "a", True), job("other", "a", False), quota("1")),
                              _plan(script("b"), job("gate", "b", True), job("other", "b", False), quota("2")))
    urn = URN.format
    assert set(diff.replaced) == {urn("kubernetes:core/v1:ConfigMap", "script"), urn("kubernetes:batch/v1:Job", "gate"),
                                  urn("kubernetes:batch/v1:Job", "other")}
    assert diff.delete_first == {
        urn("kubernetes:core/v1:ConfigMap", "script"): "a Kubernetes object's fixed name",
        urn("kubernetes:batch/v1:Job", "gate"): "it depends on script, which is deleted first"}
    text = diff_plans(_plan(script("a"), job("gate", "a", True)), _plan(script("b"), job("gate", "b", True)))
    assert "kubernetes:batch/v1:Job  gate  replace, DELETE BEFORE REPLACE (spec.template.spec.image)" in text


def test_listing_stacks_at_a_base_without_stacks_or_an_unknown_ref(tmp_path: Path) -> None:
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "--quiet"], cwd=tmp_path, check=True)
    (tmp_path / "README").write_text("x\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "base"], cwd=tmp_path, check=True)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.first.yaml").write_text("config: {}\n")
    assert plan_diff.stacks_to_diff("HEAD", root=tmp_path) == ["first"]
    with pytest.raises(subprocess.CalledProcessError):
        plan_diff.stacks_to_diff("no-such-ref", root=tmp_path)
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--list-stacks", "--base", "no-such-ref"],
                            cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 2 and "can't read stacks/ at 'no-such-ref'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_base_is_planned_once_per_git_tree_and_tool_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    """plan-diff plans BASE once per tree (verify/plan_cache.py `tree_key`); the head is planned on every run."""
    monkeypatch.setenv("GTP_PLAN_CACHE", str(tmp_path / "cache"))
    planned: list[str] = []

    def plan_tree(tree: Path, stack: str, out: Path) -> dict:
        planned.append("head" if tree == plan_diff.ROOT else "base")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}
        return {**_plan(), "cluster": [ClusterObject("stack", pod)]}

    monkeypatch.setattr(plan_diff, "plan_tree", plan_tree)
    assert plan_diff.main(["--stack", "dev", "--base", "HEAD"]) == 0
    first = capsys.readouterr()
    assert plan_diff.main(["--stack", "dev", "--base", "HEAD"]) == 0
    second = capsys.readouterr()
    assert planned == ["base", "head", "head"]
    assert "read from the plan cache" in second.err and second.out == first.out
    assert plan_diff.main(["--stack", "dev", "--base", "HEAD~1"]) == 0  # another tree: planned
    assert planned[-2:] == ["base", "head"]
    from verify import plan_cache

    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    same = plan_cache.tree_key(tree, "dev")
    monkeypatch.setattr(plan_cache, "tool_identity", lambda: {"helm": "another helm"})
    assert plan_cache.tree_key(tree, "dev") != same, "a base planned with other tools was reused"


# --- Issue 41 major 4: a new image on a running job --------------------------------------------------------------

def _with_new_image(plan: dict[str, Any]) -> dict[str, Any]:
    changed = json.loads(json.dumps(plan))
    for resource in changed["resources"]:
        if resource["type"] == "docker:index/image:Image":
            resource["inputs"]["imageName"] = str(resource["inputs"].get("imageName")) + "-next"
    return changed


def test_a_new_image_restarts_prods_running_gangs_and_says_so_under_destructive_changes() -> None:
    """prod's image reference is computed (known at `up`), so the jobs' own inputs don't change: the diff follows
    the image build to every job built from it, and says what Kueue does to a running one."""
    from verify.plan_diff import destructive_section, template_changes

    base = json.loads(gtp_plan.render(plan_stack("prod"))[0])
    diff = PlanDiff(base, _with_new_image(base))
    changes = template_changes(diff)
    assert {diff.new[urn]["inputs"]["kind"] for urn in changes} == {"PyTorchJob", "TrainJob"}
    # The TrainJob carries the image itself (workload_kinds/trainjob.py trainjob_body: a runtime-only change left
    # the running TrainJob untouched in `make cluster-test`'s day two).
    assert [change.why for change in changes.values()] == ["new image", "new image"]
    assert all(change.restarts for change in changes.values())
    text = "\n".join(destructive_section(diff).lines)
    assert "job-gpt-pretrain-pytorchjob  running job restarts (new image)" in text
    assert "NoMatchingWorkload" in text and "resume from the last complete checkpoint" in text


def test_a_new_image_on_devs_scaled_job_reaches_the_next_job_only() -> None:
    from verify.plan_diff import destructive_section, resources_section

    base = json.loads(gtp_plan.render(plan_stack("dev"))[0])
    diff = PlanDiff(base, _with_new_image(base))
    assert destructive_section(diff) is None or "ScaledJob" not in "\n".join(destructive_section(diff).lines)
    text = "\n".join(resources_section(diff).lines)
    assert "ScaledJob  scaling-mnist-scaledjob  (new image, known at up)" in text
    assert "running jobs: running Jobs finish on the template they started with" in text


def _job(kind: str, image: str, queue: bool = True) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "training"} if queue else {}
    template = {"spec": {"containers": [{"name": "pytorch", "image": image}]}}
    return _resource(f"kubernetes:kubeflow.org/v1:{kind}", "job", {
        "apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "job", "labels": labels},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": 1, "template": template}}}})


def test_a_changed_container_restarts_a_queued_job_and_is_unknown_without_kueue() -> None:
    from verify.plan_diff import destructive_section, template_changes

    diff = PlanDiff(_plan(_job("PyTorchJob", "repo@sha256:" + "a" * 64)),
                    _plan(_job("PyTorchJob", "repo@sha256:" + "b" * 64)))
    [change] = template_changes(diff).values()
    assert (change.why, change.restarts) == ("pod template", True)
    assert "running job restarts (pod template)" in "\n".join(destructive_section(diff).lines)
    unqueued = PlanDiff(_plan(_job("PyTorchJob", "a", queue=False)), _plan(_job("PyTorchJob", "b", queue=False)))
    [change] = template_changes(unqueued).values()
    assert change.restarts is None and "not known here" in change.effect
    # Kueue compares the pod counts too (kueue v0.19.2 pkg/util/equality/podset.go:55-57): a changed replica count
    # of a queued running job stops and requeues it, so it is no harmless update.
    same = _job("PyTorchJob", "a")
    more = json.loads(json.dumps(same))
    more["inputs"]["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    resized = PlanDiff(_plan(same), _plan(more))
    [change] = template_changes(resized).values()
    assert (change.why, change.restarts) == ("pod count", True)
    assert "running job restarts (pod count)" in "\n".join(destructive_section(resized).lines)
    # Only what Kueue compares: a label of the job is an ordinary update.
    labelled = json.loads(json.dumps(same))
    labelled["inputs"]["metadata"]["labels"]["team"] = "ml"
    assert template_changes(PlanDiff(_plan(same), _plan(labelled))) == {}


def test_the_scaled_job_rolls_out_gradually() -> None:
    scaled = plan_stack("dev").one("kubernetes:keda.sh/v1alpha1:ScaledJob")
    assert scaled.inputs["spec"]["rollout"] == {"strategy": "gradual"}


def test_a_changed_trainer_block_replaces_the_trainjob_deleting_it_first() -> None:
    """Trainer v2.3.0's CRD makes a TrainJob's `spec.trainer` immutable: an update would be refused by the API server
    and fail `up`, so the kind replaces it (replace_on_changes, delete-before-replace), and plan-diff says so."""
    base = json.loads(gtp_plan.render(plan_stack("prod"))[0])
    head = json.loads(json.dumps(base))
    trainjob = next(r for r in head["resources"] if r["type"].endswith(":TrainJob"))
    trainjob["inputs"]["spec"]["trainer"]["numNodes"] = 3
    diff = PlanDiff(base, head)
    assert diff.replaced == {trainjob["urn"]: ["spec.trainer.numNodes"]}
    assert diff.delete_first[trainjob["urn"]] == "deleteBeforeReplace option"


# --- Issue 44 item 2: consequences a reviewer must see ------------------------------------------------------------

def _with_new_content(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan after a Dockerfile-only change: the image build's own inputs stay, its content tag moves."""
    changed = json.loads(json.dumps(plan))
    for resource in changed["resources"]:
        if resource["type"] == "gtp:image:TrainingImage":
            resource["inputs"]["contentTag"] = "ctx-0123456789abcdef"
    return changed


def test_the_plan_records_the_known_part_of_the_image_name() -> None:
    """The image's name and digest are `<computed>` until `up`; its content tag is known when the program runs, and
    it is what the image build tags (components/image_spec.py `tag_for`)."""
    from components import image_spec

    plan = plan_stack("dev")
    [component] = [r for r in plan.resources if r.type == "gtp:image:TrainingImage"]
    [image] = [r for r in plan.resources if r.type == "docker:index/image:Image"]
    assert image.inputs["imageName"] == "<computed>"
    build = image.inputs["build"]
    tag = image_spec.tag_for(Path(build["context"]), build["args"], build["platform"])
    assert component.inputs == {"contentTag": tag}


def test_a_dockerfile_only_change_shows_the_new_tag_and_every_job_that_restarts() -> None:
    from verify.plan_diff import destructive_section, template_changes

    base = json.loads(gtp_plan.render(plan_stack("prod"))[0])
    diff = PlanDiff(base, _with_new_content(base))
    changes = template_changes(diff)
    assert {diff.new[urn]["inputs"]["kind"]: change.why for urn, change in changes.items()} == {
        "PyTorchJob": "new image", "TrainJob": "new image"}
    text = diff_plans(base, _with_new_content(base))
    assert 'inputs.contentTag: "' in text and '-> "ctx-0123456789abcdef"' in text
    assert "job-gpt-pretrain-pytorchjob  running job restarts (new image)" in "\n".join(destructive_section(diff).lines)


def test_removing_an_operator_says_which_crds_go_and_that_every_object_of_them_goes_too() -> None:
    from verify import render as gtp_cluster

    plan = plan_stack("prod")
    base = {**json.loads(gtp_plan.render(plan)[0]), "cluster": gtp_cluster.render_cluster(plan)}
    [trainer] = [r for r in base["resources"] if r["type"] == "kubernetes:yaml/v2:ConfigFile"
                 and "trainer" in r["inputs"]["file"]]
    source = f"operator {trainer['inputs']['file']}"
    head = {**base, "resources": [r for r in base["resources"] if r["urn"] != trainer["urn"]],
            "cluster": [item for item in base["cluster"] if item.source != source]}
    text = diff_plans(base, head)
    assert (f"- kubernetes:yaml/v2:ConfigFile  {trainer['name']}  delete\n        deletes 4 CustomResource"
            "Definition(s): clustertrainingruntimes.trainer.kubeflow.org, jobsets.jobset.x-k8s.io") in text
    assert "the API server then deletes every ClusterTrainingRuntime, JobSet, TrainingRuntime, TrainJob in the " \
           "cluster, those teams created included" in text
    # A CRD the new plan still has (another manifest ships it) takes nothing with it.
    crds = [item for item in base["cluster"] if item.source == source and item.kind == "CustomResourceDefinition"]
    kept = {**head, "cluster": [*head["cluster"], *(ClusterObject("stack", item.obj) for item in crds)]}
    assert "CustomResourceDefinition(s)" not in diff_plans(base, kept)


def _rules(*rules: dict[str, Any]) -> dict[str, Any]:
    return _resource("kubernetes:helm.sh/v3:Release", "prometheus", {"values": {"groups": [
        {"name": "gtp-training", "rules": list(rules)}]}})


CHECKPOINT = {"alert": "TrainingCheckpointTooOld", "expr": "a > 1", "labels": {"workload": "a"}}
CHECKPOINT_B = {"alert": "TrainingCheckpointTooOld", "expr": "b > 1", "labels": {"workload": "b"}}
PENDING = {"alert": "KueueGangPendingTooLong", "expr": "c > 0", "for": "30m"}


def test_alert_rules_are_matched_by_alert_and_labels_so_a_removal_is_one_line() -> None:
    text = diff_plans(_plan(_rules(CHECKPOINT, CHECKPOINT_B, PENDING)), _plan(_rules(CHECKPOINT_B, PENDING)))
    changed = [line for line in text.splitlines() if line.startswith("    inputs.")]
    assert changed == [
        "    inputs.values.groups[gtp-training].rules[TrainingCheckpointTooOld{workload=a}]: item removed"]
    # reordering is no change at all
    assert "0 to change" in diff_plans(_plan(_rules(CHECKPOINT, PENDING)), _plan(_rules(PENDING, CHECKPOINT)))


def test_selector_values_are_sets() -> None:
    def selector(*values: str) -> dict[str, Any]:
        return _resource("kubernetes:apps/v1:Deployment", "d", {"spec": {"template": {"spec": {"affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "zone", "operator": "In", "values": list(values)}]}]}}}}}}})

    assert "0 to change" in diff_plans(_plan(selector("a", "b")), _plan(selector("b", "a")))
    text = diff_plans(_plan(selector("a", "b")), _plan(selector("a", "c")))
    assert "1 to change" in text and "matchExpressions[zone].values" in text
