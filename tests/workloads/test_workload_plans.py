"""Whole-program plans under Pulumi mocks: which workload each stack runs, and its ordering guarantees."""

from __future__ import annotations

import copy

import pytest
import yaml

from stack_config import ConfigError
from stages.config import parse_stack_config
from verify.plan import ROOT

PYTORCH_JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
ELASTIC_JOB = "kubernetes:elastic.iml.github.io/v1alpha1:ElasticJob"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
SCALED_JOB = "kubernetes:keda.sh/v1alpha1:ScaledJob"
TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
KUSTOMIZE = "kubernetes:yaml/v2:ConfigFile"
HELM = "kubernetes:helm.sh/v3:Release"


def test_an_elastic_pytorchjob_scaled_by_keda_starts_small_and_runs_without_kueue(tmp_path):
    from tests.conftest import plan_modified

    def scale(config):
        config["gtp:workloads"]["gpt-pretrain"]["autoscaling"] = {"mode": "scaledobject", "minReplicas": 2,
                                                                   "maxReplicas": 4, "gpuUtilizationThreshold": 85}
        del config["gtp:workloads"]["gpt-finetune"]

    plan = plan_modified(tmp_path, "prod", scale)
    assert not plan.by_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")  # KEDA resizes: Kueue off
    job = plan.one(PYTORCH_JOB)
    assert job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2  # KEDA adds the rest
    scaler = plan.one(SCALED_OBJECT)
    assert plan.depends_transitively(job, plan.one(KUSTOMIZE, "operators-training-operator"))
    assert plan.depends_transitively(scaler, plan.one(HELM, "operators-keda"))
    assert plan.depends_transitively(scaler, job)
    assert scaler.inputs["spec"]["minReplicaCount"] >= 1
    assert scaler.inputs["spec"]["scaleTargetRef"]["name"] == job.inputs["metadata"]["name"]
    assert "metrics" not in job.inputs["spec"]["elasticPolicy"]
    assert not plan.by_type(ELASTIC_JOB) and not plan.by_type(SCALED_JOB)
    assert not [r for r in plan.by_type(KUSTOMIZE) if "dlrover" in r.name]


def test_prod_protects_its_lustre_file_system(plan_of):
    plan = plan_of("prod")
    assert plan.one("aws:fsx/lustreFileSystem:LustreFileSystem").options["protect"] is True


