"""trainer.bench writes one result object per run, to a file or under an S3 prefix."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from moto import mock_aws

from trainer import bench
from trainer.bench import write_output


def test_file_output(tmp_path):
    target = tmp_path / "r.json"
    write_output(str(target), '{"kind": "bench"}\n', "2026-12-02T13:00:00Z")
    assert json.loads(target.read_text()) == {"kind": "bench"}


@mock_aws
def test_s3_output_is_one_new_object_per_run(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    write_output("s3://artifacts/bench-x/bench/", '{"kind": "bench", "n": 1}\n', "2026-12-02T13:00:00Z")
    write_output("s3://artifacts/bench-x/bench/", '{"kind": "bench", "n": 2}\n', "2026-12-02T14:00:00Z")
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="artifacts", Prefix="bench-x/bench/")["Contents"])
    assert len(keys) == 2 and keys[0].startswith("bench-x/bench/2026-12-02T13:00:00Z-")
    body = s3.get_object(Bucket="artifacts", Key=keys[1])["Body"].read()
    assert json.loads(body) == {"kind": "bench", "n": 2}


def test_network_usage_records_requested_efa_and_what_nccl_used(monkeypatch):
    logs = Path(__file__).parent / "data"
    monkeypatch.setenv("FI_PROVIDER", "efa")
    assert bench.network_usage(str(logs / "nccl_socket_fallback.log")) == {"requested": "efa", "used": "socket"}
    assert bench.network_usage(str(logs / "nccl_efa.log")) == {"requested": "efa", "used": "efa"}
    assert bench.network_usage(None) == {"requested": "efa", "used": None}
    monkeypatch.delenv("FI_PROVIDER")
    assert bench.network_usage(None) == {"requested": None, "used": None}
