"""How the cluster-test harness names what it applies and watches (run.py, day_two.py)."""

from __future__ import annotations

from verify.render import ClusterObject

OPERATOR_KINDS = {"PyTorchJob": "training-operator", "TrainJob": "kubeflow-trainer", "JobSet": "jobset",
                  "ScaledJob": "keda", "ElasticJob": "dlrover"}
"""Custom resource kind → the operator whose controller makes its pods (run here, or `not_run`)."""


def subject(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def identity(item: ClusterObject) -> str:
    metadata = item.obj.get("metadata") or {}
    name = metadata.get("name") or "<auto-named>"
    return subject(item.kind, item.namespace, name)
