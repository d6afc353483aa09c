"""List prices of what an EKS stack is billed for besides its nodes: the EKS control plane, NAT gateways and the
shared file system, each with the page it is cited from and when that page said it.

Hand-kept, unlike `ec2_prices.py`: there is no generated table of these prices in the repository. A rate is here
only where a page could be cited; a (Region, item) without one is reported by `verify/cost.py` as "not counted
(no cited rate ...)", never guessed from another Region. Refresh: read each `source` again and edit the row and its
`as_of`; `tests/test_cost.py` computes its expected totals from these rows.
"""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_MONTH = 730
"""A GB-month rate per hour: 365 × 24 / 12, the average month. AWS prorates GB-month charges over the hours of the
actual month (the EFS pricing page's example divides by 744 for March), so a 28-day month bills about 9% more per
hour and a 31-day one 2% less."""


@dataclass(frozen=True)
class Rate:
    """One cited list price."""

    amount: float
    """In the partition's currency (USD here), per `unit`."""
    unit: str
    """`hour` or `GB-month` (AWS's GB in these storage prices is 2^30 bytes, the GiB of the stack's sizes)."""
    source: str
    """The page the number is read from."""
    as_of: str
    """When that page said it (the date given with the citation)."""
    note: str = ""
    """How the page says it, where that is less than a plain table row (a worked example, a secondary source)."""

    @property
    def hourly(self) -> float:
        return self.amount if self.unit == "hour" else self.amount / HOURS_PER_MONTH


_EKS_BLOG = "https://aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing/"
EKS_CONTROL_PLANE: dict[str, dict[str, Rate]] = {
    "aws": {
        "STANDARD": Rate(0.10, "hour", _EKS_BLOG, "2024-04-01",
                         "per cluster per hour while its Kubernetes version is in standard support (the AWS Containers "
                         "blog's pricing announcement, effective from the April 2024 billing cycle; "
                         "https://aws.amazon.com/eks/pricing/)"),
        "EXTENDED": Rate(0.60, "hour", _EKS_BLOG, "2024-04-01",
                         "per cluster per hour in total while its version is in extended support; $0.10 before that"),
    },
}
"""Partition → the cluster's upgrade policy support type (`components/eks_cluster.py` SUPPORT_TYPE) → its hourly fee.
With STANDARD a version is never in extended support: EKS upgrades the cluster when standard support ends."""

_VPC_PRICING = "https://aws.amazon.com/vpc/pricing/"
NAT_GATEWAY: dict[str, Rate] = {
    "us-east-2": Rate(0.045, "hour", _VPC_PRICING, "2026-09-20",
                      "the page's NAT gateway pricing example for US East (Ohio), as read on 2026-09-20"),
    "us-east-1": Rate(0.045, "hour", "https://rajesh.medampudi.com/blog/aws-nat-gateway-hidden-tax", "2026",
                      "secondary source: the VPC pricing page renders per-Region rates per visitor; this page (and "
                      "basavytix.com/blog/aws-nat-gateway-pricing) gives $0.045 per NAT gateway-hour for us-east-1 and "
                      "us-east-2, the latter matching AWS's own example"),
}
"""Region → the hourly charge of one NAT gateway (its data processing per GB is not counted)."""

EFS_STANDARD: dict[str, Rate] = {
    "us-east-1": Rate(0.30, "GB-month", "https://aws.amazon.com/efs/pricing/", "undated copy",
                      "Standard storage, the page's default Region US East (N. Virginia); billed by the storage used, "
                      "which the claim's size does not bound"),
}
"""Region → EFS Standard storage per GB-month."""

FSX_LUSTRE: dict[tuple[str, str, int | None], Rate] = {}
"""(Region, deployment type, MB/s/TiB or None for SCRATCH_2) → SSD storage per GB-month. Empty: the FSx for Lustre
pricing page renders its rates per visitor and no copy of a rate could be cited, so FSx is named as not counted."""

EBS_GP3: dict[str, Rate] = {}
"""Region → gp3 storage per GB-month. Empty for the same reason: the Prometheus volume is named as not counted."""

NOT_COUNTED = ("node root volumes", "NAT gateway data processing", "data transfer", "load balancers",
               "CloudWatch logs", "ECR storage", "S3", "KMS keys and requests", "API requests")
"""Charges of an EKS stack that depend on use, or on resources the plan does not size."""
