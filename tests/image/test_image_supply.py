"""The attested and signed image: CI builds what the stack would build, with attestations; signs; verifies."""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from pathlib import Path

import pytest
import yaml

from tools import image_supply

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "image.yml"
DIGEST = "sha256:" + "a" * 64
REPO = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gtp-prod-trainer"


@pytest.fixture(autouse=True)
def fixed_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    # The offline plan records `unknown` labels; CI sets the commit and URL the same way (GTP_VCS_*).
    monkeypatch.setenv("GTP_VCS_REVISION", "unknown")
    monkeypatch.setenv("GTP_SOURCE_URL", "unknown")


@pytest.mark.parametrize("stack", ["dev", "edge", "prod"])
def test_ci_builds_exactly_what_the_stack_builds(stack: str) -> None:
    from tests.conftest import plan_stack

    settings = image_supply.settings(image_supply.load(stack))
    image = plan_stack(stack).one("docker:index/image:Image")
    assert settings["platform"] == image.inputs["build"]["platform"]
    assert settings["buildArgs"] == image.inputs["build"]["args"]
    assert settings["context"] == image.inputs["build"]["context"]
    name = image.inputs["imageName"]  # ECR's URL is unknown offline; the existing registry's is not
    assert name == "<computed>" or name.endswith(":" + settings["tag"])
    assert re.fullmatch(r"ctx-[0-9a-f]{16}", settings["tag"])


def test_prod_settings_are_the_efa_variant_for_amd64() -> None:
    settings = image_supply.settings(image_supply.load("prod"))
    assert settings["platform"] == "linux/amd64" and settings["buildArgs"]["NET_VARIANT"] == "efa"
    assert settings["repository"] == "gtp-prod-trainer"


def test_buildx_command_pushes_with_sbom_and_max_provenance() -> None:
    settings = image_supply.settings(image_supply.load("prod"))
    command = image_supply.buildx_command(settings, REPO, "gtp", "/tmp/meta.json")
    assert command[:3] == ["docker", "buildx", "build"] and command[-1] == "images/trainer"
    for flag in ("--sbom=true", "--provenance=mode=max", "--push"):
        assert flag in command
    assert "--load" not in command  # loading into the daemon drops attestations
    options = dict(itertools.pairwise(command))
    assert options["--builder"] == "gtp" and options["--platform"] == "linux/amd64"
    # Not the stack's own tag: the stack may push that one (unattested) to the same immutable repository.
    assert options["--tag"] == f"{REPO}:{settings['tag']}-attested" == f"{REPO}:{settings['attestedTag']}"
    assert options["--file"] == "images/trainer/Dockerfile"
    build_args = [command[i + 1] for i, word in enumerate(command) if word == "--build-arg"]
    assert build_args == [f"{k}={v}" for k, v in sorted(settings["buildArgs"].items())]


def test_identity_regexp_accepts_only_this_repositorys_image_workflow_on_main() -> None:
    identity = re.compile(image_supply.identity_regexp("https://github.com", "acme/gtp"))
    assert identity.match("https://github.com/acme/gtp/.github/workflows/image.yml@refs/heads/main")
    for other in ("https://github.com/acme/gtp/.github/workflows/image.yml@refs/heads/feature",
                  "https://github.com/acme/gtp/.github/workflows/pr.yml@refs/heads/main",
                  "https://github.com/evil/gtp/.github/workflows/image.yml@refs/heads/main",
                  "https://github.com/acme/gtp2/.github/workflows/image.yml@refs/heads/main",
                  "https://github.com/acme/gtpX.github/workflows/image.yml@refs/heads/main"):
        assert not identity.match(other), other
    command = image_supply.verify_command(f"{REPO}@{DIGEST}", identity.pattern)
    options = dict(itertools.pairwise(command))
    assert command[:2] == ["cosign", "verify"] and command[-1] == f"{REPO}@{DIGEST}"
    assert options["--certificate-identity-regexp"] == identity.pattern
    assert options["--certificate-oidc-issuer"] == "https://token.actions.githubusercontent.com"


