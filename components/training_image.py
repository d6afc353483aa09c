"""TrainingImage: the registry, the build and push of `images/trainer`, and the image reference *by digest*.

Attestations (SBOM, provenance) and signatures are CI's job, not this component's
(`.github/workflows/image.yml`, `tools/image_supply.py`): CI runs `docker buildx build --sbom=true
--provenance=mode=max --push` on a docker-container builder with exactly this component's platform and build
args (tag: the content tag plus `-attested`), signs the pushed digest with cosign (keyless) and verifies it; a
stack then runs that digest (`image.build: false`, `image.reference`, listed in `image.signedDigests`), and the
policy pack lets production run only such digests or this component's own build. Why the stack's build stays
`docker.Image` rather than carrying the attestations itself:

- pulumi-docker 5.2.0 `RegistryImage` (+ `BuildxBuilder`) takes `sbom`/`provenance` inputs, but its upstream
  (terraform-provider-docker v4.5.0, the version pulumi-docker 5.2.0 bridges) builds with `exportLoad = true`
  (`internal/provider/docker_buildx_build.go`, `mapBuildAttributesToBuildOptions`) and then pushes from the Docker
  daemon (`resource_docker_registry_image_funcs.go`, `resourceDockerRegistryImageCreate` → `pushDockerRegistryImage`
  → `client.ImagePush`). Loading into the daemon drops attestations (Docker docs, "Add SBOM and provenance
  attestations with GitHub Actions": the `docker` exporter and `load: true` "don't support attestations"), and
  the resource's docs require the daemon's classic image store. The plan would record `sbom: "true"` on an
  image that has no SBOM.
- pulumi-docker-build 0.0.22 `Image` has no attestation inputs at all (its SDK's `ImageArgs`), so it would add a
  dependency and a provider without adding the SBOM.
- Switching resource types would also replace the image resource of every live stack for no content change.

`docker.Image` keeps what the stacks rely on: the content tag (`image_spec.image_tag`: an unchanged context
neither rebuilds nor pushes, an immutable ECR tag is never reused), one platform per build, the build args, the
registry credentials, and `repo_digest` (`repository@sha256:...`) as the only reference workloads get.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker as docker

from catalog import versions
from components import image_spec


def lifecycle_policy(keep_tagged_images: int, expire_untagged_days: int) -> str:
    """ECR lifecycle: untagged images (superseded manifests, failed pushes) expire after a few days; of the
    tagged ones only the newest N are kept. Workloads reference digests of recent builds only."""
    return json.dumps({"rules": [
        {"rulePriority": 1, "description": f"Expire untagged images after {expire_untagged_days} days",
         "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                       "countNumber": expire_untagged_days},
         "action": {"type": "expire"}},
        {"rulePriority": 2, "description": f"Keep the newest {keep_tagged_images} tagged images",
         "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep_tagged_images},
         "action": {"type": "expire"}},
    ]}, sort_keys=True)


def registry_server(address: str) -> str:
    """`host[:port]` of an image address like `registry.example.internal:5000/team/trainer`."""
    return address.split("/", 1)[0]


@dataclass
class TrainingImageArgs:
    context_dir: Path
    """Build context (images/trainer); its content decides the tag."""
    platform: str
    """`linux/amd64` or `linux/arm64`: one architecture per build."""
    build: bool = True
    """False reuses `reference` and builds nothing."""
    reference: str | None = None
    """An existing image by digest, used when `build` is false."""
    registry: str = "ecr"
    """`ecr` (created here) or `existing`."""
    repository_name: str = "gtp-trainer"
    existing_registry: str | None = None
    existing_registry_username: str | None = None
    existing_registry_password: pulumi.Input[str] | None = None
    keep_tagged_images: int = 30
    expire_untagged_days: int = 7
    force_delete: bool = False
    """Delete the repository with its images on destroy (ephemeral stacks only)."""
    protect: bool = False
    kms_deletion_window_days: int = 30
    base_image: str = versions.PYTORCH_BASE_IMAGE
    """The base by digest, chosen per platform and device (stack_config.derived.base_image)."""
    net_variant: str = "default"
    """`efa` for stacks with EFA node groups: libfabric + aws-ofi-nccl (the Dockerfile's net-efa stage)."""
    vcs_revision: str = "unknown"
    """Label `org.opencontainers.image.revision`: the newest commit that changed the context (it feeds the tag)."""
    source_url: str = "unknown"
    """Label `org.opencontainers.image.source`: the repository URL, without credentials (it feeds the tag)."""


IMAGE_INPUTS_OUTSIDE_THE_TAG = {
    "imageName": "it is the repository address plus the tag itself",
    "registry.server": "derived from the same address as imageName (ECR: the repository URL; existing: its host), "
                       "so it can't change while imageName stays",
    "registry.username": "pulumi-docker diffs no registry credentials (provider/provider.go:336-338, v5.1.0); not "
                         "ignoreChanges: that would hand Update the stale, expired ECR token",
    "registry.password": "as registry.username",
}
"""The docker.Image inputs that don't feed the tag, each with why a change of it can't push over an existing tag.
Every other input does (tests/test_image_component.py enumerates the recorded inputs against both)."""


class TrainingImage(pulumi.ComponentResource):
    image_ref: pulumi.Output[str]
    """`repository@sha256:<digest>` of the pushed image: never a mutable tag."""

    def __init__(self, name: str, args: TrainingImageArgs, opts: pulumi.ResourceOptions | None = None):
        build_args = image_spec.build_args(vcs_revision=args.vcs_revision, source_url=args.source_url,
                                           base_image=args.base_image, net_variant=args.net_variant)
        tag = image_spec.tag_for(args.context_dir, build_args, args.platform) if args.build else None
        # The content tag is known when the program runs, while the image's name (repository address + tag) and its
        # digest are only known at `up`: recorded as the component's own input, it is what a review sees of a
        # Dockerfile-only change (verify/plan_diff.py: the workloads that get the new image).
        super().__init__("gtp:image:TrainingImage", name, {"contentTag": tag} if tag else None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.repository_url: pulumi.Output[str] | None = None
        if not args.build:
            self.image_ref = pulumi.Output.from_input(str(args.reference))
            self.register_outputs({"imageRef": self.image_ref})
            return

        if args.registry == "ecr":
            key = aws.kms.Key(f"{name}-ecr", description=f"Encryption of ECR repository {args.repository_name}",
                              enable_key_rotation=True, deletion_window_in_days=args.kms_deletion_window_days,
                              opts=pulumi.ResourceOptions(parent=self, protect=args.protect))
            repository = aws.ecr.Repository(
                f"{name}-repository", name=args.repository_name,
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration={"scan_on_push": True},
                encryption_configurations=[{"encryption_type": "KMS", "kms_key": key.arn}],
                force_delete=args.force_delete,
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect))
            aws.ecr.LifecyclePolicy(f"{name}-lifecycle", repository=repository.name,
                                    policy=lifecycle_policy(args.keep_tagged_images, args.expire_untagged_days),
                                    opts=child)
            token = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id,
                                                            opts=pulumi.InvokeOutputOptions(parent=self))
            address: pulumi.Output[str] = repository.repository_url
            credentials = {"server": repository.repository_url, "username": token.user_name,
                           "password": pulumi.Output.secret(token.password)}
        else:
            address = pulumi.Output.from_input(str(args.existing_registry))
            credentials = {"server": registry_server(str(args.existing_registry)),
                           "username": args.existing_registry_username,
                           "password": args.existing_registry_password}
        self.repository_url = address

        # Every input but the name and the registry feeds the tag (image_spec.image_inputs says why): an unchanged
        # image keeps its name, so Pulumi neither rebuilds nor pushes; anything that would rebuild names a new tag,
        # and an immutable ECR tag is never pushed twice.
        inputs = image_spec.image_inputs(args.context_dir, args.platform, build_args)
        image = docker.Image(
            f"{name}-image",
            image_name=address.apply(lambda url: f"{url}:{tag}"),
            **inputs,
            registry=credentials,
            opts=child,
        )
        # repo_digest is `repository@sha256:...` of what was pushed; workloads use nothing else.
        self.image_ref = image.repo_digest
        self.register_outputs({"imageRef": self.image_ref})
