"""tools.destroy end to end with a fake `pulumi` on PATH and AWS mocked by moto: confirmation, the wall-clock
limit and its report, the control-plane log group EKS leaves behind, and the stack's region."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.conftest import ROOT
from tools import destroy as destroy_module

HERE = Path(__file__).parent


@pytest.fixture
def fake_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "pulumi"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fake_pulumi.py'} \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PULUMI_DIR", str(tmp_path))
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", "eu-west-1")):
        monkeypatch.setenv(key, value)

    def script(answers: dict[str, Any]) -> None:
        (tmp_path / "script.json").write_text(json.dumps(answers))

    def calls() -> list[list[str]]:
        path = tmp_path / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    script({})
    return script, calls


EXPORT = json.dumps({"deployment": {"resources": [
    {"urn": "urn:pulumi:dev::gtp::pulumi:providers:aws::default", "type": "pulumi:providers:aws", "custom": True},
    {"urn": "urn:pulumi:dev::gtp::gtp:cluster:Network$aws:ec2/vpc:Vpc::network-vpc", "type": "aws:ec2/vpc:Vpc",
     "custom": True},
    {"urn": "urn:pulumi:dev::gtp::aws:s3/bucket:Bucket::results", "type": "aws:s3/bucket:Bucket", "custom": True},
]}})


def test_without_yes_it_previews_and_a_wrong_answer_deletes_nothing(fake_pulumi, monkeypatch, capsys) -> None:
    _script, calls = fake_pulumi
    monkeypatch.setattr("builtins.input", lambda prompt: "prod")
    assert destroy_module.main(["dev", "--cwd", str(ROOT)]) == 1
    assert calls() == [["destroy", "--preview-only", "--non-interactive", "--stack", "dev"]]
    assert "not confirmed: nothing deleted" in capsys.readouterr().out


@mock_aws
def test_confirmed_destroy_deletes_the_log_group_eks_left_behind(fake_pulumi, monkeypatch, capsys) -> None:
    _script, calls = fake_pulumi
    monkeypatch.setattr("builtins.input", lambda prompt: "dev")
    # dev's stack file says us-west-2: the group (and the audit) must be looked for there, not in eu-west-1
    logs = boto3.client("logs", region_name="us-west-2")
    logs.create_log_group(logGroupName="/aws/eks/gtp-dev/cluster")
    assert destroy_module.main(["dev", "--cwd", str(ROOT)]) == 0, capsys.readouterr().out
    # preview, then the stack's outputs (where its bench results are, kept before anything is deleted), then destroy
    assert [call[:2] for call in calls()] == [["destroy", "--preview-only"], ["stack", "output"], ["destroy", "--yes"]]
    assert logs.describe_log_groups(logGroupNamePrefix="/aws/eks/gtp-dev")["logGroups"] == []
    out = capsys.readouterr().out
    assert "deleted log group /aws/eks/gtp-dev/cluster" in out and "no orphaned resources found" in out


def test_stack_region_comes_from_the_stack_file() -> None:
    assert destroy_module.stack_region("dev", str(ROOT)) == "us-west-2"
    assert destroy_module.stack_region("no-such-stack", str(ROOT)) is None


@mock_aws
@pytest.mark.slow
def test_wall_clock_limit_stops_the_destroy_and_reports_what_remains(fake_pulumi, capsys) -> None:
    script, calls = fake_pulumi
    script({"destroy": {"sleep": 60, "rc": 0}, "stack export": {"stdout": EXPORT, "rc": 0}})
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="gtp-dev-results", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_bucket_tagging(Bucket="gtp-dev-results", Tagging={"TagSet": [{"Key": "gtp:stack", "Value": "dev"}]})
    s3.put_object(Bucket="gtp-dev-results", Key="bench/result.json", Body=b"{}")
    assert destroy_module.main(["dev", "--yes", "--cwd", str(ROOT), "--timeout-minutes", "0.03"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: wall-clock limit reached; pulumi destroy stopped" in out
    assert "2 resource(s) remain in the stack's state:\n    aws:ec2/vpc:Vpc  network-vpc\n" \
           "    aws:s3/bucket:Bucket  results" in out
    assert "arn:aws:s3:::gtp-dev-results" in out  # the non-empty bucket is reported, not silently kept
    assert ["stack", "export", "--stack", "dev"] in calls()  # never --show-secrets
    assert not any("--show-secrets" in call for call in calls())


# --- an unreachable cluster (issue 14) -----------------------------------------------------------------------------

K8S_EXPORT = json.dumps({"deployment": {"resources": [
    {"urn": "urn:pulumi:bench-a::gtp::pulumi:providers:kubernetes::cluster-k8s", "type": "pulumi:providers:kubernetes",
     "custom": True},
    {"urn": "urn:pulumi:bench-a::gtp::gtp:gpu:NvidiaDevicePlugin$kubernetes:helm.sh/v3:Release::nvidia-device-plugin",
     "type": "kubernetes:helm.sh/v3:Release", "custom": True},
    {"urn": "urn:pulumi:bench-a::gtp::kubernetes:kubeflow.org/v1:PyTorchJob::job-pytorchjob",
     "type": "kubernetes:kubeflow.org/v1:PyTorchJob", "custom": True},
    {"urn": "urn:pulumi:bench-a::gtp::gtp:cluster:EksCluster$aws:eks/cluster:Cluster::eks-cluster",
     "type": "aws:eks/cluster:Cluster", "custom": True},
]}})
# What pulumi-kubernetes prints for each in-cluster resource when Configure could not reach the API
# (provider/pkg/provider/provider.go: kubeProvider.Delete and the Helm release's Delete).
UNREACHABLE_OUTPUT = (
    "Destroying (bench-a):\n"
    " -  kubernetes:kubeflow.org/v1:PyTorchJob job-pytorchjob deleting (0s) error: configured Kubernetes cluster is "
    "unreachable. If the cluster was deleted, you can remove this resource from Pulumi state by rerunning the "
    "operation with the PULUMI_K8S_DELETE_UNREACHABLE environment variable set to \"true\"\n"
    " -  kubernetes:helm.sh/v3:Release nvidia-device-plugin deleting (0s) error: can't delete Helm Release with "
    "unreachable cluster. Reason: \"unable to load schema information from the API server: Get "
    "\\\"https://4F2A.gr7.us-west-2.eks.amazonaws.com/openapi/v2\\\": dial tcp 10.60.3.4:443: i/o timeout\"\n")
REMAINING = ("3 resource(s) remain in the stack's state:\n"
             "    kubernetes:helm.sh/v3:Release  nvidia-device-plugin\n"
             "    kubernetes:kubeflow.org/v1:PyTorchJob  job-pytorchjob\n"
             "    aws:eks/cluster:Cluster  eks-cluster\n")


@mock_aws
def test_an_unreachable_cluster_stops_at_once_and_reports_exactly_what_remains(fake_pulumi, capsys) -> None:
    import time

    script, calls = fake_pulumi
    script({"destroy": {"progress": UNREACHABLE_OUTPUT, "rc": 255}, "stack export": {"stdout": K8S_EXPORT, "rc": 0},
            "record_env": ["PULUMI_K8S_DELETE_UNREACHABLE"]})
    started = time.monotonic()
    assert destroy_module.main(["bench-a", "--yes", "--cwd", str(ROOT), "--timeout-minutes", "5"]) == 1
    assert time.monotonic() - started < 60  # no retries, no backoff: retrying can't reach the API either
    out = capsys.readouterr().out
    assert [call for call in calls() if isinstance(call, list) and call[0] == "destroy"] == [
        ["destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", "bench-a"]]
    assert {"env": {"PULUMI_K8S_DELETE_UNREACHABLE": None}} in calls()  # never set without the flag
    assert "ERROR: the cluster's Kubernetes API is unreachable from here; pulumi destroy stopped" in out
    assert REMAINING in out
    assert "the Kubernetes provider said: -  kubernetes:kubeflow.org/v1:PyTorchJob job-pytorchjob deleting (0s) " \
           "error: configured Kubernetes cluster is unreachable." in out
    assert "rerun with --delete-unreachable (PULUMI_K8S_DELETE_UNREACHABLE=true drops its in-cluster objects from " \
           "the state), and first `pulumi state delete --stack bench-a <urn>` the 1 Helm release(s) above" in out


@mock_aws
@pytest.mark.slow
def test_an_api_that_times_out_is_stopped_at_the_wall_clock_limit_with_the_same_report(fake_pulumi, capsys) -> None:
    import time

    script, _calls = fake_pulumi
    script({"destroy": {"progress": UNREACHABLE_OUTPUT, "sleep": 120, "rc": 0},
            "stack export": {"stdout": K8S_EXPORT, "rc": 0}})
    started = time.monotonic()
    assert destroy_module.main(["bench-a", "--yes", "--cwd", str(ROOT), "--timeout-minutes", "0.05"]) == 1
    assert time.monotonic() - started < 60  # 3 s limit + Pulumi's graceful stop, not the 120 s the API hangs
    out = capsys.readouterr().out
    assert "ERROR: wall-clock limit reached; pulumi destroy stopped" in out
    assert REMAINING in out and "--delete-unreachable" in out


@mock_aws
def test_delete_unreachable_lets_the_destroy_of_a_gone_cluster_finish(fake_pulumi, capsys) -> None:
    script, calls = fake_pulumi
    script({"destroy": {"progress": UNREACHABLE_OUTPUT, "rc": 255, "when_env": {
        "PULUMI_K8S_DELETE_UNREACHABLE=true": {"stdout": "Resources:\n    - 4 deleted\n", "rc": 0}}},
        "record_env": ["PULUMI_K8S_DELETE_UNREACHABLE"]})
    assert destroy_module.main(["bench-a", "--yes", "--cwd", str(ROOT), "--delete-unreachable"]) == 0
    assert {"env": {"PULUMI_K8S_DELETE_UNREACHABLE": "true"}} in calls()
    assert "[bench-a] destroyed after 1 attempt(s)" in capsys.readouterr().out


@pytest.mark.program
def test_the_program_leaves_delete_unreachable_to_the_environment() -> None:
    """An explicit provider input would override PULUMI_K8S_DELETE_UNREACHABLE (pulumi-kubernetes Configure)."""
    from tests.conftest import plan_stack

    provider = plan_stack("dev").one("pulumi:providers:kubernetes")
    assert "deleteUnreachable" not in provider.inputs


# --- bench results outlive the stack (issue 14) --------------------------------------------------------------------

def _bench_bucket() -> Any:
    s3 = boto3.client("s3", region_name="eu-west-1")
    for bucket in ("gtp-bench-a-artifacts", "gtp-results-archive"):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    for key, body in (("bench-a/bench/run-1.json", {"kind": "bench", "world_size": 2}),
                      ("bench-a/bench/sweep/run-2.json", {"kind": "bench", "world_size": 4}),
                      ("bench-a/checkpoints/step-100/model.pt", "weights"),
                      ("bench-b/bench/other.json", {"kind": "bench"})):
        s3.put_object(Bucket="gtp-bench-a-artifacts", Key=key, Body=json.dumps(body).encode())
    return s3


OUTPUTS = json.dumps({"artifactsBucket": "gtp-bench-a-artifacts", "kubeconfig": "[secret]"})


@mock_aws
def test_bench_results_are_kept_before_the_destroy_locally_and_in_an_archive_bucket(fake_pulumi, tmp_path,
                                                                                     capsys) -> None:
    from tools import bench_report

    script, calls = fake_pulumi
    # the destroy fails: the results were kept before it ran all the same
    # (a bench stack is ephemeral: its bucket is force_destroy, so the bench results left in it don't stop the destroy)
    script({"stack output": {"stdout": OUTPUTS, "rc": 0}, "destroy": {"stdout": "error: AccessDenied", "rc": 1},
            "stack export": {"stdout": json.dumps({"deployment": {"resources": [{
                "type": "aws:s3/bucket:Bucket", "id": "gtp-bench-a-artifacts",
                "outputs": {"bucket": "gtp-bench-a-artifacts", "forceDestroy": True}}]}}), "rc": 0}})
    s3 = _bench_bucket()
    kept = tmp_path / "kept"
    assert destroy_module.main(["bench-a", "--yes", "--cwd", str(ROOT), "--keep-results", str(kept),
                                "--results-archive", "s3://gtp-results-archive/bench"]) == 1
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*.json")) == [
        "bench-a/run-1.json", "bench-a/sweep/run-2.json"]
    archived = s3.list_objects_v2(Bucket="gtp-results-archive")["Contents"]
    assert sorted(o["Key"] for o in archived) == ["bench/bench-a/run-1.json", "bench/bench-a/sweep/run-2.json"]
    # kept, the non-empty bucket's force_destroy read from the state, then destroyed
    assert [call[:2] for call in calls()][:3] == [["stack", "output"], ["stack", "export"], ["destroy", "--yes"]]
    out = capsys.readouterr().out
    assert f"kept 2 bench result(s) of s3://gtp-bench-a-artifacts/bench-a/bench/ in {kept / 'bench-a'}" in out
    assert sorted(run.world_size for run in bench_report.load(str(kept / "bench-a")).runs) == [2, 4]
    assert ["stack", "output", "--json", "--stack", "bench-a"] in calls()  # never --show-secrets


@mock_aws
def test_results_that_cannot_be_kept_stop_the_destroy_unless_discarded(fake_pulumi, tmp_path, capsys) -> None:
    script, calls = fake_pulumi
    script({"stack output": {"stdout": json.dumps({"artifactsBucket": "gtp-bench-a-gone"}), "rc": 0}})
    assert destroy_module.main(["bench-a", "--yes", "--cwd", str(ROOT), "--keep-results", str(tmp_path)]) == 1
    assert not any(call[:2] == ["destroy", "--yes"] for call in calls())
    assert "ERROR: bench results could not be kept (NoSuchBucket" in capsys.readouterr().out
    assert destroy_module.main(["bench-a", "--yes", "--cwd", str(ROOT), "--discard-results"]) == 0
    assert calls()[-1][:2] == ["destroy", "--yes"]


# --- the artifacts bucket of a persistent stack (issue 41) ----------------------------------------------------------

DEV_BUCKET = "gtp-dev-artifacts-0a1b2c"


def _state(force_destroy: bool) -> str:
    return json.dumps({"deployment": {"resources": [{
        "urn": "urn:pulumi:dev::gtp::gtp:cluster:TrainingIdentity$aws:s3/bucket:Bucket::identity-artifacts",
        "type": "aws:s3/bucket:Bucket", "custom": True, "id": DEV_BUCKET,
        "inputs": {"forceDestroy": force_destroy}, "outputs": {"bucket": DEV_BUCKET, "forceDestroy": force_destroy}}]}})


def _versioned_dev_bucket() -> Any:
    """dev's artifacts bucket (versioned, in dev's region) with a checkpoint, and a log deleted by a plain DELETE (a
    delete marker over its one version): what `aws s3 rm` alone would leave behind."""
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket=DEV_BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_bucket_versioning(Bucket=DEV_BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=DEV_BUCKET, Key="dev/checkpoints/step-100/model.pt", Body=b"weights")
    s3.put_object(Bucket=DEV_BUCKET, Key="dev/logs/run-1.jsonl", Body=b"{}")
    s3.delete_object(Bucket=DEV_BUCKET, Key="dev/logs/run-1.jsonl")
    return s3


@mock_aws
def test_a_persistent_stacks_non_empty_bucket_stops_the_destroy_with_what_to_empty(fake_pulumi, capsys) -> None:
    script, calls = fake_pulumi
    script({"stack output": {"stdout": json.dumps({"artifactsBucket": DEV_BUCKET}), "rc": 0},
            "stack export": {"stdout": _state(force_destroy=False), "rc": 0}})
    _versioned_dev_bucket()
    assert destroy_module.main(["dev", "--yes", "--cwd", str(ROOT), "--discard-results"]) == 1
    assert not any(call[:2] == ["destroy", "--yes"] for call in calls())  # stopped before anything was deleted
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        f"[dev] ERROR: the artifacts bucket {DEV_BUCKET} is not empty (1 object(s), 2 older version(s) or delete "
        "marker(s)) and not force_destroy (dev is a persistent stack: its bucket keeps its data): pulumi destroy "
        "would fail on it with BucketNotEmpty; nothing destroyed",
        f"[dev] keep what you need from it (`aws s3 sync s3://{DEV_BUCKET} DIR`), then empty it:",
        f"    aws s3 rm s3://{DEV_BUCKET} --recursive",
        f"[dev] and, as it is versioned, delete every older version and delete marker: the S3 console's Empty action "
        f"on {DEV_BUCKET}, or `aws s3api delete-objects --bucket {DEV_BUCKET} --delete ...` for each page of "
        f"`aws s3api list-object-versions --bucket {DEV_BUCKET}`; then run the destroy again",
    ]


@mock_aws
def test_the_destroy_goes_on_once_every_version_is_gone_or_the_bucket_is_force_destroy(fake_pulumi, capsys) -> None:
    script, calls = fake_pulumi
    script({"stack output": {"stdout": json.dumps({"artifactsBucket": DEV_BUCKET}), "rc": 0},
            "stack export": {"stdout": _state(force_destroy=True), "rc": 0}})
    s3 = _versioned_dev_bucket()
    assert destroy_module.main(["dev", "--yes", "--cwd", str(ROOT), "--discard-results"]) == 0, capsys.readouterr()
    assert calls()[-1][:2] == ["destroy", "--yes"]

    script({"stack output": {"stdout": json.dumps({"artifactsBucket": DEV_BUCKET}), "rc": 0},
            "stack export": {"stdout": _state(force_destroy=False), "rc": 0}})
    s3.delete_object(Bucket=DEV_BUCKET, Key="dev/checkpoints/step-100/model.pt")  # what `aws s3 rm` does: a marker
    assert destroy_module.main(["dev", "--yes", "--cwd", str(ROOT), "--discard-results"]) == 1
    page = s3.list_object_versions(Bucket=DEV_BUCKET)
    s3.delete_objects(Bucket=DEV_BUCKET, Delete={"Objects": [
        {"Key": item["Key"], "VersionId": item["VersionId"]} for item in page["Versions"] + page["DeleteMarkers"]]})
    before = len(calls())
    assert destroy_module.main(["dev", "--yes", "--cwd", str(ROOT), "--discard-results"]) == 0
    assert [call[:2] for call in calls()[before:]] == [["stack", "output"], ["destroy", "--yes"]]  # no state read
