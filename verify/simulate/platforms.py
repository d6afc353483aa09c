"""`image platforms`: does every image of a pod carry the architecture of the nodes the pod may land on?

A node pulls the image's entry for its own platform (`kubernetes.io/arch`); an image without one fails with "no
match for platform in manifest" (or, built for another architecture, "exec format error"). What an image carries:
- an air-gapped stack's mirror lock records it for every mirrored image (tools/mirror.py `manifest_platforms`);
- catalog/images.py `IMAGE_PLATFORMS`, from the publisher's build files;
- an image whose project publishes arm64 as a separate image (catalog/images.py `ARM64_VARIANTS`, DLRover's
  `_aarch64` images) is not that image: it lacks arm64.
Anything else is unknown: recorded in the details (amd64 is every image's first platform here), a finding only
through the rules above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from catalog import node_labels as nl
from catalog.images import ARM64_VARIANTS, IMAGE_PLATFORMS
from conventions.images import Lock, normalized
from verify.simulate.model import CheckResult, ExpandedPod, Finding

NAME = "image platforms"


def _images(pod: ExpandedPod) -> list[str]:
    spec = pod.pod.get("spec") or {}
    return [str(c.get("image")) for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            if c.get("image") and c.get("image") != "<computed>"]


def platforms_of(image: str, upstream: Callable[[str], str | None],
                 lock: Lock | None) -> tuple[tuple[str, ...] | None, str]:
    """(platforms or None when unknown, where that came from). `upstream`: an air-gapped stack's site reference →
    the upstream image it copies (stages/air_gap.py `site_images`, conventions/images.py `upstream_of`)."""
    source = (lock.source_of(image) if lock is not None else None) or upstream(image) or normalized(image)
    if lock is not None and source in lock.platforms:
        return lock.platforms[source], "the mirror lock"
    for known, found in IMAGE_PLATFORMS.items():
        if normalized(known) == source:
            return found, "catalog/images.py IMAGE_PLATFORMS"
    for plain, variant in ARM64_VARIANTS.items():
        if normalized(plain) == source:
            return ("linux/amd64",), f"its project publishes arm64 separately ({variant})"
    return None, "unknown"


def check(pods: list[ExpandedPod], groups: list[Any], lands: Callable[[ExpandedPod, Any], bool],
          upstream: Callable[[str], str | None], lock: Lock | None) -> CheckResult:
    result = CheckResult(NAME)
    unknown: set[str] = set()
    for pod in pods:
        for group in groups:
            arch = group.labels.get(nl.ARCH)
            if arch in (None, nl.UNKNOWN) or not lands(pod, group):
                continue
            for image in _images(pod):
                found, origin = platforms_of(image, upstream, lock)
                if found is None:
                    unknown.add(image)
                    continue
                ok = any(platform.split("/")[1] == arch for platform in found if "/" in platform)
                result.record(ok, None if ok else Finding(
                    f"{pod.owner} on node group {group.name} ({arch})",
                    f"image {image} carries {', '.join(found)} ({origin}), not linux/{arch}: the pull fails ('no "
                    "match for platform in manifest') or the binary can't run",
                    f"use the {arch} image (catalog/images.py ARM64_VARIANTS for operators; the site architecture "
                    "comes from the GPU groups' `architecture`), or keep the pod off these nodes"))
    result.details += [f"platforms unknown (not in the lock or the catalog): {image}" for image in sorted(unknown)]
    return result
