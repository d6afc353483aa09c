"""GpuReadiness: a Job that succeeds once every node group advertises the GPU capacity it should.

Pulumi's Kubernetes provider waits for a Job to complete (and fails the update when the Job fails), so every
training workload that depends on this Job starts only once whole GPUs (`nvidia.com/gpu`), shared slices
(`nvidia.com/gpu.shared` = GPUs x replicas) and EFA devices (`vpc.amazonaws.com/efa`) of each node group's
`minSize` nodes are schedulable. The check (`components/gpu_readiness_check.py`, stdlib only) is shipped in a
ConfigMap and runs with the training image, which is already in the stack's registry and referenced by
digest, so the gate adds no image to trust. Groups at `minSize` 0 are skipped (no node is guaranteed; the
autoscaler adds one when a job asks), with the reason logged by the Job: waiting for one would force a GPU node
up on every `pulumi up`. Whether such a group *can* grow from zero is proved offline instead: the plan's
scale-from-zero simulation (verify/simulate/autoscaler.py) fails when a pod meant for it doesn't fit the
autoscaler's template node.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from conventions.kubernetes import platform_labels, pod_security_labels, restricted_container, restricted_pod

CHECK_SCRIPT = Path(__file__).resolve().parent / "gpu_readiness_check.py"
NAMESPACE = "gpu-readiness"
SERVICE_ACCOUNT = "gpu-readiness"
POLL_SECONDS = 10
# Slack on top of the check's own timeout: image pull and pod start before, the API's Job status after.
START_SLACK_SECONDS = 300


def gate_files(expectations: dict[str, Any]) -> dict[str, str]:
    """The ConfigMap's files: the check script and its expectations."""
    return {"check.py": CHECK_SCRIPT.read_text(),
            "expectations.json": json.dumps(expectations, indent=2, sort_keys=True) + "\n"}


def checksum(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def namespace_labels() -> dict[str, str]:
    return pod_security_labels("restricted") | platform_labels("gpu-readiness")


def cluster_role_rules() -> list[dict[str, Any]]:
    """Read nodes, nothing else."""
    return [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]


def job_spec(image: pulumi.Input[str], config_map: pulumi.Input[str], timeout_seconds: int,
             image_pull_secrets: list[str], check_sha256: str = "") -> dict[str, Any]:
    """The Job's spec: one non-root, read-only, capability-less pod running the check script.

    `check_sha256` (of the script and expectations) goes into the pod template: a Job's template is immutable,
    so a changed check replaces the Job and the gate runs again."""
    restricted = restricted_container(non_root=True)
    resources = {"cpu": "100m", "memory": "128Mi"}
    pod: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        # The one pod that talks to the API server: it needs its token to list nodes. Every other pod of the
        # platform runs without one (the ServiceAccount below does not automount it either).
        "automountServiceAccountToken": True,
        "restartPolicy": "Never",
        "securityContext": restricted_pod(user=65534, group=65534),
        "containers": [{
            "name": "check",
            "image": image,
            "command": ["python3", "/gate/check.py", "/gate/expectations.json"],
            "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
            "securityContext": restricted,
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "volumeMounts": [{"name": "gate", "mountPath": "/gate", "readOnly": True},
                             {"name": "tmp", "mountPath": "/tmp"}],
        }],
        "volumes": [{"name": "gate", "configMap": {"name": config_map}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
    }
    if image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in image_pull_secrets]
    return {
        # The script retries transient API errors itself; a failed run means the capacity never came.
        "backoffLimit": 0,
        "activeDeadlineSeconds": timeout_seconds + START_SLACK_SECONDS,
        # No ttlSecondsAfterFinished: a Job deleted behind Pulumi's back would be recreated on every update.
        "template": {"metadata": {"labels": {"app.kubernetes.io/name": "gpu-readiness"},
                                  "annotations": {"gtp.dev/check-sha256": check_sha256}}, "spec": pod},
    }


@dataclass
class GpuReadinessArgs:
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    image: pulumi.Input[str]
    """The training image, by digest (it has python3)."""
    expectations: dict[str, Any]
    """From `readiness_expectations(config)`."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """What advertises the capacity: the device plugin and EFA plugin releases."""
    image_pull_secrets: list[str] = field(default_factory=list)
    """Names of `kubernetes.io/dockerconfigjson` Secrets in the gate's namespace. Default none: EKS nodes pull
    from ECR with their instance role, and an edge site's nodes are expected to hold their registry's
    credentials (k3s: `/etc/rancher/k3s/registries.yaml`)."""


class GpuReadiness(pulumi.ComponentResource):
    job: k8s.batch.v1.Job

    def __init__(self, name: str, args: GpuReadinessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:gpu:GpuReadiness", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        timeout = int(args.expectations["timeoutSeconds"])
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": NAMESPACE, "labels": namespace_labels()}, opts=k8s_opts)
        ns = namespace.metadata["name"]
        account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata={"name": SERVICE_ACCOUNT, "namespace": ns},
            automount_service_account_token=False, opts=k8s_opts)
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role", metadata={"name": "gtp-gpu-readiness"}, rules=cluster_role_rules(), opts=k8s_opts)
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding", metadata={"name": "gtp-gpu-readiness"},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata["name"]},
            subjects=[{"kind": "ServiceAccount", "name": account.metadata["name"], "namespace": ns}], opts=k8s_opts)
        data = gate_files(args.expectations)
        script = k8s.core.v1.ConfigMap(
            f"{name}-script", metadata={"name": "gpu-readiness-check", "namespace": ns}, data=data, opts=k8s_opts)
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                # Auto-named (gpu-readiness-job-<suffix>). A changed check replaces the Job, and its script
                # ConfigMap too (a ConfigMap's data forces replacement), which has a fixed name and so is deleted
                # first; the engine then deletes the Job first as well (`make up-test` saw it; verify/plan_diff.py
                # `PlanDiff.delete_first`). Nothing that depends on the gate is replaced with it: they wait on it
                # through depends_on only, no input of theirs comes from its outputs.
                "namespace": ns,
                # The provider's await for a Job must outlast the check's own timeout (its default is 10 min).
                "annotations": {
                    "pulumi.com/timeoutSeconds": str(timeout + START_SLACK_SECONDS),
                    "checkov.io/skip1": "CKV_K8S_38=the gate reads node capacity from the API; its own "
                                        "ServiceAccount may only get/list nodes",
                },
            },
            spec=job_spec(args.image, script.metadata["name"], timeout, args.image_pull_secrets, checksum(data)),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[binding, script, *args.depends_on]),
        )
        self.register_outputs({})
