"""What the training image is built from: its build context, content-addressed tag and build args.

Pure functions, no Pulumi: the image component passes their results to `docker.Image`, and
tests/image/ checks them offline.

The tag is derived from the bytes Docker would actually send (the build context filtered by its
`.dockerignore`), so an unchanged trainer keeps its tag and stacks reuse the pushed image, while any
change to a file that reaches the build gives a new tag (ECR tags are immutable in prod).

`.dockerignore` matching follows Docker's rules (moby/patternmatcher), implemented here rather than
with `pathspec`, whose gitignore semantics differ where it matters: gitignore matches a slash-less
pattern such as `*.pyc` at every depth, Docker only at the context root; Docker anchors every pattern
at the root and a pattern that matches a directory excludes everything below it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from catalog import versions

DOCKERFILE_NAME = "Dockerfile"
DOCKERIGNORE_NAME = ".dockerignore"
TAG_PREFIX = "ctx-"
TAG_DIGEST_CHARS = 16
BUILDER_VERSION = "BuilderBuildKit"
# Where the builder stage collects wheels (the Dockerfile's `--wheel-dir` / `--dest`).
BUILDER_WHEEL_DIR = "/wheels"
# Python of the pytorch/pytorch 2.13 base images (system Python, marked externally managed by PEP 668).
# requirements.lock must offer binary wheels for it on every architecture the stacks build.
BASE_IMAGE_PYTHON_VERSION = "3.12"
# Linux architectures (pip platform suffixes) the stacks build for: amd64 (dev, prod), arm64 (edge).
IMAGE_ARCHITECTURES = ("x86_64", "aarch64")


# pip platform tags the lock is resolved for from another host (`lock_download_command`): the manylinux
# policies a glibc-2.28-or-newer base accepts, newest first, as pip orders them natively.
MANYLINUX_TAGS = ("manylinux_2_28", "manylinux_2_17", "manylinux2014", "manylinux1")


def lock_download_command(lock: str, dest: str, architecture: str, python: str = "python") -> list[str]:
    """The builder stage's `pip download` of requirements.lock for the image Python on `architecture`, from any host.

    The Dockerfile runs `pip download --require-hashes --only-binary=:all:` on the base itself; here the image
    Python (`BASE_IMAGE_PYTHON_VERSION`, CPython) and the Linux platform are named instead. Shared by
    tests/image (every locked package has a wheel for each architecture) and tools/image_size.py (what the
    wheels weigh), so both see exactly the wheels the build would install.
    """
    if architecture not in IMAGE_ARCHITECTURES:
        raise ValueError(f"architecture must be one of {IMAGE_ARCHITECTURES}, got {architecture!r}")
    platforms = [f"--platform={tag}_{architecture}" for tag in MANYLINUX_TAGS]
    return [python, "-m", "pip", "--disable-pip-version-check", "download", "--no-cache-dir", "--quiet",
            "--require-hashes", "--only-binary=:all:", "--implementation=cp",
            f"--python-version={BASE_IMAGE_PYTHON_VERSION}", *platforms, "--dest", dest, "--requirement", lock]


def trainer_wheel_build_command(wheel_dir: str = BUILDER_WHEEL_DIR) -> list[str]:
    """The command the Dockerfile's builder stage runs, from the context root, to build the trainer wheel.

    tests/image/test_dockerfile.py asserts the Dockerfile runs exactly this (with the default
    `wheel_dir`) and runs it itself on a copy of the filtered build context.
    """
    return ["python", "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "--wheel-dir", wheel_dir, "."]


@dataclass(frozen=True)
class _IgnoreRule:
    regex: re.Pattern[str]
    is_exception: bool


def _pattern_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate one Docker ignore pattern (already cleaned, `/`-separated) into an anchored regex."""
    out: list[str] = ["^"]
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            if pattern.startswith("**", index):
                index += 1
                if index + 1 < len(pattern) and pattern[index + 1] == "/":
                    index += 1  # Docker treats `**/` as `**`
                if index + 1 == len(pattern):
                    out.append(".*")  # trailing `**` matches everything below
                else:
                    out.append("(.*/)?")  # zero or more whole directories
            else:
                out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and index + 1 < len(pattern):
            index += 1
            out.append(re.escape(pattern[index]))
        elif char == "[":
            closing = pattern.find("]", index + 1)
            if closing == -1:
                out.append(re.escape(char))
            else:
                # Go's filepath.Match syntax: `[^...]` negates, which a Python class reads the same way.
                out.append("[" + pattern[index + 1 : closing].replace("\\", "\\\\") + "]")
                index = closing
        else:
            out.append(re.escape(char))
        index += 1
    out.append("$")
    return re.compile("".join(out))


