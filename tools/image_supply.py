"""The attested, signed training image: CI builds it with BuildKit attestations, cosign signs it, deploys verify it.

    python -m tools.image_supply settings --stack prod
        → JSON: platform, content tag, build args, repository name, region (what the stack itself would build)
    python -m tools.image_supply build --stack prod --registry <account>.dkr.ecr.<region>.amazonaws.com --builder gtp
        → builds with `docker buildx build --sbom=true --provenance=mode=max --push` unless the content tag is
          already in the repository, and prints `<repository>@sha256:<digest>` (the reference to sign)
    python -m tools.image_supply verify --stack prod [REF ...]
        → `cosign verify` of every REF (default: the stack's image.signedDigests and image.reference) against this
          repository's image workflow identity; exit 1 on the first that fails

Why CI and not the stack (the component's docstring, components/training_image.py, has the long form): neither
pulumi-docker 5.2.0 `Image` nor its `RegistryImage` can push BuildKit attestations (RegistryImage's buildx path
loads the result into the Docker daemon and pushes from there, which drops them), and pulumi-docker-build 0.0.22
has no attestation inputs. `docker buildx build --push` with a docker-container builder does it.

The build settings come from the same functions as the stack's own build (`stages.image.build_base_image`,
`stack_config.derived.image_variant`, `components.image_spec.image_tag`/`build_args`): CI pushes the stack's
content tag plus `-attested` (the stack's own build may push the bare tag to the same immutable repository), and
an unchanged context neither rebuilds nor pushes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from components import image_spec
from stack_config import StackConfig
from stack_config.derived import image_variant

ROOT = Path(__file__).resolve().parent.parent
CONTEXT = Path("images/trainer")
"""Relative to the repository root, as the stack's build uses it."""
OIDC_ISSUER = "https://token.actions.githubusercontent.com"
"""GitHub Actions' OIDC issuer: the keyless certificate's issuer for a workflow's identity token."""
WORKFLOW = ".github/workflows/image.yml"
SIGNING_REF = "refs/heads/main"
"""Only what main's image workflow signed is trusted."""
ATTESTED_SUFFIX = "-attested"
"""CI's tag is the stack's content tag plus this: the stack's own build (no attestations) may push the content tag
to the same immutable repository, and CI must neither collide with it nor mistake it for its attested build."""


def load(stack: str, root: Path = ROOT) -> StackConfig:
    from stages.config import parse_stack_config
    from verify.plan import stack_config

    project, config, secrets = stack_config(root, stack)
    raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{project}:")}
    return parse_stack_config(raw, project=project, stack=stack, secret_keys=[k.split(":", 1)[1] for k in secrets])


