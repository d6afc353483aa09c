"""IAM policy documents as plain data: visible in the plan, checked by the policy pack, no data-source calls."""

from __future__ import annotations

import json
from typing import Any

PARTITION = "aws"


def managed_policy(name: str) -> str:
    return f"arn:{PARTITION}:iam::aws:policy/{name}"


def document(statements: list[dict[str, Any]]) -> str:
    """A policy document as the JSON string IAM stores (stable key order, so plans are deterministic)."""
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def service_trust(service: str, *, tag_session: bool = False) -> str:
    """Trust policy letting an AWS service principal assume the role."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return document([{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}])


def pod_identity_trust() -> str:
    """Trust policy for EKS Pod Identity. Which service account may use the role is fixed by the
    PodIdentityAssociation (one namespace + one service account), not by this policy."""
    return service_trust("pods.eks.amazonaws.com", tag_session=True)
