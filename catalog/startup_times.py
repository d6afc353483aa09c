"""How long things take before a training pod can run: published figures, each with its source.

They are lower bounds, used to refuse timeouts and TTLs that can't be right (stack_config/rules.py
`_check_startup_bound`, `_check_lifecycle`): a value below them fails every time, however the day goes. They are
not estimates to size timeouts with — real start-ups are often slower (larger images, a cold registry, EFA
set-up); the stack's defaults leave that room.
"""

from __future__ import annotations

GPU_NODE_BOOT_SECONDS = 80
"""A new GPU instance from launch to a node that takes pods: "cloud providers take 80-120 seconds to provision and
boot new GPU instances" (Tensorfuse, "Lazy loading performance degradation", Stages of Cold Start,
https://tensorfuse-docs.mintlify.dev/docs/blogs/lazy_loading_performance_degradation). The low end."""

IMAGE_PULL_SECONDS_PER_GB = 42
"""Pulling (download and unpack) a large image onto a fresh node with containerd's default overlayfs snapshotter:
"pulling a 10 GB image from a registry to an instance takes 7-10 minutes" (Tensorfuse, "The Cold Start Problem",
https://tensorfuse.io/docs/blogs/snapshotter_graphs); the low end, 420 s / 10 GB."""

BASE_IMAGE_GB: dict[str, float | None] = {
    # "pytorch/pytorch:2.7.1-cuda11.8-cudnn9-runtime at 3.03 GB vs. devel at 6.66 GB" (EKS Best Practices,
    # AI/ML "Reducing Container Image Sizes", https://docs.aws.amazon.com/eks/latest/best-practices/aiml-performance.html):
    # the x86_64 base (catalog/versions.py BASE_IMAGES) is a runtime image of the same make.
    "cuda-x86_64": 3.03,
    # No published size, and no pinned digest to measure (catalog/versions.py): its pull is left out.
    "cuda-sbsa": None,
    "jetson-l4t": None,
}
"""Base image flavour (catalog/versions.py `BASE_IMAGES`) → size in GB; None: unknown. The training image is at
least its base (what it adds, tools/image_size.py, is left out of a lower bound)."""

EKS_CONTROL_PLANE_SECONDS = 15 * 60
"""Creating an EKS cluster's control plane: "EKS cluster control plane provisioning time currently averages 15
minutes" (the EKS team, aws/containers-roadmap#1227). An average, not a floor: a TTL that ends before it leaves the
stack no time to run anything in an ordinary case."""