def _clean(pattern: str) -> str:
    # Docker runs filepath.Clean on each pattern and drops a leading "/" (patterns are root-anchored).
    cleaned = os.path.normpath(pattern).replace(os.sep, "/")
    return cleaned.lstrip("/") or "."


def parse_dockerignore(text: str) -> list[_IgnoreRule]:
    """Parse `.dockerignore` text into ordered rules (comments and blank lines dropped)."""
    rules: list[_IgnoreRule] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        is_exception = line.startswith("!")
        if is_exception:
            line = line[1:].strip()
            if not line:
                continue
        rules.append(_IgnoreRule(regex=_pattern_to_regex(_clean(line)), is_exception=is_exception))
    return rules


def is_ignored(relative_path: str, rules: list[_IgnoreRule]) -> bool:
    """Whether Docker leaves `relative_path` (POSIX, relative to the context root) out of the context.

    The last matching rule wins; a rule matches a path when it matches the path itself or any of its
    parent directories (so `tests` drops `tests/unit/x.py`).
    """
    parts = PurePosixPath(relative_path).parts
    candidates = ["/".join(parts[: depth + 1]) for depth in range(len(parts))]
    ignored = False
    for rule in rules:
        if any(rule.regex.match(candidate) for candidate in candidates):
            ignored = not rule.is_exception
    return ignored


def context_files(context_dir: Path) -> list[str]:
    """Every file (POSIX path relative to `context_dir`, sorted) that Docker sends for this context.

    The Dockerfile is always included: Docker sends it even when ignored, and a change to it must
    change the tag.
    """
    # pulumi-docker's contextDigest (an input it diffs) reads `<Dockerfile>.dockerignore` first
    # (provider/provider.go:656-685 `getIgnorePatterns`) and hashes a symlink's *resolved absolute* target
    # (:562-574, `filepath.EvalSymlinks`), which differs per checkout: the tag here could not follow either.
    if (context_dir / (DOCKERFILE_NAME + DOCKERIGNORE_NAME)).exists():
        raise ValueError(f"{context_dir}: {DOCKERFILE_NAME}{DOCKERIGNORE_NAME} is not supported; "
                         f"use {DOCKERIGNORE_NAME}")
    ignore_file = context_dir / DOCKERIGNORE_NAME
    rules = parse_dockerignore(ignore_file.read_text(encoding="utf-8")) if ignore_file.is_file() else []
    included = [path for path in _walk(context_dir) if not is_ignored(path, rules)]
    links = [path for path in included if (context_dir / path).is_symlink()]
    if links:
        raise ValueError(f"{context_dir}: symlinks in the build context are not supported (pulumi-docker hashes their "
                         f"absolute targets, which differ per checkout): {', '.join(links)}")
    if (context_dir / DOCKERFILE_NAME).is_file() and DOCKERFILE_NAME not in included:
        included.append(DOCKERFILE_NAME)
    return sorted(included)


