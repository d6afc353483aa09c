"""Offline checks of the training image: lint (hadolint, Checkov), structure, lock, and the wheel build.

No Docker engine is needed. The wheel test builds the trainer exactly as the Dockerfile's builder stage
does, from exactly the files the build context would send, and installs it with the locked
dependencies into a fresh venv (the lock's packages come from the package index, as in the builder).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# importable only once REPO_ROOT is on sys.path (above), when this file runs outside the repository's pytest setup
from catalog import versions  # noqa: E402
from components import image_spec  # noqa: E402

CONTEXT = REPO_ROOT / "images" / "trainer"
DOCKERFILE = CONTEXT / "Dockerfile"
LOCK = CONTEXT / "requirements.lock"
REQUIREMENTS_IN = CONTEXT / "requirements.in"
VENV_BIN = Path(sys.executable).parent


def _tool(name: str, override_env: str) -> Path:
    """A lint tool from this venv (or the path in `override_env`); missing tools fail, never skip."""
    path = Path(os.environ.get(override_env) or VENV_BIN / name)
    assert path.is_file() and os.access(path, os.X_OK), (
        f"{name} not found at {path}: run `make setup` (or set {override_env} to the executable)"
    )
    return path


# --- A minimal Dockerfile reader (enough for this file: no heredocs) -----------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        # Docker drops comment lines, even inside a continued instruction.
        if not stripped or stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        keyword, _, arguments = " ".join(pending).partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip(), start))
        pending = []
    assert not pending, "Dockerfile ends inside a continued instruction"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """Instructions per build stage; index 0 holds the global ARGs before the first FROM."""
    result: list[list[Instruction]] = [[]]
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        result[-1].append(instruction)
    return result


def arg_defaults(stage: list[Instruction]) -> dict[str, str]:
    defaults = {}
    for instruction in stage:
        if instruction.keyword == "ARG" and "=" in instruction.arguments:
            name, _, value = instruction.arguments.partition("=")
            defaults[name] = value.strip('"')
    return defaults


def labels(stage: list[Instruction]) -> dict[str, str]:
    found = {}
    for instruction in stage:
        if instruction.keyword == "LABEL":
            for token in shlex.split(instruction.arguments):
                key, _, value = token.partition("=")
                found[key] = value
    return found


def env(stage: list[Instruction]) -> dict[str, str]:
    found = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            for token in shlex.split(instruction.arguments):
                key, _, value = token.partition("=")
                found[key] = value
    return found


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    return stages(instructions)[-1]


# --- Linters -------------------------------------------------------------------------------------------


def test_hadolint_reports_nothing() -> None:
    hadolint = _tool("hadolint", "GTP_HADOLINT")
    # cwd=CONTEXT: hadolint reads .hadolint.yaml from there, if the project ever needs one.
    result = subprocess.run(
        [str(hadolint), "--no-color", "--failure-threshold", "style", DOCKERFILE.name],
        cwd=CONTEXT, capture_output=True, text=True, check=False,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_every_hadolint_ignore_has_a_reason_above_it() -> None:
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        if "hadolint ignore=" in line:
            above = lines[index - 1].strip() if index else ""
            assert above.startswith("#") and "hadolint" not in above, (
                f"Dockerfile:{index + 1}: put the reason for `{line.strip()}` in a comment on the line above"
            )


@pytest.mark.slow
def test_checkov_dockerfile_checks_pass() -> None:
    checkov = _tool("checkov", "GTP_CHECKOV")
    result = subprocess.run(
        [str(checkov), "--file", str(DOCKERFILE), "--framework", "dockerfile", "--skip-download",
         "--output", "json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE"},
        # Away from the repo's .checkov.yaml (quiet mode drops skipped checks from the report).
        cwd=DOCKERFILE.parent,
    )
    report = json.loads(result.stdout)
    summary = report["summary"]
    failed = [(c["check_id"], c["file_line_range"]) for c in report["results"]["failed_checks"]]
    assert (summary["failed"], summary["parsing_errors"], failed) == (0, 0, [])
    assert summary["passed"] > 0
    for skipped in report["results"]["skipped_checks"]:
        reason = (skipped.get("check_result") or {}).get("suppress_comment", "").strip()
        assert len(reason) > 10, f"{skipped['check_id']} is skipped without a reason"


# --- Structure -----------------------------------------------------------------------------------------


def test_multi_stage_builder_then_runtime(instructions: list[Instruction]) -> None:
    froms = [i.arguments.split() for i in instructions if i.keyword == "FROM"]
    assert froms == [["${BASE_IMAGE}", "AS", "builder"], ["${BASE_IMAGE}", "AS", "net-default"],
                     ["${BASE_IMAGE}", "AS", "efa-installer"], ["${BASE_IMAGE}", "AS", "net-efa"],
                     ["net-${NET_VARIANT}", "AS", "runtime"]]


def test_efa_stages_verify_the_installer_by_its_signature_and_set_aws_env(instructions: list[Instruction]) -> None:
    # The verification itself runs in tests/image/test_efa_installer_verification.py.
    installer = next(stage for stage in stages(instructions)[1:] if stage[0].arguments.endswith("AS efa-installer"))
    efa = next(stage for stage in stages(instructions)[1:] if stage[0].arguments.endswith("AS net-efa"))
    verify_text = " ".join(i.arguments for i in installer if i.keyword == "RUN")
    assert verify_text.index("urlopen") < verify_text.index("sh /tmp/verify-efa-installer.sh")
    assert arg_defaults(installer) == {"EFA_INSTALLER_VERSION": "unset", "EFA_INSTALLER_GPG_FINGERPRINT": "",
                                       "EFA_INSTALLER_SHA256": ""}
    run_text = " ".join(i.arguments for i in efa if i.keyword == "RUN")
    assert "from=efa-installer" in run_text and "--skip-kmod" in run_text
    assert {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"}.items() <= env(efa).items()
    assert "/opt/amazon/ofi-nccl/lib" in run_text and "ldconfig" in run_text
    assert arg_defaults(stages(instructions)[0])["NET_VARIANT"] == "default"
    assert set(image_spec.build_args(net_variant="efa")) <= set(arg_defaults(stages(instructions)[0])) | set(
        arg_defaults(installer)) | set(arg_defaults(efa)) | set(arg_defaults(stages(instructions)[-1]))


def test_the_efa_verification_script_is_in_the_context_and_stops_on_errors() -> None:
    script = (CONTEXT / "verify-efa-installer.sh").read_text(encoding="utf-8")
    assert script.startswith("#!/bin/sh\n") and "\nset -eu\n" in script
    assert "gpg --batch --status-fd 1 --verify" in script and "VALIDSIG" in script
    assert "verify-efa-installer.sh" in image_spec.context_files(CONTEXT)


def test_base_image_default_matches_versions_and_is_pinned(instructions: list[Instruction]) -> None:
    default = arg_defaults(stages(instructions)[0])["BASE_IMAGE"]
    assert default == versions.PYTORCH_BASE_IMAGE
    torch = re.escape(versions.TORCH_VERSION)
    assert re.fullmatch(rf"pytorch/pytorch:{torch}-cuda[0-9.]+-cudnn9-runtime@sha256:[0-9a-f]{{64}}", default), (
        "BASE_IMAGE must be the official CUDA runtime image for TORCH_VERSION, pinned by tag and digest"
    )


def test_no_latest_and_no_hard_coded_platform(instructions: list[Instruction]) -> None:
    for instruction in instructions:
        assert not re.search(r":latest\b", instruction.arguments), f"line {instruction.line}: `latest`"
        if instruction.keyword == "FROM":
            assert "--platform" not in instruction.arguments, f"line {instruction.line}: the caller picks the platform"
        assert not re.search(r"\b(amd64|x86_64|arm64|aarch64)\b", instruction.arguments), (
            f"line {instruction.line}: the Dockerfile must not name an architecture"
        )


def test_final_stage_runs_as_numeric_non_root_user(final_stage: list[Instruction]) -> None:
    users = [i.arguments for i in final_stage if i.keyword == "USER"]
    assert users, "the final stage must set USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) >= 10000, f"USER {users[-1]}: use a numeric uid >= 10000"
    assert not group or (group.isdigit() and int(group) >= 10000)
    run_text = " ".join(i.arguments for i in final_stage if i.keyword == "RUN")
    assert f"--uid {user}" in run_text, "the uid in USER must exist in the image (useradd --uid)"


def test_entrypoint_is_exec_form_torchrun(final_stage: list[Instruction]) -> None:
    entrypoints = [i.arguments for i in final_stage if i.keyword == "ENTRYPOINT"]
    assert entrypoints and json.loads(entrypoints[-1]) == ["torchrun"], (
        "exec-form ENTRYPOINT so SIGTERM reaches torchrun"
    )
    commands = [i.arguments for i in final_stage if i.keyword == "CMD"]
    assert commands and isinstance(json.loads(commands[-1]), list)


def test_runtime_environment(final_stage: list[Instruction]) -> None:
    variables = env(final_stage)
    assert variables["PYTHONUNBUFFERED"] == "1"
    # pytorch#135712, #167288: elastic restarts hang without it (see shared DESIGN.md).
    assert variables["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    keywords = {i.keyword for i in final_stage}
    assert {"WORKDIR", "HEALTHCHECK"} <= keywords


def test_oci_labels(final_stage: list[Instruction]) -> None:
    found = labels(final_stage)
    for key in ("source", "revision", "version", "licenses"):
        assert found.get(f"org.opencontainers.image.{key}"), f"missing label org.opencontainers.image.{key}"
    assert found["org.opencontainers.image.revision"] == "${VCS_REVISION}"
    assert found["org.opencontainers.image.version"] == "${TRAINER_VERSION}"
    assert found["org.opencontainers.image.source"] == "${SOURCE_URL}"
    declared = set(arg_defaults(final_stage))
    assert set(image_spec.build_args()) - {"BASE_IMAGE", "NET_VARIANT"} <= declared, "every build arg needs an ARG"


def test_trainer_version_agrees(final_stage: list[Instruction]) -> None:
    pyproject = tomllib.loads((CONTEXT / "pyproject.toml").read_text(encoding="utf-8"))
    assert arg_defaults(final_stage)["TRAINER_VERSION"] == versions.TRAINER_VERSION
    # The runtime stage installs `trainer==${TRAINER_VERSION}`; a mismatch fails the build.
    assert pyproject["project"]["version"] == versions.TRAINER_VERSION


def test_runtime_installs_only_the_builders_wheels(final_stage: list[Instruction]) -> None:
    installs = [i.arguments for i in final_stage if i.keyword == "RUN" and "pip install" in i.arguments]
    assert installs
    for command in installs:
        for part in command.split("&&"):
            if "pip install" in part:
                assert "--no-index" in part and "--no-cache-dir" in part, part
    assert "--require-hashes" in installs[0] and "pip check" in installs[0]
    assert not [i for i in final_stage if i.keyword in ("ADD", "COPY")], "runtime copies nothing; it mounts wheels"


def test_builder_runs_the_shared_wheel_build_command(instructions: list[Instruction]) -> None:
    builder = stages(instructions)[1]
    runs = [i.arguments for i in builder if i.keyword == "RUN"]
    # The command is the RUN's last step (after the optional CA secret's PIP_CERT).
    assert shlex.join(image_spec.trainer_wheel_build_command()) in [run.split("&&")[-1].strip() for run in runs]
    downloads = [r for r in runs if "pip download" in r]
    required_flags = ("--require-hashes", "--only-binary=:all:", f"--dest {image_spec.BUILDER_WHEEL_DIR}")
    assert downloads and all(flag in downloads[0] for flag in required_flags)


def test_every_step_that_reaches_the_index_can_use_the_proxy_ca_secret(instructions: list[Instruction]) -> None:
    """Behind a TLS-inspecting proxy (as on the machines the engine tests run on) pip needs the proxy's CA: it comes
    as the BuildKit secret `pip-ca`, mounted for the one RUN, never COPYed into a layer."""
    builder = stages(instructions)[1]
    reaching = [i.arguments for i in builder if i.keyword == "RUN" and re.search(r"pip (download|wheel)", i.arguments)]
    assert len(reaching) == 2
    for run in reaching:
        assert run.startswith("--mount=type=secret,id=pip-ca "), run
        assert "export PIP_CERT=/run/secrets/pip-ca" in run, run


def test_no_syntax_directive_pulls_a_frontend() -> None:
    """A `# syntax=` line makes BuildKit pull its frontend image from a public registry before the build."""
    first_lines = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("#")][:5]
    assert not [line for line in first_lines if re.match(r"#\s*syntax\s*=", line)], first_lines


# --- Lock file -----------------------------------------------------------------------------------------


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) from requirements.lock."""
    text = LOCK.read_text(encoding="utf-8")
    entries: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.splitlines()[0]
        if not first or first.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;\\]+)\s*\\?", first)
        assert match, f"requirements.lock: `{first}` is not an exact pin"
        entries[match[1].lower().replace("_", "-")] = (match[2], re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


def test_lock_pins_every_package_with_hashes() -> None:
    locked = _locked()
    assert locked
    for name, (_version, hashes) in locked.items():
        assert hashes, f"{name} has no hash"


def test_lock_leaves_torch_and_cuda_to_the_base_image() -> None:
    # nvidia-ml-py is the NVML binding (pure Python, talks to the driver) that pynvml needs, not a CUDA library.
    base_image_packages = ("torch", "triton", "torchvision", "torchaudio")
    forbidden = [
        name for name in _locked()
        if name in base_image_packages or (name.startswith("nvidia-") and name != "nvidia-ml-py")
    ]
    assert forbidden == []


def test_lock_covers_requirements_in_and_versions() -> None:
    locked = _locked()
    wanted = [
        re.split(r"[\s=<>~!\[;]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")
        for line in REQUIREMENTS_IN.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert {"safetensors", "prometheus-client", "dlrover"} <= set(wanted)
    assert [name for name in wanted if name not in locked] == []
    assert locked["dlrover"][0] == versions.DLROVER_PYTHON


@pytest.mark.parametrize("architecture", image_spec.IMAGE_ARCHITECTURES)
@pytest.mark.slow
def test_lock_has_binary_wheels_for_the_image_python(locked_wheels, architecture: str) -> None:
    # The builder runs `pip download --only-binary=:all: --require-hashes` on the base image's Python;
    # `locked_wheels` (conftest) runs the same resolution for that Python and architecture, from here.
    assert len(list(locked_wheels(architecture).glob("*.whl"))) == len(_locked())


# --- The trainer wheel, built as the builder stage builds it -------------------------------------------


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{shlex.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow
def test_trainer_wheel_builds_from_the_context_and_installs_with_the_lock(tmp_path: Path) -> None:
    # Exactly the files Docker would send: proves .dockerignore keeps everything the build needs.
    context = tmp_path / "context"
    for relative in image_spec.context_files(CONTEXT):
        (context / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CONTEXT / relative, context / relative)

    wheels = tmp_path / "wheels"
    command = image_spec.trainer_wheel_build_command(str(wheels))
    assert command[0] == "python"
    _run([sys.executable, *command[1:]], cwd=context)
    built = sorted(wheels.glob("trainer-*.whl"))
    assert [w.name.split("-")[1] for w in built] == [versions.TRAINER_VERSION]

    # A fresh venv without system site-packages; torch is not installed (the base image provides it).
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install", "--no-cache-dir"]
    _run([*pip, "--require-hashes", "--only-binary=:all:", "--requirement", str(LOCK)])
    _run([*pip, "--no-index", "--no-deps", str(built[0])])

    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    # torch is the one requirement allowed to be missing here; the base image brings it.
    if check.returncode != 0:
        problems = [line for line in check.stdout.splitlines() if not re.search(r"\brequires torch\b", line)]
        assert problems == [], check.stdout + check.stderr

    probe = (
        "import importlib.metadata as m, sys, trainer, safetensors, prometheus_client;"
        "import dlrover.python.common.comm, dlrover.proto;"
        "print(trainer.__version__, m.version('trainer'), 'torch' in sys.modules)"
    )
    output = _run([python, "-c", probe], cwd=tmp_path).stdout.split()
    assert output == [versions.TRAINER_VERSION, versions.TRAINER_VERSION, "False"]
