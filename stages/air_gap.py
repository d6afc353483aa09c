"""Air-gapped stacks (`image.airGap`: the site registry they pull from): which images the stack needs, and the site
copy each one is replaced with. ("Offline" elsewhere means the mocked plan; the config key keeps its name.)

The other stages ask `site_images(config)` for the source → site reference map and hand it to their components
(empty when the stack is online). A source the lock file pins becomes `<site repository>@sha256:<digest>`
(`<site repository>:<tag>@sha256:<digest>` in charts that compose references from a tag); one the lock lacks
becomes `<site repository>:<tag>`, so the plan still shows a stack that pulls only from the site, and
`air_gap_problems` names it: the offline plan warns, `pulumi up` refuses (stages/config.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cluster_targets
from catalog import versions
from catalog.images import CHART_IMAGES, OPERATOR_IMAGES, operator_images
from conventions.images import Lock, LockError, normalized, on_registry, read_lock, site_repository, site_tag
from stack_config import Problem, StackConfig
from stack_config.derived import base_image, installed_parts, site_architecture

ROOT = Path(__file__).resolve().parent.parent
LOCK_DIR = "stacks/mirror"
SITE_MANIFEST_DIR = "build/offline"
"""Where the operator manifests rewritten to the site's images are written (per stack), relative to the root."""


def lock_path(config: StackConfig) -> str:
    """The lock file of an air-gapped stack, relative to the project root."""
    offline = config.image.air_gap
    return (offline.lock_file if offline and offline.lock_file else f"{LOCK_DIR}/{config.stack}.lock.json")


def required_images(config: StackConfig) -> list[str]:
    """Every upstream image the stack runs (normalised, sorted): the charts and operators it installs, and the
    training image's base (or the existing image it runs). The training image this stack builds is pushed to
    `image.existingRegistry` itself, so it is not mirrored."""
    images: set[str] = set()
    parts = installed_parts(config)  # the one decision of what the stack installs (stack_config/derived.py)
    # Parts that are charts: CHART_IMAGES is keyed by chart name (EKS-only charts have no row: catalog/images.py).
    for chart in sorted(parts & set(CHART_IMAGES)):
        for slot in CHART_IMAGES[chart]:
            if chart == versions.NVIDIA_DEVICE_PLUGIN.chart and slot.values_path[0] == "nfd" \
                    and config.gpu.node_feature_discovery != "install":
                continue
            images.add(normalized(slot.source))
    if "kueue" in parts:
        images.update(normalized(source) for source in OPERATOR_IMAGES[versions.KUEUE_MANIFEST])
    for operator in sorted(parts & set(versions.OPERATOR_MANIFESTS)):
        images.update(normalized(source) for source in operator_images(versions.OPERATOR_MANIFESTS[operator],
                                                                       site_architecture(config)))
    if config.image.build:
        base = base_image(config)
        if base is not None and not (config.image.air_gap and on_registry(base, config.image.air_gap.site_registry)):
            images.add(normalized(base))
    elif config.image.reference and not (config.image.air_gap
                                         and on_registry(config.image.reference, config.image.air_gap.site_registry)):
        images.add(normalized(config.image.reference))
    for workload in config.workloads.values():  # teams' own training images
        if workload.image and not (config.image.air_gap
                                   and on_registry(workload.image, config.image.air_gap.site_registry)):
            images.add(normalized(workload.image))
    return sorted(images)


@dataclass(frozen=True)
class SiteImages:
    """Source (normalised) → the reference the stack uses instead; empty for an online stack."""

    refs: dict[str, str] = field(default_factory=dict)
    unpinned: tuple[str, ...] = ()
    """Sources the lock file does not pin (referenced by tag on the site registry)."""
    lock_problem: str | None = None
    """Why the lock file could not be used (absent, invalid, for another registry), or None."""


def _read(config: StackConfig) -> tuple[Lock | None, str | None]:
    offline = config.image.air_gap
    assert offline is not None
    path = ROOT / lock_path(config)
    if not path.is_file():
        return None, f"no lock file {lock_path(config)}: run `make mirror STACK={config.stack}`"
    try:
        lock = read_lock(path)
    except LockError as error:
        return None, str(error)
    if lock.site_registry != offline.site_registry:
        return None, (f"{lock_path(config)} was written for {lock.site_registry!r}, not {offline.site_registry!r}: "
                      f"run `make mirror STACK={config.stack}` again")
    return lock, None


def site_images(config: StackConfig) -> SiteImages:
    offline = config.image.air_gap
    if offline is None:
        return SiteImages()
    lock, problem = _read(config)
    refs, unpinned = {}, []
    for source in required_images(config):
        pinned = lock.images.get(source) if lock else None
        if pinned is None:
            unpinned.append(source)
            pinned = f"{site_repository(source, offline.site_registry, offline.prefix)}:{site_tag(source)}"
        refs[source] = pinned
    return SiteImages(refs, tuple(unpinned), problem)


def air_gap_problems(config: StackConfig) -> list[Problem]:
    """What keeps an air-gapped stack from deploying: no usable lock, or images the lock does not pin."""
    if config.image.air_gap is None:
        return []
    images = site_images(config)
    problems = []
    if images.lock_problem:
        problems.append(Problem("image.airGap.lockFile", images.lock_problem))
    if images.unpinned:
        problems.append(Problem("image.airGap.lockFile", f"{len(images.unpinned)} image(s) not pinned by the lock, "
                                f"referenced by tag on the site registry: {', '.join(images.unpinned)}; run "
                                f"`make mirror STACK={config.stack}`"))
    return problems


def check(config: StackConfig) -> Iterator[Problem]:
    """Config rule: an air-gapped stack adopts its cluster, and its training image lives on the site registry."""
    image, offline = config.image, config.image.air_gap
    if offline is None:
        return
    if not cluster_targets.for_config(config).traits.air_gap:  # the key is refused there: stack_config/applicability.py
        return
    site = offline.site_registry
    if image.build and image.registry != "existing":
        yield Problem("image.registry", f"{image.registry!r}: an air-gapped stack pushes its training image to the "
                                        f"site registry: use 'existing' with image.existingRegistry on {site!r}")
    elif image.build and image.existing_registry and not on_registry(image.existing_registry, site):
        yield Problem("image.existingRegistry", f"{image.existing_registry!r} is not on the site registry {site!r}")
