"""Config validation, round four (issue 45): a key nothing reads is refused, driven by the one table of who reads
which key (stack_config/applicability.py); a RuntimeClass or node default the simulation would reject is a config
problem with the user's key; a run whose sections failed to parse says how many checks it could not run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from stack_config import ConfigError
from stack_config import applicability as app
from tests.test_config import BASE, EXISTING, parse, problems_of, with_

SCALED_JOB = with_(BASE, "workloads.train.autoscaling", {"mode": "scaledjob", "maxReplicas": 2})
EXISTING_REGISTRY = with_(EXISTING, "image", {"platform": "linux/arm64", "registry": "existing",
                                              "existingRegistry": "registry.site.internal:5000/gtp/trainer"})
EXISTING_SECRETS = ("kubeconfig", "registryPassword")
ADOPTED_VPC = with_(with_(BASE, "network", {
    "existingVpcId": "vpc-0a1b2c3d4e5f67890",
    "existingPrivateSubnetIds": ["subnet-0a1b2c3d4e5f67890", "subnet-1a1b2c3d4e5f67890"]}),
    "cluster.deployer", {"access": "in-vpc", "runnerLabels": ["self-hosted", "gtp"], "cidrs": ["10.250.0.0/24"]})


def _parse_existing(raw: dict[str, Any]) -> Any:
    return parse({**raw, "registryPassword": "x"}, secrets=EXISTING_SECRETS)


def _problems_existing(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _parse_existing(raw)
    return [str(problem) for problem in caught.value.problems]


# --- class 3: a key that nothing reads ---------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "path", "value"), [
    # Grafana's only datasource is the stack's Prometheus; retention is Prometheus' flag.
    (with_(BASE, "gpu.metrics", {"prometheus": False, "grafana": True}), "gpu.metrics.grafana", "true"),
    (with_(BASE, "gpu.metrics", {"prometheus": False, "retention": "30d"}), "gpu.metrics.retention", "'30d'"),
    # KEDA's ScaledJob has no cooldownPeriod (kedacore/keda v2.20.2 apis/keda/v1alpha1/scaledjob_types.go:56-85).
    (with_(SCALED_JOB, "workloads.train.autoscaling.cooldownPeriodSeconds", 60),
     "workloads.train.autoscaling.cooldownPeriodSeconds", "60"),
    # An adopted VPC: the stack lays out no subnets and creates no NAT gateway.
    (with_(ADOPTED_VPC, "network.natGateways", "one-per-az"), "network.natGateways", "'one-per-az'"),
    (with_(ADOPTED_VPC, "network.vpcCidr", "10.8.0.0/16"), "network.vpcCidr", "'10.8.0.0/16'"),
    # No image built: no ECR repository, so no lifecycle policy.
    (with_(with_(BASE, "image", {"build": False, "reference": "r.example/t@sha256:" + "a" * 64}),
           "image.keepTaggedImages", 10), "image.keepTaggedImages", "10"),
])
def test_a_key_nothing_reads_is_refused_with_its_reader(raw: dict[str, Any], path: str, value: str) -> None:
    messages = problems_of(raw)
    assert any(m.startswith(f"{path}: {value} has no effect here: only applies") for m in messages), messages


def test_a_kms_window_where_the_stack_makes_no_kms_key_is_refused() -> None:
    """KMS keys: the EKS cluster's secrets key, and the key of an ECR repository the stack builds into. An adopted
    cluster pushing to the site's registry has neither."""
    messages = _problems_existing(with_(EXISTING_REGISTRY, "lifecycle.kmsDeletionWindowDays", 10))
    assert any(re.match(r"^lifecycle\.kmsDeletionWindowDays: 10 has no effect here: only applies where "
                        r"cluster\.mode is 'eks' or where image\.registry is 'ecr' and image\.build is true", m)
               for m in messages), messages
    parse(with_(BASE, "lifecycle.kmsDeletionWindowDays", 10))  # EKS: its cluster key
    _parse_existing(with_(EXISTING, "lifecycle.kmsDeletionWindowDays", 10))  # the ECR repository's key


def test_every_key_names_who_reads_it() -> None:
    """One table says which part reads each key (the config reference prints it): a key added without a reader
    fails here, so nothing is accepted that nothing reads."""
    for model, table in app.APPLIES.items():
        for name, where in table.items():
            assert where.reader.strip(), f"{model.__name__}.{name} names no reader"


