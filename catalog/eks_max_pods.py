"""Pods an EKS node of each instance type may run (the kubelet's `maxPods` with the VPC CNI, no prefix
delegation): ENIs x (IPv4 addresses per ENI - 1) + 2.

Copied from the EKS AMI's table, awslabs/amazon-eks-ami `templates/shared/runtime/eni-max-pods.txt` (the file
AL2023's nodeadm reads when the node group sets no max pods). For multi-card types (p5) it counts network card
0 only, as that file does. Kube-reserved memory on EKS AMIs is derived from it (255 MiB + 11 MiB per pod).
"""

from __future__ import annotations

_SIZE_PATTERN = {"large": 29, "xlarge": 58, "2xlarge": 58, "4xlarge": 234, "8xlarge": 234}
# Every general purpose / compute / memory family of catalog/cpu_instances.py has these limits per size.
_CPU_FAMILIES = ("m5", "m6i", "m6a", "m7i", "m7a", "c6i", "c7i", "r6i", "r7i", "m6g", "m7g", "c7g", "r7g")

MAX_PODS: dict[str, int] = {
    **{f"{family}.{size}": pods for family in _CPU_FAMILIES for size, pods in _SIZE_PATTERN.items()},
    # GPU types (same file).
    "g4dn.xlarge": 29, "g4dn.2xlarge": 29, "g4dn.4xlarge": 29, "g4dn.8xlarge": 58, "g4dn.12xlarge": 234,
    "g4dn.16xlarge": 58, "g4dn.metal": 737,
    "g5.xlarge": 58, "g5.2xlarge": 58, "g5.4xlarge": 234, "g5.8xlarge": 234, "g5.12xlarge": 737,
    "g5.16xlarge": 234, "g5.24xlarge": 737, "g5.48xlarge": 345,
    "g5g.xlarge": 58, "g5g.2xlarge": 58, "g5g.4xlarge": 234, "g5g.8xlarge": 234, "g5g.16xlarge": 737,
    "g5g.metal": 737,
    "g6.xlarge": 58, "g6.2xlarge": 58, "g6.4xlarge": 234, "g6.8xlarge": 234, "g6.12xlarge": 234,
    "g6.16xlarge": 737, "g6.24xlarge": 737, "g6.48xlarge": 737,
    "g6e.xlarge": 58, "g6e.2xlarge": 58, "g6e.4xlarge": 234, "g6e.8xlarge": 234, "g6e.12xlarge": 292,
    "g6e.16xlarge": 737, "g6e.24xlarge": 492, "g6e.48xlarge": 492,
    "gr6.4xlarge": 234, "gr6.8xlarge": 234,
    "p4d.24xlarge": 737, "p4de.24xlarge": 737,
    "p5.4xlarge": 118, "p5.48xlarge": 100, "p5e.48xlarge": 100, "p5en.48xlarge": 198,
    "p6-b200.48xlarge": 198, "p6-b300.48xlarge": 198,
}
