"""AWS Regions by partition: the values `region` may take.

Sources, as of 2025-12: "AWS Regions"
(https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html) and the endpoints of the
`aws-cn` and `aws-us-gov` partitions (https://docs.amazonaws.cn/en_us/aws/latest/userguide/endpoints-arns.html,
https://docs.aws.amazon.com/govcloud-us/latest/UserGuide/using-govcloud-endpoints.html). A Region
launched later is added here (one line) before a stack can use it.
"""

from __future__ import annotations

AWS_REGIONS: dict[str, tuple[str, ...]] = {
    "aws": (
        "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
        "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
        "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2", "eu-north-1",
        "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1",
        "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2",
    ),
    "aws-cn": ("cn-north-1", "cn-northwest-1"),
    "aws-us-gov": ("us-gov-east-1", "us-gov-west-1"),
}
"""Partition → its Regions."""

REGIONS: tuple[str, ...] = tuple(region for regions in AWS_REGIONS.values() for region in regions)


def partition(region: str) -> str:
    """The partition of a known Region (`aws`, `aws-cn`, `aws-us-gov`)."""
    return next(name for name, regions in AWS_REGIONS.items() if region in regions)


EKS_DISALLOWED_ZONE_IDS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("use1-az3",),
    "us-west-1": ("usw1-az2",),
    "ca-central-1": ("cac1-az3",),
}
"""Region → Availability Zone IDs where EKS places no control-plane network interfaces: cluster subnets "can't
reside" there (awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc @101184ec, "Subnet requirements
for clusters"). IDs, not names: zone names are shuffled per account."""
