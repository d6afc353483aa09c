"""The readiness gate: expectations derived from config, the check's decision on fake node lists, the Job spec."""

from __future__ import annotations

import json

import pytest

from components import gpu_readiness_check as check
from components.gpu_readiness import cluster_role_rules, gate_files, job_spec
from stages.gpu import readiness_expectations


def node(name, labels, allocatable, ready=True):
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def h100(name, gpus="8", efa="32", ready=True):
    return node(name, {"gtp.dev/node-group": "h100"}, {"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": efa}, ready)


def test_prod_expectations_whole_gpus_and_efa_for_min_size(config_of):
    expectations = readiness_expectations(config_of("prod"))
    assert expectations["timeoutSeconds"] == 1800
    assert expectations["groups"] == [{"name": "h100", "selector": {"gtp.dev/node-group": "h100"}, "minNodes": 2,
                                       "resources": {"nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 64}}]
    assert [entry["name"] for entry in expectations["skipped"]] == ["a100"]
    assert "minSize is 0" in expectations["skipped"][0]["reason"]


def test_edge_expectations_are_whole_gpus_on_existing_nodes(config_of):
    expectations = readiness_expectations(config_of("edge"))
    assert expectations["groups"] == [{"name": "orin", "selector": {"nvidia.com/gpu.present": "true"},
                                       "minNodes": 1, "resources": {"nvidia.com/gpu": 1}}]


def test_shared_slices_are_gpus_times_replicas_times_min_size(config_of):
    def edit(raw):
        # EFA off: g6.12xlarge has one interface (issue 41), which is not what this test counts
        raw["gpuNodeGroups"]["g6"].update(minSize=2, instanceTypes=["g6.12xlarge"], efa=False)
        raw["gpu"]["sharing"]["replicas"] = 3

    groups = readiness_expectations(config_of("dev", edit))["groups"]
    assert groups[0]["resources"] == {"nvidia.com/gpu.shared": 4 * 3 * 2}


def test_dev_group_at_min_zero_is_skipped(config_of):
    expectations = readiness_expectations(config_of("dev"))
    assert expectations["groups"] == []
    assert check.missing([], expectations) == []
    assert check.skipped_lines(expectations) == [
        "node group 'g6' not checked: minSize is 0: no node is guaranteed to exist (the autoscaler adds nodes "
        "when a job asks)"]


def test_check_ready_when_capacity_is_advertised(config_of):
    expectations = readiness_expectations(config_of("prod"))
    assert check.missing([h100("n1"), h100("n2"), node("sys", {"gtp.dev/role": "system"}, {})], expectations) == []


def test_check_names_missing_capacity_and_group(config_of):
    expectations = readiness_expectations(config_of("prod"))
    problems = check.missing([h100("n1"), h100("n2", gpus="0", efa="0")], expectations)
    assert problems == [
        "node group 'h100' (gtp.dev/node-group=h100): nvidia.com/gpu is 8 of 16 expected on 2 Ready node(s) "
        "(minSize 2)",
        "node group 'h100' (gtp.dev/node-group=h100): vpc.amazonaws.com/efa is 32 of 64 expected on 2 Ready node(s) "
        "(minSize 2)",
    ]


def test_check_ignores_not_ready_and_other_nodes(config_of):
    expectations = readiness_expectations(config_of("prod"))
    nodes = [h100("n1"), h100("n2", ready=False), node("x", {"gtp.dev/node-group": "a100"}, {"nvidia.com/gpu": "8"})]
    problems = check.missing(nodes, expectations)
    assert len(problems) == 2
    assert all("on 1 Ready node(s)" in line for line in problems)


def test_check_counts_unreadable_quantities_as_zero():
    expectations = {"groups": [{"name": "g", "selector": {"k": "v"}, "minNodes": 1, "resources": {"r": 1}}]}
    assert check.missing([node("n", {"k": "v"}, {"r": "garbage"})], expectations) == [
        "node group 'g' (k=v): r is 0 of 1 expected on 1 Ready node(s) (minSize 1)"]


def test_check_main_times_out_with_the_missing_capacity(tmp_path, monkeypatch, capsys, config_of):
    expectations = readiness_expectations(config_of("prod"), timeout_seconds=0)
    path = tmp_path / "expectations.json"
    path.write_text(json.dumps(expectations))
    monkeypatch.setattr(check, "list_nodes", lambda: [h100("n1")])
    assert check.main(["check.py", str(path)]) == 1
    out = capsys.readouterr().out
    assert "GPU readiness gate failed after 0s" in out
    assert "nvidia.com/gpu is 8 of 16" in out


def test_check_main_succeeds(tmp_path, monkeypatch, config_of):
    path = tmp_path / "expectations.json"
    path.write_text(json.dumps(readiness_expectations(config_of("prod"), timeout_seconds=0)))
    monkeypatch.setattr(check, "list_nodes", lambda: [h100("n1"), h100("n2")])
    assert check.main(["check.py", str(path)]) == 0


def test_check_script_is_stdlib_only():
    imports = {line.split()[1].split(".")[0] for line in gate_files({})["check.py"].splitlines()
               if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "json", "os", "ssl", "sys", "time", "urllib", "typing"}


def test_job_spec_is_locked_down():
    spec = job_spec("registry/trainer@sha256:" + "0" * 64, "gpu-readiness-check", 900, [], "abc")
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["python3", "/gate/check.py", "/gate/expectations.json"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                                            "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["restartPolicy"] == "Never"
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] > 900
    assert spec["template"]["metadata"]["annotations"] == {"gtp.dev/check-sha256": "abc"}


def test_rbac_reads_nodes_only():
    assert cluster_role_rules() == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]


@pytest.mark.parametrize("timeout", [60, 7200])
def test_timeout_comes_from_config(config_of, timeout):
    def edit(raw):
        raw["gpu"]["readinessTimeoutSeconds"] = timeout

    assert readiness_expectations(config_of("prod", edit))["timeoutSeconds"] == timeout
