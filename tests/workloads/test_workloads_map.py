"""`gtp:workloads`: several workloads side by side, teams' own images, the one-off submit path, and the
migration from the single `workload` of earlier releases."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.kueue import QUEUE_LABEL
from components.training_namespace import QuotaSize, capacity_quota_hard, quota_hard
from stack_config.derived import group_quota, kueue_enabled
from tests.conftest import ROOT, plan_modified, plan_stack
from tests.test_config import BASE, parse, problems_of, with_
from tools import submit as gtp_submit
from verify import render as gtp_cluster
from verify import simulate

DIGEST = "registry.example.com/team/train@sha256:" + "1" * 64
OWN = {"kind": "pytorchjob", "nodeGroup": "train", "cpu": "2", "memory": "8Gi", "shmSize": "2Gi", "image": DIGEST,
       "command": ["-m", "team.train", "--lr", "3e-4"]}


def objects_of(plan: Any, kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in plan.kubernetes_objects() if obj.get("kind") == kind}


# --- two workloads in one committed stack ------------------------------------------------------------------------
def test_prod_runs_a_pytorchjob_and_a_trainjob_side_by_side_both_queued_and_clean() -> None:
    plan = plan_stack("prod")
    assert set(plan.config.workloads) == {"gpt-pretrain", "gpt-finetune"}
    assert kueue_enabled(plan.config)
    (pytorchjob,) = objects_of(plan, "PyTorchJob").values()
    trainjob = objects_of(plan, "TrainJob")["gpt-finetune"]
    for job in (pytorchjob, trainjob):
        assert job["metadata"]["labels"][QUEUE_LABEL] == "training"
    # Kueue admits the elastic job's whole gang: it starts with maxNodes workers (no KEDA resizes it).
    assert pytorchjob["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    # EFA on the p4d group: every GPU and EFA request in resourcesPerNode.
    requests = trainjob["spec"]["trainer"]["resourcesPerNode"]["requests"]
    assert requests["nvidia.com/gpu"] == "8" and requests["vpc.amazonaws.com/efa"] == "4"
    # One same-job NetworkPolicy per workload, each selecting its controller's pod label.
    policies = objects_of(plan, "NetworkPolicy")
    assert policies["same-job-gpt-pretrain"]["spec"]["podSelector"] == {
        "matchLabels": {"training.kubeflow.org/job-name": "gpt-pretrain"}}
    assert policies["same-job-gpt-finetune"]["spec"]["podSelector"] == {
        "matchLabels": {"jobset.sigs.k8s.io/jobset-name": "gpt-finetune"}}
    objects = gtp_cluster.render_cluster(plan)
    # Kueue admits each queued job's pods together: the expanded pods know their job; nothing else is queued.
    queued = {pod.queued_job for pod in simulate.expand_pods(objects) if pod.queued_job}
    assert queued == {"PyTorchJob training-prod/gpt-pretrain", "TrainJob training-prod/gpt-finetune"}
    result = simulate.simulate(plan, objects)
    assert simulate.findings(result) == []
    assert result["checks"]["queued"]["passed"] == result["checks"]["queued"]["total"] >= 2


def test_the_namespace_quota_is_the_sum_of_the_workloads_without_kueue_and_the_capacity_with_it() -> None:
    small = QuotaSize(num_pods=2, gpu_resource="nvidia.com/gpu", gpus_per_pod=1, efa_per_pod=0, cpu="2",
                      memory="8Gi", ephemeral_storage="20Gi")
    shared = QuotaSize(num_pods=3, gpu_resource="nvidia.com/gpu.shared", gpus_per_pod=1, efa_per_pod=0, cpu="1",
                       memory="2Gi", ephemeral_storage="10Gi", dlrover_master=True)
    hard = quota_hard([small, shared])
    assert hard["pods"] == "6"  # 2 + 3 + DLRover's master
    assert hard["requests.cpu"] == "8" and hard["requests.memory"] == "24Gi"  # 4 + 3 + 1; 16 + 6 + 2
    assert hard["requests.nvidia.com/gpu"] == "2" and hard["requests.nvidia.com/gpu.shared"] == "3"
    config = parse(BASE)
    capacity = group_quota(config, "train")
    with_kueue = capacity_quota_hard(capacity, max_pods=2)
    assert with_kueue["requests.nvidia.com/gpu"] == "2" and with_kueue["pods"] == "2"
    assert with_kueue["requests.cpu"] == f"{round(capacity['cpu'] * 1000)}m"


def test_a_stack_with_kueue_sizes_its_namespace_quota_to_the_clusterqueue() -> None:
    plan = plan_stack("prod")
    (quota,) = objects_of(plan, "ResourceQuota").values()
    (queue,) = objects_of(plan, "ClusterQueue").values()
    nominal: dict[str, int] = {}
    for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
        for resource in flavor["resources"]:
            if resource["name"] in ("nvidia.com/gpu", "vpc.amazonaws.com/efa"):
                nominal[resource["name"]] = nominal.get(resource["name"], 0) + int(resource["nominalQuota"])
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == str(nominal["nvidia.com/gpu"]) == "48"
    assert quota["spec"]["hard"]["requests.vpc.amazonaws.com/efa"] == str(nominal["vpc.amazonaws.com/efa"])


# --- config errors -----------------------------------------------------------------------------------------------
def test_the_single_workload_of_earlier_releases_is_refused_with_where_it_moved() -> None:
    raw = copy.deepcopy(BASE)
    raw["workload"] = raw.pop("workloads")["train"] | {"name": "train"}
    raw["autoscaling"] = {"mode": "none"}
    problems = problems_of(raw)
    assert any(p.startswith("workload: is no longer read: the single `workload` became the map `workloads`")
               for p in problems), problems
    assert any(p.startswith("autoscaling: is no longer read: `autoscaling` moved into the workload it scales")
               for p in problems), problems


def test_a_name_inside_an_entry_is_refused_the_key_is_the_name() -> None:
    assert problems_of(with_(BASE, "workloads.train.name", "other")) == [
        "workloads.train.name: 'other': the name is the map key ('train'); remove this key"]


@pytest.mark.parametrize(("entry", "expected"), [
    ({**OWN, "image": "registry.example.com/team/train:v3"},
     ["workloads.own.image: 'registry.example.com/team/train:v3' is not pinned by digest"]),
    ({key: value for key, value in OWN.items() if key != "command"}, ["workloads.own.command: is required with image"]),
    ({**OWN, "model": "gpt", "maxSteps": 10},
     ["workloads.own.model: 'gpt' has no effect here: only applies without workloads.own.image (here "
      "workloads.own.image is 'registry.example.com/team/train@sha256:", "workloads.own.maxSteps: 10 has no "
      "effect here: only applies without workloads.own.image"]),
    ({key: value for key, value in OWN.items() if key != "image"},
     ["workloads.own.command: ['-m', 'team.train', '--lr', '3e-4'] has no effect here: only applies with "
      "workloads.own.image set (here workloads.own.image is unset)"]),
    ({**OWN, "autoscaling": {"mode": "scaledjob", "minReplicas": 0}},
     ["workloads.own.image: kind 'scaledjob' runs only our trainer"]),
])
def test_own_image_mistakes_name_their_key(entry: dict[str, Any], expected: list[str]) -> None:
    problems = problems_of(with_(BASE, "workloads", {"own": entry}))
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)
    assert len(problems) == len(expected), problems


def test_forcing_kueue_on_with_a_workload_it_cannot_queue_names_that_workload() -> None:
    raw = with_(BASE, "workloads.elastic", {"kind": "elasticjob", "nodeGroup": "train", "cpu": "2", "memory": "8Gi",
                                            "shmSize": "2Gi", "elastic": {"minNodes": 1, "maxNodes": 2}})
    raw = with_(raw, "gpuNodeGroups.train.maxSize", 3)  # room for both at once (no Kueue to take turns)
    raw = with_(raw, "storage", {"kind": "efs"})  # where the elastic job's checkpoints outlive its pods
    assert not kueue_enabled(parse(raw))  # default: off, all or none
    problems = problems_of(with_(raw, "kueue.enabled", True))
    assert problems == ["kueue.enabled: true, but workloads.elastic.kind 'elasticjob': Kueue v0.19.2 has no "
                        "integration for it (supported: pytorchjob, trainjob); set it to false or leave it unset"]


def test_an_unknown_kind_in_one_entry_is_reported_with_its_path() -> None:
    problems = problems_of(with_(BASE, "workloads.second", {"kind": "pytorchjobs", "nodeGroup": "train"}))
    assert problems[0].startswith("workloads.second.kind: 'pytorchjobs' is not allowed (did you mean 'pytorchjob'?)")


# --- a team's own image: the pod it gets -------------------------------------------------------------------------
def test_a_teams_own_image_keeps_the_platform_pod_shape_without_our_trainers_extras(tmp_path: Path) -> None:
    def edit(config: dict[str, Any]) -> None:
        config["gtp:workloads"]["vision"] = {"kind": "trainjob", "nodeGroup": "a100", "numNodes": 2, "image": DIGEST,
                                             "command": ["-m", "vision.train"], "cpu": "90", "memory": "1000Gi"}
        config["gtp:image"]["signedDigests"] = [DIGEST]  # production runs only signed images

    plan = plan_modified(tmp_path, "prod", edit)
    runtime = objects_of(plan, "ClusterTrainingRuntime")["training-prod-vision"]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == DIGEST
    assert container["args"][-2:] == ["-m", "vision.train"] and "trainer.train" not in container["args"]
    assert "initContainers" not in pod["spec"] and "ports" not in container
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GTP_CHECKPOINT_DIR"] == "/mnt/shared/checkpoints/vision"
    assert container["securityContext"]["runAsUser"] == 10001
    # The FSx setup Job owns the checkpoints directory and each workload's own.
    setup = next(obj for obj in plan.kubernetes_objects() if obj.get("kind") == "Job"
                 and "checkpoints/vision" in str(obj))
    assert "checkpoints/gpt-pretrain" in str(setup)
    result = simulate.simulate(plan, gtp_cluster.render_cluster(plan))
    assert simulate.findings(result) == []


def test_in_production_a_teams_image_runs_only_once_listed_as_signed(tmp_path: Path) -> None:
    """Refused by the config stage, before anything is registered (issue 29, class 6); the policy pack stays the
    second line (tests/policy: its rule on records the config stage never sees)."""
    from stack_config import ConfigError
    from verify.validate import Report, run_policy_pack

    def add(signed: bool) -> Any:
        def edit(config: dict[str, Any]) -> None:
            config["gtp:workloads"]["vision"] = {"kind": "trainjob", "nodeGroup": "a100", "numNodes": 1,
                                                 "image": DIGEST, "command": ["-m", "vision.train"], "cpu": "90",
                                                 "memory": "1000Gi"}
            if signed:
                config["gtp:image"]["signedDigests"] = [DIGEST]
        return edit

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(ConfigError, match=rf"workloads\.vision\.image: '{DIGEST}' is not in image\.signedDigests, "
                                          r"and a production stack \(lifecycle\.protect\) runs only"):
        plan_modified(tmp_path / "a", "prod", add(False))
    signed = Report()
    run_policy_pack(plan_modified(tmp_path / "b", "prod", add(True)), signed)
    assert signed.errors == []


def test_a_stack_with_one_workload_aliases_the_names_its_release_used() -> None:
    from workload_kinds.base import WorkloadContext

    config = parse(BASE)
    context = WorkloadContext(config=config, workload=config.workloads["train"], shape=None,  # type: ignore[arg-type]
                              operators=None, provider=None, ready=[])  # type: ignore[arg-type]
    assert context.resource_name("job") == "job-train"
    (alias,) = context.opts("job").aliases
    assert alias.name == "job"
    context.only_workload = False
    assert not context.opts("job").aliases


# --- the submit path ---------------------------------------------------------------------------------------------
@pytest.mark.program
def test_submit_renders_only_what_the_entry_adds_with_its_queue_label() -> None:
    entry = {"lr-sweep": {"kind": "pytorchjob", "nodeGroup": "g6", "gpuResource": "shared", "gpusPerNode": 1,
                          "cpu": "900m", "memory": "3Gi", "shmSize": "1Gi", "maxSteps": 50}}
    trainer = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "a" * 64
    documents = list(yaml.safe_load_all(gtp_submit.render("dev", entry, trainer_image=trainer)))
    assert sorted((d["kind"], d["metadata"]["name"]) for d in documents) == [
        ("NetworkPolicy", "same-job-lr-sweep"), ("PyTorchJob", "lr-sweep")]
    job = next(d for d in documents if d["kind"] == "PyTorchJob")
    assert job["metadata"]["labels"][QUEUE_LABEL] == "training"
    (container,) = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["image"] == trainer
    assert "--checkpoint-dir=/mnt/shared/checkpoints/lr-sweep" in container["args"]


@pytest.mark.parametrize(("stack", "entry", "trainer", "message"), [
    ("dev", {"mnist": {"kind": "pytorchjob", "nodeGroup": "g6"}}, "x@sha256:" + "a" * 64, "is one of stack 'dev'"),
    ("dev", {"q": {"kind": "pytorchjob", "nodeGroup": "g6", "autoscaling": {"mode": "scaledjob"}}}, None,
     "can't be submitted"),
    ("dev", {"t": {"kind": "pytorchjob", "nodeGroup": "g6"}}, None, "pass --trainer-image"),
    ("edge-swarm", {"e": {"kind": "pytorchjob", "nodeGroup": "gpu", "image": DIGEST, "command": ["/app/t.py"]}},
     None, "runs no Kueue"),
    ("dev", {"a": {}, "b": {}}, None, "exactly one entry"),
])
def test_submit_refuses_what_it_cannot_run(stack: str, entry: dict[str, Any], trainer: str | None,
                                           message: str) -> None:
    with pytest.raises(gtp_submit.SubmitError, match=message):
        gtp_submit.render(stack, entry, trainer_image=trainer)


def test_submit_reports_config_problems_of_the_entry_by_key_path() -> None:
    entry = {"bad": {"kind": "pytorchjob", "nodeGroup": "g7", "image": DIGEST, "command": ["/app/train.py"]}}
    with pytest.raises(gtp_submit.SubmitError, match=r"workloads\.bad\.nodeGroup: 'g7' is not a GPU node group"):
        gtp_submit.render("dev", entry)


def test_every_committed_stack_file_uses_the_workloads_map() -> None:
    for path in [*(ROOT / "stacks").glob("Pulumi.*.yaml"), ROOT / "stacks" / "templates" / "bench.yaml"]:
        config = yaml.safe_load(path.read_text())["config"]
        assert "gtp:workload" not in config and "gtp:autoscaling" not in config, path


# --- quotas equal derived capacity, on every stack that queues ---------------------------------------------------
def assert_queue_quota_is_derived(plan: Any) -> None:
    """The ClusterQueue's nominal quota per flavor is exactly what its node group provides (group_quota), and every
    training job of the stack carries the queue label."""
    from components.kueue import flavor_name, quantity

    (queue,) = objects_of(plan, "ClusterQueue").values()
    (group,) = queue["spec"]["resourceGroups"]
    flavors = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert set(flavors) == {flavor_name(name) for name in plan.config.gpu_node_groups}
    for name in plan.config.gpu_node_groups:
        derived = group_quota(plan.config, name)
        for resource, amount in derived.items():
            assert flavors[flavor_name(name)][resource] == quantity(resource, amount), (name, resource)
    jobs = [obj for obj in plan.kubernetes_objects()
            if obj.get("kind") in ("PyTorchJob", "TrainJob", "ScaledJob")]
    assert len(jobs) == len(plan.config.workloads)
    assert all(job["metadata"]["labels"][QUEUE_LABEL] == "training" for job in jobs)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_committed_stacks_queue_every_job_within_a_derived_quota(stack: str) -> None:
    assert_queue_quota_is_derived(plan_stack(stack))


# --- without Kueue, workloads of one group must fit it together ---------------------------------------------------
SECOND = {"kind": "pytorchjob", "nodeGroup": "train", "cpu": "2", "memory": "8Gi", "shmSize": "2Gi"}


def test_without_kueue_two_workloads_that_fit_only_one_at_a_time_are_refused() -> None:
    raw = with_(with_(BASE, "workloads.second", dict(SECOND)), "workloads.train.numNodes", 2)  # 2 + 1 > 2 GPUs
    raw = with_(raw, "storage", {"kind": "efs"})  # a 2-pod job resumes from shared storage
    assert kueue_enabled(parse(raw))  # Kueue on: the queue serializes them
    problems = problems_of(with_(raw, "kueue.enabled", False))
    assert problems == ["workloads: train 2, second 1: 3 nvidia.com/gpu at once on node group 'train', which has 2 "
                        "at maxSize 2; without Kueue their gangs can deadlock holding part of the GPUs: turn kueue on "
                        "(EKS), raise gpuNodeGroups.train.maxSize, or shrink the workloads"]
    # fitting together: accepted without Kueue too
    parse(with_(with_(BASE, "workloads.second", dict(SECOND)), "kueue.enabled", False))


def test_on_a_swarm_workloads_of_one_group_share_its_servers() -> None:
    from tests.swarm.test_swarm import swarm_raw

    raw = swarm_raw()
    (name, first), = raw["workloads"].items()
    raw["workloads"]["second"] = {**first, "elastic": {"minNodes": 1, "maxNodes": 1}}
    problems = problems_of(raw, secrets=("registryPassword",))
    assert any(p.startswith(f"workloads: {name} 3, second 1: 4 server(s) at once on node group 'gpu'")
               for p in problems), problems


def test_submit_runs_the_policy_pack_so_prod_refuses_an_unsigned_team_image(capsys: pytest.CaptureFixture) -> None:
    entry = {"vision": {"kind": "trainjob", "nodeGroup": "a100", "numNodes": 1, "image": DIGEST,
                        "command": ["-m", "vision.train"], "cpu": "90", "memory": "1000Gi"}}
    # refused by the config stage, which runs first (the policy pack is the second line)
    with pytest.raises(gtp_submit.SubmitError, match=r"workloads\.vision\.image: '[^']+' is not in "
                                                      r"image\.signedDigests, and a production stack"):
        gtp_submit.render("prod", entry)


def test_submit_cli_exits_2_with_one_line_and_no_traceback(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("a: {kind: pytorchjob}\nb: {kind: pytorchjob}\n")
    assert gtp_submit.main(["--stack", "dev", "--workload", str(job)]) == 2
    assert capsys.readouterr().err == ("submit: the workload file must hold exactly one entry: "
                                       "`<name>: {kind: ..., nodeGroup: ...}`\n")
    assert gtp_submit.main(["--stack", "nope", "--workload", str(tmp_path / "missing.yaml")]) == 2
    assert capsys.readouterr().err.startswith("submit: [Errno 2]")
    job.write_text("x: {kind: pytorchjob, nodeGroup: g6}\n")
    assert gtp_submit.main(["--stack", "nope", "--workload", str(job)]) == 2
    assert "submit: no stack file" in capsys.readouterr().err


def test_submit_checks_the_trainer_image_before_planning(capsys: pytest.CaptureFixture) -> None:
    # Before: --trainer-image was swapped into the rendered text after every check, so a tag (or, on prod, an
    # unsigned image) reached the cluster.
    entry = {"lr": {"kind": "pytorchjob", "nodeGroup": "g6", "gpuResource": "shared", "gpusPerNode": 1,
                    "cpu": "900m", "memory": "3Gi", "shmSize": "1Gi", "maxSteps": 50}}
    with pytest.raises(gtp_submit.SubmitError, match=r"image\.reference: 'team/trainer:latest' must reference an "
                                                      r"image by digest"):
        gtp_submit.render("dev", entry, trainer_image="team/trainer:latest")
    prod = {"ft": {"kind": "trainjob", "nodeGroup": "a100", "numNodes": 1, "cpu": "90", "memory": "1000Gi",
                   "maxSteps": 10}}
    with pytest.raises(gtp_submit.SubmitError, match=r"image\.reference: 'registry\.example\.invalid/t@sha256:b+' is "
                                                      r"not in image\.signedDigests, and a production stack"):
        gtp_submit.render("prod", prod, trainer_image="registry.example.invalid/t@sha256:" + "b" * 64)


@pytest.mark.program
def test_submit_plans_the_variant_once_and_again_as_an_apply_only_for_values_a_preview_does_not_know(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack as it stands (apply-like) and the stack with the entry (the checked plan): two runs. A third, the
    variant as an apply would run it, only when an added object holds a value the preview can't know."""
    entry = {"lr-sweep": {"kind": "pytorchjob", "nodeGroup": "g6", "gpuResource": "shared", "gpusPerNode": 1,
                          "cpu": "900m", "memory": "3Gi", "shmSize": "1Gi", "maxSteps": 50}}
    trainer = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "a" * 64
    runs: list[bool] = []
    real_run, real_check = gtp_submit.run, gtp_submit.plan_and_check

    def counted_run(*args: Any, known_outputs: bool = False, **kwargs: Any) -> Any:
        runs.append(known_outputs)
        return real_run(*args, known_outputs=known_outputs, **kwargs)

    monkeypatch.setattr(gtp_submit, "run", counted_run)
    plain = gtp_submit.render("dev", entry, trainer_image=trainer)
    assert runs == [True], "the submit planned the stack more often than as it stands plus the checked variant"

    def job_output_unknown(*args: Any, **kwargs: Any) -> Any:
        code, plan = real_check(*args, **kwargs)
        job = next(r for r in plan.resources if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob")
        job.inputs["metadata"] = {**job.inputs["metadata"], "annotations": {"from": gtp_submit.COMPUTED}}
        return code, plan

    monkeypatch.setattr(gtp_submit, "plan_and_check", job_output_unknown)
    runs.clear()
    assert gtp_submit.render("dev", entry, trainer_image=trainer) == plain  # the apply-like objects, not markers
    assert runs == [True, True]


def test_submit_on_a_stack_whose_program_refuses_says_so_without_a_traceback(capsys: pytest.CaptureFixture) -> None:
    # Before: edge's own image build (an unpinned Jetson base) ended `tools.submit` in a RunError traceback.
    job = {"one-off": {"kind": "pytorchjob", "nodeGroup": "orin", "image": DIGEST, "command": ["/app/t.py"]}}
    with pytest.raises(gtp_submit.SubmitError, match=r"stack 'edge' as it stands can't be planned: image: refusing "
                                                      r"to build on an unpinned base"):
        gtp_submit.render("edge", job)