def test_dev_scales_to_zero_with_a_scaledjob_and_an_encrypted_queue(plan_of):
    plan = plan_of("dev")
    scaled_job = plan.one(SCALED_JOB)
    # Only the operators a stack needs: Kueue's manifest (it queues the Jobs) and the training-operator, only for the
    # PyTorchJobs teams submit (kueue.submitKinds); the stack itself runs none.
    assert not plan.by_type(PYTORCH_JOB)
    manifests = [r.inputs["file"] for r in plan.by_type(KUSTOMIZE) if "/crds/" not in r.inputs["file"]]  # not CRDs
    assert [file.rsplit("/", 1)[-1].rsplit("-", 1)[0] for file in manifests] == ["kueue-v0.19.2",
                                                                                  "training-operator-v1.9.4"]
    assert plan.depends_transitively(scaled_job, plan.one(HELM, "operators-keda"))
    queues = plan.by_type("aws:sqs/queue:Queue")
    assert len(queues) == 2 and all(q.inputs["sqsManagedSseEnabled"] is True for q in queues)
    container = scaled_job.inputs["spec"]["jobTargetRef"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu.shared"] == "1"
    efs = plan.one("aws:efs/fileSystem:FileSystem")
    assert efs.inputs["encrypted"] is True
    assert len(plan.by_type("aws:efs/mountTarget:MountTarget")) == 2


def test_edge_runs_a_dlrover_elasticjob_on_the_existing_storage_class(plan_of):
    plan = plan_of("edge")
    job = plan.one(ELASTIC_JOB)
    assert plan.depends_transitively(job, plan.one(KUSTOMIZE, "operators-dlrover"))
    claim = plan.one("kubernetes:core/v1:PersistentVolumeClaim")
    assert claim.inputs["spec"]["storageClassName"] == "nfs-client"
    container = job.inputs["spec"]["replicaSpecs"]["worker"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["dlrover-run"] and container["args"][0] == "--nnodes=1:3"
    assert not plan.by_type("aws:sqs/queue:Queue")


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_every_training_pod_keeps_the_contract(plan_of, stack):
    from verify.check import pod_templates_for_checkov

    plan = plan_of(stack)
    templates = pod_templates_for_checkov(plan.kubernetes_objects())
    assert templates
    for document in templates:
        spec = document["template"]["spec"]
        container = spec["containers"][0]
        assert container["name"] in ("pytorch", "node")  # `node`: the container Trainer v2 configures
        image = container["image"]
        assert image == "<computed>" or "@sha256:" in image
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
        mps_slice = "nvidia.com/gpu.shared" in container["resources"]["limits"] and stack == "dev"
        shm = next((v for v in spec["volumes"] if v["name"] == "dshm"), None)
        if mps_slice:  # the device plugin mounts the MPS daemon's /dev/shm (issue 26 finding 4)
            assert shm is None
        else:
            assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"]
        assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
        assert container["resources"]["requests"] == container["resources"]["limits"]


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_workload_waits_for_the_training_namespace_and_gpu_gate(plan_of, stack):
    plan = plan_of(stack)
    jobs = [r for t in (PYTORCH_JOB, ELASTIC_JOB, SCALED_JOB, TRAIN_JOB) for r in plan.by_type(t)]
    assert len(jobs) == len(plan.config.workloads)
    namespace = plan.one("kubernetes:core/v1:Namespace", "training-namespace")
    gates = [r for r in plan.resources if "readiness" in r.type.lower()]
    assert gates, "no GPU readiness gate in the plan"
    for job in jobs:
        assert plan.depends_transitively(job, namespace)
        # `gpu_ready` (issue 4: the GpuReadiness gate and the metrics releases) is part of the job's depends_on.
        for gate in gates:
            assert plan.depends_transitively(job, gate), gate.name


def test_watch_output_shows_how_to_follow_the_job(plan_of):
    watch = plan_of("prod").outputs["watch"]
    assert watch["namespace"] == "training-prod"
    assert watch["gpt-pretrain"]["jobs"] == "kubectl -n training-prod get pytorchjobs gpt-pretrain"
    assert watch["gpt-pretrain"]["logs"] == "kubectl -n training-prod logs -f gpt-pretrain-worker-0 -c pytorch"
    assert watch["gpt-finetune"]["jobs"] == "kubectl -n training-prod get trainjobs,jobsets gpt-finetune"


# --- config rules that tie workload kind and autoscaling mode together ---------------------------------------

def raw_config(stack: str) -> dict:
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {key.split(":", 1)[1]: value for key, value in document["config"].items()}


def parse(raw: dict, stack: str):
    secrets = [key for key, value in raw.items() if isinstance(value, dict) and set(value) == {"secure"}]
    raw = {key: ("fake" if key in secrets else value) for key, value in raw.items()}
    return parse_stack_config(raw, project="gtp", stack=stack, secret_keys=secrets)


SCALED = {"mode": "scaledobject", "minReplicas": 2, "maxReplicas": 4, "gpuUtilizationThreshold": 85}


def test_scaledobject_needs_an_elastic_pytorchjob():
    raw = copy.deepcopy(raw_config("prod"))
    raw["workloads"]["gpt-pretrain"]["autoscaling"] = dict(SCALED)
    del raw["workloads"]["gpt-pretrain"]["elastic"]
    with pytest.raises(ConfigError, match="'scaledobject' scales the Worker replicas of an elastic PyTorchJob"):
        parse(raw, "prod")


def test_scaledobject_never_to_zero_workers():
    raw = copy.deepcopy(raw_config("prod"))
    raw["workloads"]["gpt-pretrain"]["autoscaling"] = {**SCALED, "minReplicas": 0}
    with pytest.raises(ConfigError, match="would scale the PyTorchJob to 0 workers, which the training-operator's "
                                          "webhook rejects"):
        parse(raw, "prod")


def test_scaledobject_range_within_elastic_range():
    raw = copy.deepcopy(raw_config("prod"))
    raw["workloads"]["gpt-pretrain"]["autoscaling"] = {**SCALED, "maxReplicas": 6}
    raw["gpuNodeGroups"]["h100"]["maxSize"] = 6
    with pytest.raises(ConfigError, match=r"KEDA's range 2\.\.6 must lie within workloads.gpt-pretrain.elastic "
                                          r"2\.\.4"):
        parse(raw, "prod")


def test_scaledjob_needs_eks_and_a_pytorchjob():
    raw = copy.deepcopy(raw_config("edge"))
    raw["workloads"]["edge-finetune"]["autoscaling"] = {"mode": "scaledjob"}
    with pytest.raises(ConfigError) as error:
        parse(raw, "edge")
    assert "'scaledjob' starts training Jobs from the PyTorchJob's pod shape" in str(error.value)
    assert "'scaledjob' reads an SQS queue with Pod Identity, which needs EKS" in str(error.value)


def test_elasticjob_needs_an_elastic_range():
    raw = copy.deepcopy(raw_config("edge"))
    del raw["workloads"]["edge-finetune"]["elastic"]
    with pytest.raises(ConfigError, match=r"workloads.edge-finetune.elastic: is required for kind 'elasticjob'"):
        parse(raw, "edge")


def test_stacks_parse():
    for stack in ("dev", "prod", "edge"):
        config = parse(raw_config(stack), stack)
        assert config.workloads and all(w.ephemeral_storage == "20Gi" for w in config.workloads.values())


def test_lustre_gets_one_subnet_as_a_string_in_an_adopted_vpc(tmp_path):
    """pulumi-aws 7 types LustreFileSystem.subnet_ids as a string (one subnet). With a stack-created VPC the id is
    unknown in a preview, so only an adopted VPC's known ids show the type the provider gets at apply."""
    from tests.conftest import plan_modified

    def adopt(config):
        config["gtp:network"] = {"existingVpcId": "vpc-0a1b2c3d",
                                 "existingPrivateSubnetIds": ["subnet-0a1b2c3d", "subnet-0b1c2d3e"]}
        config["gtp:cluster"]["deployer"] = {"access": "in-vpc", "runnerLabels": ["self-hosted", "gtp-prod"],
                                             "cidrs": ["10.0.0.0/24"]}

    plan = plan_modified(tmp_path, "prod", adopt)
    assert plan.one("aws:fsx/lustreFileSystem:LustreFileSystem").inputs["subnetIds"] == "subnet-0a1b2c3d"
