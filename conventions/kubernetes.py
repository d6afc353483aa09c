"""Kubernetes snippets every part of the platform uses the same way: security contexts, Pod Security labels,
recommended labels.

One home, so a hardening change is made once and reaches every pod the platform creates or configures
(training pods, the readiness gate, chart values of Prometheus, Grafana, KEDA and the cluster-autoscaler).
"""

from __future__ import annotations

from typing import Any, Literal

PART_OF = "gtp"
"""Value of `app.kubernetes.io/part-of` on everything the platform creates."""
PURPOSE_LABEL = "gtp.dev/purpose"
POD_SECURITY = "pod-security.kubernetes.io"
RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]

EKS_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
"""An EKS node group's taint effect (the EKS API's enum, what `gpuNodeGroups.<name>.taints` takes) → the effect the
node carries in Kubernetes."""


def pod_security_labels(enforce: PodSecurityLevel, *, warn_and_audit: PodSecurityLevel = "restricted",
                        pin_latest: bool = False) -> dict[str, str]:
    """Pod Security Admission labels of a namespace: `enforce` rejects pods, `warn`/`audit` report what a
    stricter level would reject (so a namespace enforcing `baseline` still shows every `restricted` gap).
    `pin_latest` adds the `-version: latest` labels (the policy of the running Kubernetes version)."""
    labels = {f"{POD_SECURITY}/enforce": enforce, f"{POD_SECURITY}/warn": warn_and_audit,
              f"{POD_SECURITY}/audit": warn_and_audit}
    if pin_latest:
        labels.update({f"{POD_SECURITY}/{mode}-version": "latest" for mode in ("enforce", "warn", "audit")})
    return labels


def platform_labels(purpose: str) -> dict[str, str]:
    """Labels of a namespace the platform owns, saying what it is for."""
    return {"app.kubernetes.io/part-of": PART_OF, PURPOSE_LABEL: purpose}


def app_labels(name: str) -> dict[str, str]:
    """Recommended labels (`app.kubernetes.io/*`) of an application the platform runs."""
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": PART_OF}


def restricted_container(*, user: int | None = None, non_root: bool = False) -> dict[str, Any]:
    """A container securityContext that passes Pod Security `restricted`: no privilege escalation, every
    capability dropped, the runtime's default seccomp profile, and a read-only root filesystem (writes go to
    emptyDirs). `user` also pins uid and gid (and so non-root); `non_root` only asserts non-root."""
    context: dict[str, Any] = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                               "capabilities": {"drop": ["ALL"]}, "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}
    if user is not None:
        context.update({"runAsNonRoot": True, "runAsUser": user, "runAsGroup": user})
    elif non_root:
        context["runAsNonRoot"] = True
    return context


def restricted_pod(*, user: int | None = None, group: int | None = None,
                   fs_group: int | None = None) -> dict[str, Any]:
    """A pod securityContext for Pod Security `restricted`: non-root, runtime-default seccomp; `fs_group` makes
    mounted volumes writable for that group."""
    context: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}
    for key, value in (("runAsUser", user), ("runAsGroup", group), ("fsGroup", fs_group)):
        if value is not None:
            context[key] = value
    return context