# --- class 5: preconditions the simulation would reject ----------------------------------------------------------
@pytest.mark.parametrize(("edit", "path", "says"), [
    # k3s' default runtime is runc and no RuntimeClass: GPU pods get no driver libraries.
    ({"gpu.runtimeClassName": ""}, "gpu.runtimeClassName",
     r"'' runs the GPU pods under the nodes' default runtime 'runc'"),
    ({"cluster.nodeDefaultRuntime": "runc", "gpu.runtimeClassName": ""}, "gpu.runtimeClassName",
     r"'' runs the GPU pods under the nodes' default runtime 'runc'"),
    # A RuntimeClass the site doesn't ship and the stack doesn't create: refused at admission.
    ({"gpu.runtimeClassName": "nvidia-cdi"}, "gpu.runtimeClassName",
     r"'nvidia-cdi' is not a RuntimeClass this cluster has"),
])
def test_a_runtime_the_simulation_would_reject_is_a_config_problem(edit: dict[str, Any], path: str,
                                                                    says: str) -> None:
    raw = EXISTING
    for key, value in edit.items():
        raw = with_(raw, key, value)
    messages = problems_of(raw)
    assert any(m.startswith(f"{path}: ") and re.search(says, m) for m in messages), messages


def test_a_runtime_class_on_eks_must_be_created_by_the_stack() -> None:
    messages = problems_of(with_(BASE, "gpu.runtimeClassName", "nvidia"))
    assert any(m.startswith("gpu.runtimeClassName: 'nvidia' is not a RuntimeClass this cluster has") and
               "gpu.createRuntimeClass" in m for m in messages), messages
    parse(with_(with_(BASE, "gpu.runtimeClassName", "nvidia"), "gpu.createRuntimeClass", True))


def test_an_adopted_vpc_alone_is_accepted() -> None:
    parse(ADOPTED_VPC)


def test_the_runtimes_that_work_are_accepted() -> None:
    parse(EXISTING)  # k3s: RuntimeClass nvidia by default
    parse(with_(with_(EXISTING, "cluster.nodeDefaultRuntime", "nvidia"), "gpu.runtimeClassName", ""))
    parse(with_(with_(EXISTING, "gpu.runtimeClassName", "gpu"), "gpu.createRuntimeClass", True))


# --- class 6: problems behind a section that failed to parse ------------------------------------------------------
def test_a_run_with_a_failed_section_says_how_many_checks_it_could_not_run() -> None:
    raw = with_(with_(BASE, "gpuNodeGroups.train.maxSize", "two"), "storage.kind", "efs")
    with pytest.raises(ConfigError) as caught:
        parse(raw)
    text = str(caught.value)
    found = re.search(r"(\d+) more check\(s\) did not run until (.+?) parse", text)
    assert found, text
    assert int(found.group(1)) >= 1 and "gpuNodeGroups" in found.group(2), text
    # A clean failure (nothing skipped) says nothing of the sort.
    with pytest.raises(ConfigError) as caught:
        parse(with_(BASE, "region", "mars-1"))
    assert "did not run" not in str(caught.value)


# --- class 5, found by mutating the committed stacks: what the simulation would reject, refused first -------------
def _stack(stack: str, edit: Any) -> dict[str, Any]:
    from tests.test_applicability import _raw

    raw, _ = _raw(stack)
    edit(raw)
    return raw


def _refusals(stack: str, edit: Any) -> list[str]:
    from stages.config import parse_stack_config
    from tests.test_applicability import _raw

    _, secrets = _raw(stack)
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(_stack(stack, edit), stack=stack, secret_keys=secrets)
    return [str(problem) for problem in caught.value.problems]


def test_pods_that_fit_the_gpus_but_not_the_cpu_of_the_group_are_refused() -> None:
    """dev's ScaledJob runs up to 4 one-slice pods of 900m on g6.xlarge nodes: one node has room for 3 by cpu, so
    at maxSize 1 the fourth would never be scheduled (the simulation's `scheduled`)."""
    messages = _refusals("dev", lambda raw: raw["gpuNodeGroups"]["g6"].update(maxSize=1))
    assert any(m.startswith("workloads.mnist.autoscaling.maxReplicas: 4 pods don't fit on node group 'g6' at "
                            "maxSize 1: a node holds 3 by cpu") for m in messages), messages