def _fake(bin_dir: Path, name: str, script: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_verify_fails_unless_every_reference_is_signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    calls = tmp_path / "calls"
    good = f"{REPO}@{DIGEST}"
    _fake(tmp_path / "bin", "cosign", f'printf "%s\\n" "$*" >> {calls}\n[ "$6" = "{good}" ]\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = image_supply.load("prod")
    assert image_supply.cmd_verify(config, [good], "https://github.com", "acme/gtp") == 0
    bad = REPO + "@sha256:" + "b" * 64
    assert image_supply.cmd_verify(config, [good, bad], "https://github.com", "acme/gtp") == 1
    assert "has no valid signature" in capsys.readouterr().err
    assert image_supply.cmd_verify(config, [f"{REPO}:latest"], "https://github.com", "acme/gtp") == 2
    logged = calls.read_text().splitlines()
    assert logged[0] == ("verify --certificate-identity-regexp "
                         + image_supply.identity_regexp("https://github.com", "acme/gtp")
                         + f" --certificate-oidc-issuer https://token.actions.githubusercontent.com {good}")
    assert len(logged) == 3  # good; good, bad; the tag never reaches cosign


def test_verify_defaults_to_the_stacks_signed_digests(tmp_path: Path) -> None:
    from stages.config import parse_stack_config

    raw = {"image": json.dumps({"signedDigests": [f"{REPO}@{DIGEST}"], "build": False,
                                "reference": REPO + "@sha256:" + "c" * 64})}
    from verify.plan import stack_config

    project, config, secrets = stack_config(ROOT, "prod")
    base = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{project}:")}
    image = {**json.loads(base["image"]), **json.loads(raw["image"])}
    image.pop("keepTaggedImages")  # no ECR repository without a build: nothing reads it
    # not production: there the reference would have to be among the signed digests (rules._check_production_images)
    lifecycle = {**json.loads(base["lifecycle"]), "protect": False}
    parsed = parse_stack_config({**base, "image": json.dumps(image), "lifecycle": json.dumps(lifecycle)},
                                project=project, stack="prod",
                                secret_keys=[k.split(":", 1)[1] for k in secrets])
    assert image_supply.references_to_verify(parsed) == [f"{REPO}@{DIGEST}", REPO + "@sha256:" + "c" * 64]
    assert image_supply.references_to_verify(image_supply.load("prod")) == []


def test_build_skips_an_already_pushed_tag_and_prints_the_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    calls, pushed = tmp_path / "calls", tmp_path / "pushed"
    _fake(tmp_path / "bin", "docker", f"""echo "$@" >> {calls}
case "$2" in
  imagetools) [ -f {pushed} ] && echo {DIGEST} || {{ echo "not found" >&2; exit 1; }} ;;
  build) touch {pushed} ;;
esac
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = image_supply.load("prod")
    registry = REPO.rsplit("/", 1)[0]
    assert image_supply.cmd_build(config, registry, "gtp", str(tmp_path / "meta.json")) == 0
    assert capsys.readouterr().out.strip() == f"{REPO}@{DIGEST}"
    first = calls.read_text().splitlines()
    assert [line.split()[1] for line in first] == ["imagetools", "build", "imagetools"]
    assert "--sbom=true --provenance=mode=max --push" in first[1]
    assert first[0].split()[3].endswith("-attested")  # an unattested push of the stack's tag is never reused
    assert image_supply.cmd_build(config, registry, "gtp", str(tmp_path / "meta.json")) == 0  # unchanged context
    second = calls.read_text().splitlines()[len(first):]
    assert [line.split()[1] for line in second] == ["imagetools", "imagetools"]


# ------------------------------------------------------------------ the workflow


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_workflow_triggers_and_least_privilege(workflow: dict) -> None:
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["push"] == {"branches": ["main"]} and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {}
    with_id_token = [name for name, job in workflow["jobs"].items()
                     if (job.get("permissions") or {}).get("id-token") == "write"]
    assert with_id_token == ["sign"]
    assert workflow["jobs"]["sign"]["permissions"] == {"contents": "read", "id-token": "write"}


def test_every_action_is_pinned_by_full_commit_sha(workflow: dict) -> None:
    uses = [step["uses"] for job in workflow["jobs"].values() for step in job["steps"] if "uses" in step]
    assert any(u.startswith("sigstore/cosign-installer@") for u in uses)
    for use in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", use), use


def test_workflow_builds_attested_signs_then_verifies(workflow: dict) -> None:
    job = workflow["jobs"]["sign"]
    runs = _runs(job)
    assert "docker buildx create --name gtp --driver docker-container" in runs
    build = runs.index("tools.image_supply build")
    sign = runs.index('cosign sign --yes "${REF}"')
    verify = runs.index("tools.image_supply verify")
    assert build < sign < verify
    assert "--builder gtp" in runs and job["env"]["STACK"] == "prod"
    # No expression is expanded inside a script (template injection): values reach `run` through env.
    assert "${{" not in runs