def _walk(context_dir: Path) -> Iterator[str]:
    for directory, subdirectories, filenames in os.walk(context_dir):
        subdirectories.sort()
        relative_dir = Path(directory).relative_to(context_dir)
        for filename in filenames:
            yield (relative_dir / filename).as_posix()
        # Symlinked directories are sent as links, not followed.
        for subdirectory in list(subdirectories):
            if (Path(directory) / subdirectory).is_symlink():
                subdirectories.remove(subdirectory)
                yield (relative_dir / subdirectory).as_posix()


def context_digest(context_dir: Path) -> str:
    """SHA-256 (hex) over the path, mode and bytes of every file in the filtered build context.

    The whole mode string, as pulumi-docker hashes it (provider/hash.go `hashPath`: path, `fileMode.String()`,
    sha256 of the bytes): a checkout whose files are 0664 (umask 002) makes pulumi-docker rebuild, and if the
    tag stayed the same that rebuild would be pushed over an existing tag, which an immutable repository
    rejects. So whatever pulumi-docker would rebuild gets its own tag."""
    digest = hashlib.sha256()
    for relative_path in context_files(context_dir):
        path = context_dir / relative_path
        if path.is_symlink():
            kind, payload = "link", os.readlink(path).encode()
        else:
            # COPY keeps the mode too, so the image itself differs as well.
            kind = stat.filemode(path.stat().st_mode)
            payload = path.read_bytes()
        digest.update(f"{relative_path}\0{kind}\0{hashlib.sha256(payload).hexdigest()}\n".encode())
    return digest.hexdigest()


def image_inputs(context_dir: Path, platform: str, args: Mapping[str, str]) -> dict:
    """Every input of the stack's `docker.Image` except `imageName` and `registry`, as passed to it.

    All of them feed `image_tag`: pulumi-docker's `Diff` reports any changed input (but the registry's username and
    password) as an update, and its `Update` builds and pushes to the unchanged `imageName` (pulumi/pulumi-docker
    v5.1.0 provider/provider.go:271-349 `Diff`/`diffUpdates`, :428-458 `Update` → `dockerBuild`; provider/image.go
    :312-313 pushes `img.Name` as given). With an immutable ECR tag, any input that changes while the tag stays the
    same is a failed `pulumi up`. `context` is relative to the project directory, where Pulumi runs the program and
    the provider (upstream's own examples/aws-container-registry/ts/index.ts:29 `context: "app"`): an absolute path
    would differ per checkout and rebuild onto the same tag; so is `dockerfile` (the provider resolves both from
    its working directory: provider/provider.go:171 `os.Stat(build.Dockerfile)`).
    """
    return {
        "build": {
            "context": context_dir.as_posix(),
            "dockerfile": (context_dir / DOCKERFILE_NAME).as_posix(),
            "platform": platform,
            "args": dict(args),
            # The Dockerfile uses BuildKit bind mounts (no wheels left in layers).
            "builder_version": BUILDER_VERSION,
        },
        "build_on_preview": False,
        "skip_push": False,
    }


def _canonical_key(key: str) -> str:
    # `builder_version` (SDK) and `builderVersion` (the recorded wire form) are one input.
    return key.replace("_", "").lower()


