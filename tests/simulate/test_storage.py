"""'volumes writable': who may write each volume a pod mounts, and prod's FSx directory setup Job (issue 13).

The old prod (no setup Job) must fail for the PyTorchJob's checkpoint volume; the stacks as committed pass.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from components.shared_storage import (
    SETUP_CAPABILITIES,
    SETUP_NAMESPACE,
    directories_job_spec,
    directories_script,
    setup_namespace_labels,
)
from policy.gtp_policy.rules_kubernetes import STORAGE_SETUP_CAPABILITIES, STORAGE_SETUP_NAMESPACE, k8s_run_as_non_root
from verify.plan_record import Plan
from verify.render import ClusterObject, render_cluster
from verify.simulate import simulate, storage
from verify.simulate.model import ExpandedPod
from verify.simulate.pods import expand_pods

CHECKPOINTS = "/mnt/shared/checkpoints"


def stack_objects(plan: Plan) -> list[ClusterObject]:
    """The objects the stack applies itself (enough for storage: charts add no claims of the training pods)."""
    return [ClusterObject("stack", obj) for obj in plan.kubernetes_objects()]


def run(plan: Plan, objects: list[ClusterObject], extra_pods: list[ExpandedPod] = ()):
    [result] = storage.check(plan, objects, [*expand_pods(objects, plan), *extra_pods])
    return result


def copied(plan: Plan) -> Plan:
    return dataclasses.replace(plan, resources=[dataclasses.replace(r, inputs=copy.deepcopy(r.inputs),
                                                                    depends_on=list(r.depends_on))
                                                for r in plan.resources])


def is_setup(obj: dict[str, Any]) -> bool:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") == SETUP_NAMESPACE or metadata.get("name") == SETUP_NAMESPACE
            or str(metadata.get("name")).endswith("-shared-setup"))


def old_prod(plan: Plan) -> tuple[Plan, list[ClusterObject]]:
    """prod as the code before the fix planned it: the same objects without the setup namespace, PV, PVC, Job."""
    old = copied(plan)
    old.resources = [r for r in old.resources if not is_setup(r.inputs)]
    return old, [o for o in stack_objects(plan) if not is_setup(o.obj)]


def pod(spec: dict[str, Any], namespace: str = "training-prod", owner: str = "Pod training-prod/probe") -> ExpandedPod:
    return ExpandedPod(owner=owner, source="test", namespace=namespace,
                       pod={"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace}, "spec": spec})


def trainer_spec(volume: dict[str, Any], *, read_only: bool = False, uid: int = 10001) -> dict[str, Any]:
    mount = {"name": "data", "mountPath": "/mnt/shared", **({"readOnly": True} if read_only else {})}
    return {"securityContext": {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid},
            "containers": [{"name": "main", "args": [f"--checkpoint-dir={CHECKPOINTS}/probe"],
                            "securityContext": {"capabilities": {"drop": ["ALL"]}}, "volumeMounts": [mount]}],
            "volumes": [{"name": "data", **volume}]}


# ------------------------------------------------------------------------------------------------ FSx (prod)


def test_old_prod_without_setup_job_fails_for_the_pytorchjob_checkpoint_volume(plans):
    plan, objects = old_prod(plans("prod"))
    result = run(plan, objects)
    subjects = {f.subject for f in result.findings}
    assert "PyTorchJob training-prod/gpt-pretrain Worker: container pytorch, volume shared" in subjects
    finding = next(f for f in result.findings if f.subject.endswith("container pytorch, volume shared"))
    assert "root:root 0755" in finding.rule and f"{CHECKPOINTS}/gpt-pretrain" in finding.rule
    assert "uid 10001" in finding.rule and "setup Job" in finding.fix
    assert result.passed < result.total


def test_prod_with_the_setup_job_passes_and_says_who_made_the_directory(plans):
    plan = plans("prod")
    result = run(plan, stack_objects(plan))
    assert result.findings == [] and result.passed == result.total > 0
    assert any("gpt-pretrain Worker: container pytorch, volume shared" in line
               and f"{CHECKPOINTS}/gpt-pretrain made by Job {SETUP_NAMESPACE}/" in line and "10001:10001 0750" in line
               for line in result.details)


def test_prod_setup_job_shape_pv_claim_and_ordering(plans):
    plan = plans("prod")
    [job] = [r for r in plan.by_type("kubernetes:batch/v1:Job") if r.inputs["metadata"]["namespace"] == SETUP_NAMESPACE]
    [pv] = [r for r in plan.by_type("kubernetes:core/v1:PersistentVolume") if r.name == "storage-setup-volume"]
    [training_pv] = [r for r in plan.by_type("kubernetes:core/v1:PersistentVolume") if r.name == "storage-volume"]
    # A PV binds one claim: the setup namespace gets its own PV of the same file system.
    assert pv.inputs["spec"]["csi"] == training_pv.inputs["spec"]["csi"]
    fsx = plan.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fsx.urn in pv.depends_on
    claim = next(r for r in plan.by_type("kubernetes:core/v1:PersistentVolumeClaim")
                 if r.inputs["metadata"]["namespace"] == SETUP_NAMESPACE)
    assert claim.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"] != training_pv.inputs["metadata"]["name"]
    container = job.inputs["spec"]["template"]["spec"]["containers"][0]
    # The checkpoints directory (a submitted job creates its own in it), then each workload's.
    assert container["command"][2] == " && ".join(
        f"mkdir -p /fsx/{path} && chown 10001:10001 /fsx/{path} && chmod 0750 /fsx/{path}"
        for path in ("checkpoints", "checkpoints/gpt-pretrain", "checkpoints/gpt-finetune"))
    for kind in ("kubeflow.org/v1:PyTorchJob", "trainer.kubeflow.org/v1alpha1:TrainJob"):
        assert plan.depends_transitively(plan.one(f"kubernetes:{kind}"), job)
    namespace = next(r for r in plan.by_type("kubernetes:core/v1:Namespace")
                     if r.inputs["metadata"]["name"] == SETUP_NAMESPACE)
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_a_setup_job_that_chowns_to_another_uid_fails(plans):
    plan = plans("prod")
    objects = []
    for item in stack_objects(plan):
        obj = copy.deepcopy(item.obj)
        if obj["kind"] == "Job" and obj["metadata"].get("namespace") == SETUP_NAMESPACE:
            command = obj["spec"]["template"]["spec"]["containers"][0]["command"]
            command[2] = command[2].replace("chown 10001:10001", "chown 10002:10002")
        objects.append(ClusterObject(item.source, obj))
    result = run(plan, objects)
    finding = next(f for f in result.findings if f.subject.endswith("container pytorch, volume shared"))
    assert "10002:10002" in finding.rule and "may not write" in finding.rule


def test_a_setup_job_the_training_job_does_not_wait_for_fails(plans):
    plan = copied(plans("prod"))
    [job] = [r for r in plan.by_type("kubernetes:batch/v1:Job") if r.inputs["metadata"]["namespace"] == SETUP_NAMESPACE]
    for resource in plan.resources:
        resource.depends_on = [urn for urn in resource.depends_on if urn != job.urn]
    result = run(plan, stack_objects(plan))
    finding = next(f for f in result.findings if f.subject.endswith("container pytorch, volume shared"))
    assert "does not depend on it" in finding.rule and "dependsOn" in finding.fix


def test_a_setup_job_without_chown_capability_provisions_nothing(plans):
    plan = plans("prod")
    objects = []
    for item in stack_objects(plan):
        obj = copy.deepcopy(item.obj)
        if obj["kind"] == "Job" and obj["metadata"].get("namespace") == SETUP_NAMESPACE:
            obj["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = []
        objects.append(ClusterObject(item.source, obj))
    assert any(f.subject.endswith("container pytorch, volume shared") for f in run(plan, objects).findings)


def test_a_read_only_mount_is_not_counted_as_needing_write(plans):
    plan, objects = old_prod(plans("prod"))
    claim = {"persistentVolumeClaim": {"claimName": "shared"}}
    base = run(plan, objects)
    read_only = run(plan, objects, [pod(trainer_spec(claim, read_only=True))])
    claim_read_only = run(plan, objects, [pod(trainer_spec({"persistentVolumeClaim": {"claimName": "shared",
                                                                                         "readOnly": True}}))])
    writable = run(plan, objects, [pod(trainer_spec(claim))])
    assert read_only.total == claim_read_only.total == base.total
    assert writable.total == base.total + 1
    assert any(f.subject == "Pod training-prod/probe: container main, volume data" for f in writable.findings)


# ------------------------------------------------------------------------------------------------ EFS (dev)


def access_point(plan: Plan):
    return plan.one("aws:efs/accessPoint:AccessPoint")


def test_dev_efs_access_point_matches_the_trainer(plans):
    plan = plans("dev")
    inputs = access_point(plan).inputs
    assert inputs["posixUser"] == {"uid": 10001, "gid": 10001}
    assert inputs["rootDirectory"]["creationInfo"] == {"ownerUid": 10001, "ownerGid": 10001, "permissions": "0750"}
    result = run(plan, stack_objects(plan))
    assert result.findings == [] and result.total > 0


def test_efs_access_point_with_another_uid_fails(plans):
    plan = copied(plans("dev"))
    access_point(plan).inputs["posixUser"]["uid"] = 10002
    result = run(plan, stack_objects(plan))
    finding = next(f for f in result.findings if f.subject.endswith("container pytorch, volume shared"))
    assert "uid 10002" in finding.rule and "may not write its root directory" in finding.rule
    assert "posixUser" in finding.fix


def test_efs_access_point_owning_its_root_as_another_user_fails(plans):
    plan = copied(plans("dev"))
    inputs = access_point(plan).inputs
    inputs["posixUser"] = {"uid": 2000, "gid": 2000}
    inputs["rootDirectory"]["creationInfo"].update(ownerUid=2000, ownerGid=2000)
    finding = next(f for f in run(plan, stack_objects(plan)).findings if f.subject.endswith("pytorch, volume shared"))
    assert "writes as uid 2000 but the pod runs as uid 10001" in finding.rule


def test_efs_access_point_without_creation_info_fails(plans):
    plan = copied(plans("dev"))
    del access_point(plan).inputs["rootDirectory"]["creationInfo"]
    finding = next(f for f in run(plan, stack_objects(plan)).findings if f.subject.endswith("pytorch, volume shared"))
    assert "creationInfo" in finding.rule


# ------------------------------------------------------------------------------------------------ other sources


def test_empty_dir_passes_and_config_maps_are_never_counted(plans):
    plan = plans("dev")
    spec = trainer_spec({"emptyDir": {}})
    spec["containers"][0]["volumeMounts"].append({"name": "config", "mountPath": "/etc/x"})
    spec["volumes"].append({"name": "config", "configMap": {"name": "x"}})
    base = run(plan, stack_objects(plan))
    result = run(plan, stack_objects(plan), [pod(spec, namespace="training-dev", owner="Pod training-dev/probe")])
    assert result.total == base.total + 1 and result.passed == base.passed + 1 and result.findings == []


@pytest.mark.parametrize(("uid", "ok"), [(0, True), (None, True), (1000, False)])
def test_host_path_is_root_only(plans, uid, ok):
    plan = plans("dev")
    spec = trainer_spec({"hostPath": {"path": "/var/lib/x"}}, uid=uid or 0)
    if uid is None:
        del spec["securityContext"]
    result = run(plan, stack_objects(plan), [pod(spec, namespace="training-dev", owner="Pod training-dev/probe")])
    assert (result.findings == []) is ok
    if not ok:
        assert "root-owned node directory" in result.findings[0].rule


def test_a_claim_missing_from_the_cluster_fails(plans):
    plan = plans("dev")
    result = run(plan, stack_objects(plan), [pod(trainer_spec({"persistentVolumeClaim": {"claimName": "nope"}}),
                                                 namespace="training-dev", owner="Pod training-dev/probe")])
    assert any("training-dev/nope is not in the cluster" in f.rule for f in result.findings)


# ------------------------------------------------------------------------------------------------ pure parts


def test_may_write_follows_owner_group_other_and_dac_override():
    root = storage.Directory(0, 0, 0o755, "root")
    mine = storage.Directory(10001, 10001, 0o750, "mine")
    trainer = storage.Identity(10001, frozenset({10001}), frozenset())
    group_only = storage.Identity(10002, frozenset({10001}), frozenset())
    assert not storage.may_write(trainer, root) and storage.may_write(trainer, mine)
    assert not storage.may_write(group_only, mine)  # 0750: the group reads only
    assert storage.may_write(storage.Identity(0, frozenset({0}), frozenset({"DAC_OVERRIDE"})), mine)
    assert not storage.may_write(storage.Identity(0, frozenset({0}), frozenset()), mine)
    assert storage.may_write(group_only, storage.Directory(1, 10001, 0o770, "group"))
    assert storage.may_write(group_only, storage.Directory(1, 1, 0o777, "world"))


def test_setup_script_counts_a_directory_only_when_made_owned_and_moded():
    script = directories_script("/fsx", ["checkpoints/a", "/data/b/"], 10001, 10002)
    assert storage.parse_setup_script(script, "/fsx") == [("checkpoints/a", 10001, 10002, 0o750),
                                                          ("data/b", 10001, 10002, 0o750)]
    assert storage.parse_setup_script("mkdir -p /fsx/a && chmod 0750 /fsx/a", "/fsx") == []
    assert storage.parse_setup_script("chown 1:1 /fsx/a && chmod 0777 /fsx/a", "/fsx") == []
    assert storage.parse_setup_script(script, "/other") == []


def test_written_directory_is_the_deepest_path_named_under_the_mount():
    containers = [{"args": ["--checkpoint-dir=/mnt/shared/checkpoints/job", "--x=/mnt/sharedother/y"]},
                  {"command": ["sh", "-c", "ls /mnt/shared/data"]}]
    assert storage.written_directory(containers, "/mnt/shared") == "/mnt/shared/checkpoints/job"
    assert storage.written_directory([{"args": ["--lr=1"]}], "/mnt/shared/") == "/mnt/shared"


@pytest.mark.parametrize("bad", ["", "/", "../etc", "checkpoints/../../x"])
def test_directories_script_rejects_paths_outside_the_root(bad):
    with pytest.raises(ValueError, match="directories"):
        directories_script("/fsx", [bad], 1, 1)


def test_setup_job_is_least_privilege():
    spec = directories_job_spec(image="img@sha256:" + "0" * 64, claim_name="shared", directories=["c/j"],
                                uid=10001, gid=10001, node_selector={"gtp.dev/role": "system"})
    pod_spec = spec["template"]["spec"]
    [container] = pod_spec["containers"]
    context = container["securityContext"]
    assert context["runAsUser"] == 0 and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]}
    assert context["readOnlyRootFilesystem"] is True and context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["automountServiceAccountToken"] is False and pod_spec["nodeSelector"] == {"gtp.dev/role": "system"}
    assert container["volumeMounts"] == [{"name": "shared", "mountPath": "/fsx"}]
    assert pod_spec["volumes"] == [{"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}}]
    assert "ttlSecondsAfterFinished" not in spec
    assert setup_namespace_labels()["pod-security.kubernetes.io/enforce"] == "baseline"


def _job_record(namespace: str, add: list[str]) -> dict[str, Any]:
    spec = directories_job_spec(image="img", claim_name="shared", directories=["c"], uid=1, gid=1)
    spec["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = add
    return {"type": "kubernetes:batch/v1:Job", "inputs": {"metadata": {"namespace": namespace}, "spec": spec}}


def test_policy_allows_root_only_in_the_setup_namespace_with_chown_capabilities():
    assert STORAGE_SETUP_NAMESPACE == SETUP_NAMESPACE and set(SETUP_CAPABILITIES) == STORAGE_SETUP_CAPABILITIES
    assert list(k8s_run_as_non_root(_job_record(SETUP_NAMESPACE, list(SETUP_CAPABILITIES)), None)) == []
    assert list(k8s_run_as_non_root(_job_record(SETUP_NAMESPACE, ["CHOWN", "SYS_ADMIN"]), None))
    assert list(k8s_run_as_non_root(_job_record("training-prod", list(SETUP_CAPABILITIES)), None))


# ------------------------------------------------------------------------------------------------ whole stacks


@pytest.mark.parametrize("stack", ["dev", "edge", "prod"])
def test_stacks_simulate_clean_for_storage(plans, stack):
    plan = plans(stack)
    check = simulate(plan, render_cluster(plan))["checks"][storage.NAME]
    assert check["findings"] == [] and check["passed"] == check["total"] > 0
    if stack == "edge":  # the site's StorageClass: stated as an assumption, not a verified fact
        assert any("nfs-client is the site's, assumed writable" in line for line in check["details"])


def test_unbalanced_quotes_do_not_crash_the_parsers():
    assert storage.parse_setup_script("mkdir -p '/fsx/a && chown 1:1 /fsx/a", "/fsx") == []
    assert storage.written_directory([{"args": ["echo 'x /mnt/shared/a"]}], "/mnt/shared") == "/mnt/shared/a"