def settings(config: StackConfig, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> dict:
    """What the stack's own build would build: platform, tag, build args (labels from git or GTP_VCS_* env)."""
    from stages.image import build_base_image

    base, variant = build_base_image(config), image_variant(config)
    revision, source = image_spec.vcs_labels(root, environ, path=CONTEXT.as_posix())
    args = image_spec.build_args(vcs_revision=revision, source_url=source, base_image=base, net_variant=variant)
    # The stack's own inputs, with the context relative to the root as the stack passes it: the same tag.
    tag = image_spec.image_tag(root / CONTEXT, image_spec.image_inputs(CONTEXT, config.image.platform, args))
    return {
        "stack": config.stack,
        "platform": config.image.platform,
        "tag": tag,
        "attestedTag": tag + ATTESTED_SUFFIX,
        "buildArgs": args,
        "repository": config.repository_name,
        "region": config.region,
        "context": str(CONTEXT),
    }


def buildx_command(build: dict, repository: str, builder: str, metadata_file: str) -> list[str]:
    """`docker buildx build` that pushes the image with an SBOM and max-mode provenance attached to its index.

    Attestations need the image exporter pushing from BuildKit (Docker docs: the `docker` exporter and `--load`
    "don't support attestations"), hence a docker-container builder (`docker buildx create --driver
    docker-container`) and `--push`.
    """
    command = ["docker", "buildx", "build", "--builder", builder, "--platform", build["platform"],
               "--sbom=true", "--provenance=mode=max", "--push", "--metadata-file", metadata_file,
               "--tag", f"{repository}:{build['attestedTag']}", "--file", f"{build['context']}/Dockerfile"]
    for key, value in sorted(build["buildArgs"].items()):
        command += ["--build-arg", f"{key}={value}"]
    return command + [build["context"]]


def digest_command(reference: str) -> list[str]:
    """The pushed index's digest (what carries the attestations, and what cosign signs)."""
    return ["docker", "buildx", "imagetools", "inspect", reference, "--format", "{{.Manifest.Digest}}"]


def identity_regexp(server_url: str, repository: str, workflow: str = WORKFLOW, ref: str = SIGNING_REF) -> str:
    """The keyless certificate's subject for this repository's image workflow on main, as an anchored regexp:
    GitHub's OIDC token names `<server>/<owner>/<repo>/<workflow path>@<ref>` (`job_workflow_ref`)."""
    return "^" + re.escape(f"{server_url.rstrip('/')}/{repository}/{workflow}@{ref}") + "$"


def verify_command(reference: str, identity: str) -> list[str]:
    return ["cosign", "verify", "--certificate-identity-regexp", identity, "--certificate-oidc-issuer", OIDC_ISSUER,
            reference]


def references_to_verify(config: StackConfig) -> list[str]:
    """Every image the stack may run that it does not build itself."""
    refs = list(config.image.signed_digests)
    if config.image.reference and config.image.reference not in refs:
        refs.append(config.image.reference)
    return refs


def _run(command: Sequence[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), text=True, check=False, **kwargs)


def cmd_build(config: StackConfig, registry: str, builder: str, metadata_file: str) -> int:
    build = settings(config)
    repository = f"{registry.rstrip('/')}/{build['repository']}"
    tagged = f"{repository}:{build['attestedTag']}"
    existing = _run(digest_command(tagged), capture_output=True)
    if existing.returncode == 0 and existing.stdout.strip().startswith("sha256:"):
        print(f"image: {tagged} is already pushed (unchanged context): not rebuilding", file=sys.stderr)
    else:
        print(f"image: building {tagged} for {build['platform']} with SBOM and provenance", file=sys.stderr)
        if _run(buildx_command(build, repository, builder, metadata_file), cwd=ROOT).returncode != 0:
            return 1
    digest = _run(digest_command(tagged), capture_output=True)
    value = digest.stdout.strip()
    if digest.returncode != 0 or not re.fullmatch(r"sha256:[0-9a-f]{64}", value):
        print(f"image: could not read the digest of {tagged}: {digest.stderr.strip() or value!r}", file=sys.stderr)
        return 1
    print(f"{repository}@{value}")
    return 0


def cmd_verify(config: StackConfig, refs: list[str], server_url: str, repository: str) -> int:
    identity = identity_regexp(server_url, repository)
    refs = refs or references_to_verify(config)
    if not refs:
        print(f"image: stack {config.stack} runs only its own build; nothing to verify", file=sys.stderr)
        return 0
    for ref in refs:
        if not re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", ref):
            print(f"image: {ref!r} is not a reference by digest (repo@sha256:<64 hex>)", file=sys.stderr)
            return 2
        if _run(verify_command(ref, identity), stdout=subprocess.DEVNULL).returncode != 0:
            print(f"image: {ref} has no valid signature by {identity} (issuer {OIDC_ISSUER}); not deploying",
                  file=sys.stderr)
            return 1
        print(f"image: {ref} verified ({identity})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.image_supply", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("settings", "build", "verify"):
        command = sub.add_parser(name)
        command.add_argument("--stack", required=True)
        if name == "build":
            command.add_argument("--registry", required=True, help="registry host, e.g. <account>.dkr.ecr.<region>"
                                                                   ".amazonaws.com")
            command.add_argument("--builder", required=True, help="a docker-container buildx builder")
            command.add_argument("--metadata-file", default="build/image-metadata.json")
        if name == "verify":
            command.add_argument("refs", nargs="*", help="references by digest (default: the stack's signed ones)")
            command.add_argument("--server-url", default=os.environ.get("GITHUB_SERVER_URL", "https://github.com"))
            command.add_argument("--repository", default=os.environ.get("GITHUB_REPOSITORY"),
                                 help="owner/name of the repository whose image workflow signs (default: "
                                      "$GITHUB_REPOSITORY)")
    args = parser.parse_args(argv)
    config = load(args.stack)
    if args.command == "settings":
        print(json.dumps(settings(config), indent=2, sort_keys=True))
        return 0
    if args.command == "build":
        from tools.cli import require

        require("docker")  # buildx builds and pushes
        return cmd_build(config, args.registry, args.builder, args.metadata_file)
    if not args.repository:
        parser.error("verify needs --repository owner/name (or GITHUB_REPOSITORY)")
    return cmd_verify(config, args.refs, args.server_url, args.repository)


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
