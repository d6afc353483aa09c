"""Benchmark stacks (issue 9) and the policy gate of the plan (issue 8): weakened stacks fail offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from stack_config import ConfigError
from tests.conftest import ROOT
from tools import bench_stack
from verify import plan as gtp_plan
from verify.validate import Report, policy_facts, run_policy_pack

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "ab" * 32
NOW = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch copy of the project files a plan reads."""
    for path in ("Pulumi.yaml", "__main__.py"):
        shutil.copy2(ROOT / path, tmp_path / path)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    for link in ("gtp", "components", "images", "policy"):
        (tmp_path / link).symlink_to(ROOT / link)
    return tmp_path


@pytest.mark.program
def test_generated_bench_stack_plans_with_ttl_tags_everywhere_and_passes_ephemeral_policies(project: Path) -> None:
    path = bench_stack.create("sweep", 6, IMAGE, root=project, now=NOW)
    document = yaml.safe_load(path.read_text())
    assert document["config"]["gtp:lifecycle"]["ttlHours"] == 6
    assert document["config"]["gtp:lifecycle"]["createdAt"] == "2026-12-02T13:00:00Z"
    plan = gtp_plan.run("bench-sweep", root=project)
    provider = plan.one("pulumi:providers:aws")
    tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert tags["gtp:ttl-hours"] == "6" and tags["gtp:expires-at"] == "2026-12-02T19:00:00Z"
    aws_resources = [r for r in plan.resources if r.custom and r.type.startswith("aws:")]
    assert aws_resources and all(r.provider == provider.urn for r in aws_resources)
    for template in plan.by_type("aws:ec2/launchTemplate:LaunchTemplate"):
        for spec in template.inputs["tagSpecifications"]:
            assert spec["tags"]["gtp:ttl-hours"] == "6"
    assert not any(r.options["protect"] for r in plan.resources)
    assert not plan.by_type("docker:index/image:Image")  # reuses the digest, no rebuild
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    # Two nodes: Workers only (a Master would make training-operator inject a non-restricted init container).
    assert set(job.inputs["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    container = job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert container["args"][container["args"].index("-m") + 1] == "trainer.bench"
    assert "--sizes=1M,16M,128M,1G,4G" in container["args"] and container["args"][-1] == "<computed>"  # s3 prefix
    assert plan.one("aws:s3/bucket:Bucket").inputs["forceDestroy"] is True
    assert all(k.inputs["deletionWindowInDays"] == 7 for k in plan.by_type("aws:kms/key:Key"))
    report = Report()
    run_policy_pack(plan, report)
    assert report.errors == []
    assert policy_facts(plan)["ephemeral"] is True
    # Would it run? The bench cluster rendered and simulated like the committed stacks (issue 13).
    from verify.render import render_cluster
    from verify.simulate import findings, simulate

    simulation = simulate(plan, render_cluster(plan))
    assert findings(simulation) == []
    checks = simulation["checks"]
    assert all(checks[name]["total"] > 0 for name in ("admitted", "scheduled", "scale-from-zero", "volumes writable",
                                                      "queued"))
    # Kueue admission with quotas equal to what the bench node group provides (issue 17).
    from tests.workloads.test_workloads_map import assert_queue_quota_is_derived

    assert_queue_quota_is_derived(plan)


def test_bench_stack_cost_cap_and_name_are_validated(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"lifecycle\.maxGpuNodeHours: GPU groups may run 60 node-hours"):
        bench_stack.create("long", 30, IMAGE, root=project, now=NOW)
    assert not (project / "stacks" / "Pulumi.bench-long.yaml").exists()
    with pytest.raises(ValueError, match="must be a short lowercase DNS label"):
        bench_stack.create("Big_One", 2, IMAGE, root=project, now=NOW)
    with pytest.raises(ConfigError, match=r"image\.reference: 'repo:tag' must reference an image by digest"):
        bench_stack.create("tagged", 2, "repo:tag", root=project, now=NOW)


@pytest.mark.program
def test_a_weakened_prod_stack_fails_the_plan_with_policy_names(project: Path) -> None:
    path = project / "stacks" / "Pulumi.prod.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["gtp:cluster"]["endpointPublicAccess"] = True
    document["config"]["gtp:cluster"]["publicAccessCidrs"] = ["198.51.100.0/24"]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "prod", "--stack-file", str(path),
                             "--out", str(project / "out"), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "policy eks-private-endpoint-in-production" in result.stderr


def test_an_unprotected_production_stack_fails_the_policy_pack(project: Path) -> None:
    plan = gtp_plan.run("prod", root=project)
    plan.one("aws:eks/cluster:Cluster").options["protect"] = False
    report = Report()
    run_policy_pack(plan, report)
    assert any(line.startswith("policy production-protect-stateful") for line in report.errors), report.errors


@pytest.mark.program
def test_plan_cli_writes_policy_facts_that_the_pack_cli_accepts(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "prod", "--out", str(out), "--quiet"],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    facts = json.loads((out / "prod" / "policy-facts.json").read_text())
    assert facts == {"stack": "prod", "ephemeral": False, "production": True, "registry": None,
                     "requiredTags": ["gtp:lifecycle", "gtp:project", "gtp:stack"], "signedDigests": []}
    pack_config = json.loads((out / "prod" / "policy-pack-config.json").read_text())
    assert pack_config["eks-private-endpoint-in-production"]["production"] is True
    check = subprocess.run([sys.executable, "-m", "policy.gtp_policy.offline", str(out / "prod" / "resources.json"),
                            "--facts", str(out / "prod" / "policy-facts.json")], cwd=ROOT, capture_output=True,
                           text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_each_bench_stack_gets_its_own_vpc_cidr_clear_of_every_other_stack(project: Path) -> None:
    # Before: every bench stack got the template's 10.60.0.0/16, on the same Transit Gateway.
    first = yaml.safe_load(bench_stack.create("one", 2, IMAGE, root=project, now=NOW).read_text())
    second = yaml.safe_load(bench_stack.create("two", 2, IMAGE, root=project, now=NOW).read_text())
    cidrs = bench_stack.stack_vpc_cidrs(project)
    assert first["config"]["gtp:network"]["vpcCidr"] == str(cidrs["bench-one"])
    assert cidrs["bench-one"] != cidrs["bench-two"] and bench_stack.overlapping_vpcs(cidrs) == []
    assert cidrs["bench-two"].subnet_of(bench_stack.BENCH_VPC_POOL)
    assert second["config"]["gtp:network"]["vpcCidr"] == str(cidrs["bench-two"])
    # A name whose derived block is taken moves to the next free one.
    taken = {"other": __import__("ipaddress").ip_network(bench_stack.bench_vpc_cidr("three", {}))}
    assert bench_stack.bench_vpc_cidr("three", taken) != str(taken["other"])


def test_overlapping_vpc_cidrs_among_the_repositorys_stacks_are_refused(project: Path) -> None:
    dev = project / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("vpcCidr: 10.40.0.0/16", "vpcCidr: 10.20.0.0/16"))
    with pytest.raises(ValueError, match=r"overlapping VPC CIDRs on one Transit Gateway: dev \(10\.20\.0\.0/16\) and "
                                         r"prod \(10\.20\.0\.0/16\)"):
        bench_stack.create("four", 2, IMAGE, root=project, now=NOW)
    assert bench_stack.overlapping_vpcs(bench_stack.stack_vpc_cidrs(ROOT)) == []