def _canonical(value: object) -> object:
    if isinstance(value, Mapping):
        return {_canonical_key(str(key)): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def image_tag(context_dir: Path, inputs: Mapping[str, object] | None = None) -> str:
    """Content-addressed image tag, `ctx-` plus 16 hex digits over the context digest and every image input.

    `inputs` is `image_inputs(...)` (or the same inputs as recorded by a plan, camelCase keys): every one of them
    feeds the tag, the VCS labels included, so whatever makes pulumi-docker rebuild also names a new tag. The
    revision label is the newest commit that changed the build context (`vcs_labels(path=...)`), so commits that
    don't touch the image keep its tag and reuse the pushed image.
    """
    digest = context_digest(context_dir)
    if inputs:
        mixed = hashlib.sha256(digest.encode())
        mixed.update(json.dumps(_canonical(inputs), sort_keys=True, separators=(",", ":")).encode())
        digest = mixed.hexdigest()
    return TAG_PREFIX + digest[:TAG_DIGEST_CHARS]


NET_VARIANTS = ("default", "efa")
UNKNOWN = "unknown"


def public_source_url(remote: str) -> str:
    """A git remote as the `org.opencontainers.image.source` URL: scp-style `git@host:org/repo.git` becomes
    `https://host/org/repo`, and credentials in `https://user:token@host/...` never reach a label."""
    remote = remote.strip()
    if match := re.fullmatch(r"[\w.-]+@([\w.-]+):(.+)", remote):
        remote = f"https://{match[1]}/{match[2]}"
    remote = re.sub(r"^(\w+://)[^/@]*@", r"\1", remote)
    return remote[:-4] if remote.endswith(".git") else remote


def vcs_labels(root: Path, environ: Mapping[str, str] = os.environ, path: str | None = None) -> tuple[str, str]:
    """(revision, source URL) for the image labels: GTP_VCS_REVISION / GTP_SOURCE_URL when set (the offline plan),
    else from git and the `origin` remote (without credentials); `unknown` where git can't tell.

    path: the build context, relative to `root`. The revision is then the newest commit that changed it (with
    `-dirty` for uncommitted changes under it), not HEAD: both labels feed the image tag (`image_tag`), and a commit
    elsewhere in the repository must neither rebuild the image nor push it again. Needs the history: a shallow
    clone names its one commit, which gives each commit a new tag (a rebuild, never a collision).
    """
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    scope = ["--", path] if path else []
    revision = environ.get("GTP_VCS_REVISION")
    if not revision:
        head = git("log", "-1", "--format=%H", *scope) if path else git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", *scope)
        revision = (head + ("-dirty" if dirty else "")) if head else UNKNOWN
    source = environ.get("GTP_SOURCE_URL")
    if not source:
        remote = git("config", "--get", "remote.origin.url")
        source = public_source_url(remote) if remote else UNKNOWN
    return revision, source


def build_args(vcs_revision: str = "unknown", source_url: str = "unknown",
               base_image: str = versions.PYTORCH_BASE_IMAGE, net_variant: str = "default") -> dict[str, str]:
    """The Dockerfile's ARGs, with versions taken from `catalog.versions`.

    net_variant: `default`, or `efa` for stacks with EFA node groups (adds the EFA installer's pinned version, the
    fingerprint of AWS's signing key and the SHA-256, each empty where the catalog pins none: the Dockerfile's
    efa-installer stage checks every one that is set and fails closed when neither is).
    base_image: the base by digest (stack_config.derived.base_image: per platform and device).
    vcs_revision: commit the image is built from (label `org.opencontainers.image.revision`).
    source_url: repository URL (label `org.opencontainers.image.source`).
    """
    if net_variant not in NET_VARIANTS:
        raise ValueError(f"net_variant must be one of {NET_VARIANTS}, got {net_variant!r}")
    args = {
        "BASE_IMAGE": base_image,
        "TRAINER_VERSION": versions.TRAINER_VERSION,
        "VCS_REVISION": vcs_revision,
        "SOURCE_URL": source_url,
        "NET_VARIANT": net_variant,
    }
    if net_variant == "efa":
        args["EFA_INSTALLER_VERSION"] = versions.EFA_INSTALLER.version
        args["EFA_INSTALLER_GPG_FINGERPRINT"] = versions.EFA_INSTALLER.gpg_fingerprint or ""
        args["EFA_INSTALLER_SHA256"] = versions.EFA_INSTALLER.sha256 or ""
    return args


def tag_for(context_dir: Path, args: Mapping[str, str], platform: str) -> str:
    """The tag the stack's `docker.Image` gets for these build inputs (context, build args, platform): the one rule
    components/training_image.py applies and tests/engine/test_tag_rule.py holds to real builds."""
    return image_tag(context_dir, image_inputs(context_dir, platform, args))
