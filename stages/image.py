"""Image stage: the training image — built and pushed by this stack, or an existing one — referenced by digest."""

from __future__ import annotations

from pathlib import Path

import pulumi

from cluster_targets import Cluster
from components import image_spec
from components.training_image import TrainingImage, TrainingImageArgs
from conventions.images import normalized
from stack_config import StackConfig
from stack_config.derived import base_image, base_image_refusal, image_variant
from stages.air_gap import site_images

CONTEXT_DIR = Path("images/trainer")
"""Relative: Pulumi runs the program from the project directory."""


def build_base_image(config: StackConfig) -> str:
    """The base this stack's image builds on (a placeholder that `pulumi up` refuses when unpinned); an offline
    stack builds on the site registry's copy."""
    base = base_image(config)
    if base is None:
        return f"unpinned-{config.image.platform.replace('/', '-')}-base"
    return site_images(config).refs.get(normalized(base), base)


def run_reference(config: StackConfig) -> str | None:
    """The existing image the stack runs (`build: false`); an air-gapped stack runs the site registry's copy."""
    reference = config.image.reference
    if reference is None:
        return None
    return site_images(config).refs.get(normalized(reference), reference)


def build_image(config: StackConfig, cluster: Cluster) -> TrainingImage:
    """`TrainingImage.image_ref` is the image *by digest* every workload runs.

    CI builds the same image for the same stack (`tools/image_supply.py`, `.github/workflows/image.yml`):
    platform, base, variant and tag come from the same functions, so both produce one content tag."""
    image, lifecycle = config.image, config.lifecycle
    revision, source = image_spec.vcs_labels(Path.cwd(), path=CONTEXT_DIR.as_posix())
    refusal = base_image_refusal(config)
    if refusal is not None:
        # A preview (and the offline plan) still shows the rest of the stack; `pulumi up` never builds on it.
        if not pulumi.runtime.is_dry_run():
            raise pulumi.RunError(refusal)
        pulumi.log.warn(refusal)
    return TrainingImage("trainer", TrainingImageArgs(
        context_dir=CONTEXT_DIR,
        platform=image.platform,
        net_variant=image_variant(config),
        vcs_revision=revision,
        source_url=source,
        base_image=build_base_image(config),
        build=image.build,
        reference=run_reference(config),
        registry=image.registry,
        repository_name=config.repository_name,
        existing_registry=image.existing_registry,
        existing_registry_username=image.existing_registry_username,
        existing_registry_password=(pulumi.Output.secret(config.registry_password.get_secret_value())
                                    if config.registry_password else None),
        keep_tagged_images=image.keep_tagged_images,
        expire_untagged_days=image.expire_untagged_days,
        # A destroy must finish once an image was pushed (ECR refuses to delete a non-empty repository, and
        # docker.Image deletes no pushed images): every stack that may be destroyed force-deletes its repository.
        # Not a protected stack (its images are the record of what ran), and not the shared repository that other
        # stacks pull by digest.
        force_delete=not lifecycle.protect and not image.shared_repository,
        protect=lifecycle.protect,
        kms_deletion_window_days=lifecycle.kms_deletion_window,
    ), opts=cluster.aws_opts)