def test_an_elastic_pytorchjob_needs_a_restart_per_worker_and_one_more() -> None:
    messages = _refusals("prod", lambda raw: raw["workloads"]["gpt-pretrain"].update(backoffLimit=1))
    assert any(m.startswith("workloads.gpt-pretrain.backoffLimit: 1 on an elastic job of up to 4 workers makes its "
                            "runPolicy.backoffLimit 4") for m in messages), messages


def test_a_swarm_task_restart_limit_of_zero_is_refused_because_swarmkit_reads_it_as_none() -> None:
    messages = _refusals("edge-swarm", lambda raw: raw["workloads"]["swarm-finetune"].update(backoffLimit=0))
    assert any(m.startswith("workloads.swarm-finetune.backoffLimit: 0 would be each Swarm task's restart policy")
               for m in messages), messages


def test_gang_size_counts_every_resource_so_config_and_simulation_agree(tmp_path: Path) -> None:
    """prod's pre-training at 3 GPUs per pod: the GPUs would hold two pods a node, its cpu one, so the gang needs 4
    nodes of a group that runs 2 at minSize: the group gets the provisioning check (not a gang Kueue's
    topology-aware scheduling could never place, as the simulation found when the config counted GPUs only)."""
    from stack_config.derived import gang_nodes, pods_per_node, provisioning_groups
    from stages.config import parse_stack_config
    from tests.test_applicability import _raw

    _, secrets = _raw("prod")
    config = parse_stack_config(_stack("prod", lambda raw: raw["workloads"]["gpt-pretrain"].update(gpusPerNode=3)),
                                stack="prod", secret_keys=secrets)
    workload = config.workloads["gpt-pretrain"]
    assert pods_per_node(config, workload) == (1, "cpu") and gang_nodes(config, workload) == 4
    assert "h100" in provisioning_groups(config)


@pytest.mark.slow
@pytest.mark.parametrize(("stack", "path", "value"), [
    ("dev", "gpuNodeGroups.g6.maxSize", 1), ("prod", "workloads.gpt-pretrain.gpusPerNode", 3),
    ("prod", "workloads.gpt-pretrain.backoffLimit", 1), ("edge-swarm", "workloads.swarm-finetune.backoffLimit", 0),
    ("edge", "workloads.edge-finetune.memory", "1Gi"), ("edge", "workloads.edge-finetune.ephemeralStorage", "1Gi"),
    ("edge", "gpu.runtimeClassName", ""), ("edge", "gpu.runtimeClassName", "gpu"),
    ("dev", "gpu.runtimeClassName", "nvidia"), ("edge", "cluster.nodeDefaultRuntime", "nvidia"),
])
def test_a_config_the_rules_accept_is_one_the_simulation_passes(tmp_path: Path, stack: str, path: str,
                                                                value: Any) -> None:
    """One oracle per question: where the rendered cluster's simulation would reject a stack for a reason its config
    alone decides, the config refuses it first (with its key path), so an accepted config plans and simulates
    clean. Each case is a mutation of a committed stack that the simulation once rejected after the config had
    accepted it, or a runtime precondition (class 5)."""
    from tests.conftest import plan_modified
    from verify import render as gtp_cluster
    from verify.simulate import simulate

    def edit(config: dict[str, Any]) -> None:
        head, *rest = path.split(".")
        node = config.setdefault(f"gtp:{head}", {})
        for part in rest[:-1]:
            node = node.setdefault(part, {})
        node[rest[-1]] = value

    try:
        plan = plan_modified(tmp_path, stack, edit)
    except ConfigError as error:
        assert any(str(problem).startswith(path.rsplit(".", 1)[0]) or str(problem).startswith("workloads.")
                   for problem in error.problems), error
        return
    report = simulate(plan, gtp_cluster.render_cluster(plan))
    failed = {name: check["findings"][:1] for name, check in report["checks"].items() if check["findings"]}
    assert report["ok"], failed


def test_alternatives_read_as_either_and_refuse_being_narrowed() -> None:
    """`a | b` applies where either applies, is described as both, keeps its reader; `&` on alternatives is refused
    (which alternative it narrows would be ambiguous)."""
    either = (app.when("image.build", True) | app.when("image.registry", "ecr")).read_by("x")
    assert app.describe(either) == "where image.build is true or where image.registry is 'ecr'"
    assert either.reader == "x" and len(either.all_conditions()) == 2
    with pytest.raises(ValueError, match="alternatives"):
        _ = either & app.when("storage.kind", "efs")
