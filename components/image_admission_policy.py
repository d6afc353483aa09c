"""ImageAdmissionPolicy: the API server refuses a training pod whose images are neither the stack's own build nor a
digest CI signed (`image.signedDigests`).

The production image rule (stack_config/rules.py `_check_production_images`, the policy pack's
`production_image_signed_or_own_build`) checks what the stack and `tools.submit` render; a job created by other
means (`kubectl create`, another tool) reaches the cluster unchecked. A ValidatingAdmissionPolicy
(admissionregistration.k8s.io/v1, GA in Kubernetes 1.30: no webhook, the API server evaluates its CEL) on every
Pod of the training namespace covers every kind at once: whatever controller turns a PyTorchJob, TrainJob or Job
into pods, the pods are admitted here. Images compare as exact strings, as the config rule does (a pod names its
image as written: the stack's pods by digest).

Pods are matched on CREATE and UPDATE (a pod's container images are mutable) and on the `ephemeralcontainers`
subresource (`kubectl debug`). `failurePolicy: Fail`: an expression that can't be evaluated refuses the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace (immutable, Kubernetes >= 1.22): selects exactly one namespace."""



def images_expression(pod: str) -> str:
    """Every image pod `pod` (`object`, `oldObject`) runs (each container list mapped to strings first: CEL
    concatenates lists of one type, and an ephemeral container's type differs from a container's)."""
    return (f"{pod}.spec.containers.map(c, c.image)"
            f" + (has({pod}.spec.initContainers) ? {pod}.spec.initContainers.map(c, c.image) : [])"
            f" + (has({pod}.spec.ephemeralContainers) ? {pod}.spec.ephemeralContainers.map(c, c.image) : [])")


IMAGES_EXPRESSION = images_expression("object")
OLD_IMAGES_EXPRESSION = f"oldObject == null ? [] : {images_expression('oldObject')}"
"""The images the pod already ran (`oldObject` is null on CREATE): an UPDATE is refused only for an image it
introduces, so a running pod whose digest left the list (a new build) can still be updated and finish."""
VALIDATION_EXPRESSION = "variables.images.all(c, c in variables.allowed || c in variables.oldImages)"
MESSAGE_EXPRESSION = ("'images neither the stack build nor in image.signedDigests: ' + "
                      "variables.images.filter(c, !(c in variables.allowed || c in variables.oldImages)).join(', ')")


def allowed_images_expression(images: Sequence[str]) -> str:
    """A CEL list literal of the allowed image references (duplicates dropped, order kept), each single-quoted."""
    unique = list(dict.fromkeys(images))
    if not unique:
        raise ValueError("the allowed images must hold at least the stack's own build")
    quoted = ("'" + image.replace("\\", "\\\\").replace("'", "\\'") + "'" for image in unique)
    return "[" + ", ".join(quoted) + "]"


def policy_spec(namespace: str, allowed: Any) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy's spec for the pods of `namespace`; `allowed` is the CEL list of images
    (`allowed_images_expression`, or an Output of it)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                               "resources": ["pods", "pods/ephemeralcontainers"]}],
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        },
        "variables": [{"name": "images", "expression": IMAGES_EXPRESSION},
                      {"name": "oldImages", "expression": OLD_IMAGES_EXPRESSION},
                      {"name": "allowed", "expression": allowed}],
        "validations": [{"expression": VALIDATION_EXPRESSION, "messageExpression": MESSAGE_EXPRESSION,
                         "reason": "Forbidden"}],
    }


def binding_spec(policy_name: str) -> dict[str, Any]:
    """The binding that puts the policy in force: refuse (`Deny`), not only warn or audit."""
    return {"policyName": policy_name, "validationActions": ["Deny"]}


@dataclass
class ImageAdmissionPolicyArgs:
    namespace: str
    """The training namespace whose pods are checked."""
    allowed_images: Sequence[pulumi.Input[str]]
    """Image references the namespace's pods may run: the stack's own build (by digest) and `image.signedDigests`."""
    provider: k8s.Provider | None = None
    protect: bool = True
    """Protect both objects (production stacks): removing them silently lifts the rule."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class ImageAdmissionPolicy(pulumi.ComponentResource):
    policy: k8s.admissionregistration.v1.ValidatingAdmissionPolicy
    binding: k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding

    def __init__(self, name: str, args: ImageAdmissionPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gtp:workload:ImageAdmissionPolicy", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on,
                                       protect=args.protect)
        policy_name = f"{args.namespace}-signed-images"
        allowed = pulumi.Output.all(*args.allowed_images).apply(allowed_images_expression)
        # The SDK types a spec as its TypedDict; the pure functions return the same shape as a plain dict.
        self.policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy", metadata={"name": policy_name}, spec=cast(Any, policy_spec(args.namespace, allowed)),
            opts=child)
        self.binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-binding", metadata={"name": policy_name}, spec=cast(Any, binding_spec(policy_name)),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.policy])))
        self.register_outputs({"policy": policy_name})
