"""workloads.<name>.kind trainjob: Kubeflow Trainer v2.3.0 TrainJob on the stack's own ClusterTrainingRuntime."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from catalog import versions
from components.kueue import vendored_manifest
from stack_config import ConfigError
from tests.workloads.test_pod_template import make_shape
from tests.workloads.test_workload_plans import parse, raw_config
from verify import render as cluster
from verify.plan import plan_one
from verify.simulate.pods import expand_pods
from workload_kinds import KINDS, kind_of_resource
from workload_kinds.trainjob import NODE, missing_requests, runtime_body, runtime_templates, trainjob_body

ROOT = Path(__file__).resolve().parents[2]


def bodies(**changes):
    shape = make_shape(**changes)
    return (trainjob_body("train", shape.namespace, "training-test-torch", shape, num_nodes=2),
            runtime_body("training-test-torch", shape, num_nodes=2, backoff_limit=3))


def test_trainjob_pods_carry_the_workloads_name_like_every_kind():
    """Alert rules select a workload's pods by `app.kubernetes.io/name: <workload>` (components/alert_rules.py):
    the runtime's pods carried the runtime's name (`training-test-torch`) and matched no rule."""
    shape = make_shape()
    runtime = runtime_body("training-test-torch", shape, num_nodes=2, backoff_limit=3, workload="train")
    template = runtime_templates(runtime)[NODE]
    assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "train"


def test_trainjob_carries_every_gpu_and_efa_request_in_resources_per_node():
    job, runtime = bodies()
    per_node = job["spec"]["trainer"]["resourcesPerNode"]
    for part in ("requests", "limits"):
        assert per_node[part]["nvidia.com/gpu"] == "8"
        assert per_node[part]["vpc.amazonaws.com/efa"] == "32"
    assert job["spec"]["trainer"]["numNodes"] == 2 and job["spec"]["trainer"]["numProcPerNode"] == 8
    assert job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    assert missing_requests(job, runtime) == []


def test_missing_requests_names_what_a_stripped_trainjob_would_lose():
    job, runtime = bodies()
    del job["spec"]["trainer"]["resourcesPerNode"]
    assert missing_requests(job, runtime) == ["nvidia.com/gpu", "vpc.amazonaws.com/efa"]


def test_runtime_main_container_is_named_node_and_keeps_the_pod_shape():
    _, runtime = bodies()
    template = runtime_templates(runtime)[NODE]
    names = [c["name"] for c in template["spec"]["containers"]]
    assert names == [NODE]  # Trainer applies resourcesPerNode/env only to the container named `node`
    assert template["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert {v["name"] for v in template["spec"]["volumes"]} == {"dshm", "tmp", "shared"}
    assert kind_of_resource(runtime) is KINDS["trainjob"]


def test_trainjob_refuses_elastic_and_autoscaling():
    raw = copy.deepcopy(raw_config("prod"))
    raw["workloads"]["gpt-pretrain"]["kind"] = "trainjob"
    raw["workloads"]["gpt-pretrain"]["autoscaling"] = {"mode": "scaledobject"}
    with pytest.raises(ConfigError) as caught:
        parse(raw, "prod")
    paths = [problem.path for problem in caught.value.problems]
    assert "workloads.gpt-pretrain.elastic" in paths and "workloads.gpt-pretrain.autoscaling.mode" in paths


def test_operator_is_installed_only_for_trainjob():
    from stack_config.derived import installed_parts

    raw = raw_config("dev")
    raw["kueue"].pop("submitKinds")  # the stack's own workloads only (dev installs training-operator for submits)
    assert "trainer" not in installed_parts(parse(raw, "dev"))
    raw["workloads"]["mnist"] = {**raw["workloads"]["mnist"], "kind": "trainjob", "autoscaling": {"mode": "none"}}
    parts = installed_parts(parse(raw, "dev"))
    assert "trainer" in parts and "training-operator" not in parts and "keda" not in parts


@pytest.mark.program
def test_prod_with_trainjob_on_efa_plans_and_simulates_clean(tmp_path):
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    # prod's pre-training as a TrainJob too, on the p5 group (EFA x32)
    workload = document["config"]["gtp:workloads"]["gpt-pretrain"]
    workload["kind"] = "trainjob"
    workload.pop("elastic", None)
    workload["numNodes"] = 2
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    assert plan_one("prod", stack_file=stack_file, out=tmp_path / "plan", quiet=True) == 0
    objects = cluster.load((tmp_path / "plan" / "prod" / "cluster.yaml").read_text())
    assert any(o.kind == "Deployment" and o.source.startswith("operator") and "jobset" in o.name for o in objects)
    # Applied from its derived copy (the platform priority class added; components/training_operators.py).
    recorded = json.loads((tmp_path / "plan" / "prod" / "resources.json").read_text())["resources"]
    files = [r["inputs"]["file"] for r in recorded if r["type"] == "kubernetes:yaml/v2:ConfigFile"]
    assert versions.TRAINER_MANIFEST in {vendored_manifest(file) for file in files}
    pods = [p for p in expand_pods(objects) if p.owner.startswith("TrainJob training-prod/gpt-pretrain")]
    assert [(p.owner, p.count) for p in pods] == [("TrainJob training-prod/gpt-pretrain node", 2)]
    node = next(c for c in pods[0].pod["spec"]["containers"] if c["name"] == NODE)
    assert (node["resources"]["requests"]["vpc.amazonaws.com/efa"]
            == node["resources"]["limits"]["vpc.amazonaws.com/efa"])
    assert int(node["resources"]["requests"]["vpc.amazonaws.com/efa"]) > 0
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["PET_NNODES"] == "2" and env["PET_MASTER_PORT"] == "29500"
    assert env["PET_MASTER_ADDR"] == "gpt-pretrain-node-0-0.gpt-pretrain"
    assert pods[0].pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "gpt-pretrain"
    simulation = json.loads((tmp_path / "plan" / "prod" / "simulation.json").read_text())
    assert "TrainJob training-prod/gpt-pretrain node" in json.dumps(simulation)
    # prod with a fixed-size TrainJob runs Kueue by default: the TrainJob is queued, its gang fits the quota
    resources = json.loads((tmp_path / "plan" / "prod" / "resources.json").read_text())["resources"]
    trainjob = next(r for r in resources if r["type"] == "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
                    and r["inputs"]["metadata"]["name"] == "gpt-pretrain")
    assert trainjob["inputs"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert simulation["checks"]["queued"]["findings"] == [] and simulation["checks"]["queued"]["total"] > 0
