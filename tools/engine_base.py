"""A CPU stand-in for the training image's PyTorch base, built here without any registry.

The official base (catalog.versions.PYTORCH_BASE_IMAGE) cannot be pulled on these machines, so the real build of
images/trainer runs on a base with the same contract (`BASE_CONTRACT`, stated in the Dockerfile's header):

- a Debian root file system from `debootstrap` (the mirror the host's own apt uses, `apt_mirror()`), with
  `python` on PATH, pip, and `groupadd`/`useradd`; its system Python is marked externally managed (PEP 668) as
  the official base's is;
- torch == catalog.versions.TORCH_VERSION importable: the files `make setup` already installed into .venv (torch
  and everything it requires, found from the installed distributions' metadata and their RECORD file lists),
  streamed into the image rather than downloaded a second time, with the console scripts (`torchrun`) rewritten
  for the image's Python.

The root file system and torch's files go into one tar stream fed to `docker import`. The image is tagged
`gtp-cpu-base:<key>`, the key a digest of everything that decides its content (the suite, the packages, every
torch file's RECORD hash, this module's source), so a second run on the same engine reuses it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import io
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from catalog import versions
from tools.engine import DOCKER_CLI, Engine, EngineError

SUITE = "bookworm"
"""Debian 12: its python3 is 3.11, the minor of the .venv whose torch files go into the base."""
PACKAGES = ("python3", "python3-pip", "python-is-python3", "ca-certificates")
"""`passwd` (groupadd, useradd) is part of every debootstrap variant (Priority: required)."""
SITE_PACKAGES = "usr/local/lib/python{minor}/dist-packages"
"""Where Debian's Python finds packages pip installs outside apt (`python3 -m site`)."""
REPOSITORY = "gtp-cpu-base"


@dataclass(frozen=True)
class BaseContract:
    """What images/trainer/Dockerfile needs from its base (the official one and this stand-in alike)."""

    torch_version: str
    python_minors: tuple[str, ...]
    """Python minors the trainer and requirements.lock support (the lock carries wheels for each)."""
    commands: tuple[str, ...] = ("python", "torchrun", "groupadd", "useradd")


BASE_CONTRACT = BaseContract(torch_version=versions.TORCH_VERSION, python_minors=("3.11", "3.12"))


def apt_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian archive the host's apt uses (deb822 `URIs:` or a one-line `deb` entry), for debootstrap."""
    candidates = sorted((sources_dir / "sources.list.d").glob("*.sources")) + [sources_dir / "sources.list"]
    for path in candidates:
        if not path.is_file():
            continue
        text = path.read_text()
        for uri in re.findall(r"^URIs:\s*(\S+)", text, flags=re.MULTILINE):
            if not uri.rstrip("/").endswith("-security"):
                return uri
        for uri in re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+\S+", text, flags=re.MULTILINE):
            if "security" not in uri:
                return uri
    raise EngineError("no Debian mirror found in /etc/apt (sources.list or sources.list.d/*.sources): "
                      "debootstrap needs one")


def torch_closure() -> list[metadata.Distribution]:
    """torch and every distribution it requires, with the extras it asks for (e.g. `cuda-toolkit[cudart]`), as
    installed for this Python, sorted by name."""
    found: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, str]] = set()
    pending: list[tuple[str, str]] = [("torch", "")]
    while pending:
        name, extra = pending.pop()
        if (canonicalize_name(name), extra) in done:
            continue
        done.add((canonicalize_name(name), extra))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError as error:
            raise EngineError(f"{name} is not installed in {sys.prefix}: run `make setup` first") from error
        found[canonicalize_name(name)] = distribution
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                pending += [(requirement.name, wanted) for wanted in ("", *sorted(requirement.extras))]
    if found["torch"].version != versions.TORCH_VERSION:
        raise EngineError(f"the .venv has torch {found['torch'].version}, the pin is {versions.TORCH_VERSION}: "
                          "run `make setup`")
    return [found[key] for key in sorted(found)]


def _site_files(distribution: metadata.Distribution) -> Iterator[tuple[str, Path]]:
    """(path relative to site-packages, file on disk) for every file the distribution installed there."""
    for entry in distribution.files or []:
        relative = entry.as_posix()
        if relative.startswith("..") or "__pycache__" in relative:
            continue  # scripts in the venv's bin/ are rewritten (`_scripts`); byte code is compiled on demand
        path = Path(entry.locate())
        if path.is_file():
            yield relative, path


def _scripts(distributions: Iterable[metadata.Distribution]) -> dict[str, str]:
    """Console scripts (e.g. torchrun) as pip writes them, for the image's /usr/bin/python3."""
    scripts = {}
    for distribution in distributions:
        for entry in distribution.entry_points.select(group="console_scripts"):
            module, _, attr = entry.value.partition(":")
            scripts[entry.name] = ("#!/usr/bin/python3\nimport re\nimport sys\n"
                                   f"from {module} import {attr.split('.')[0]}\n"
                                   "if __name__ == '__main__':\n"
                                   "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                                   f"    sys.exit({attr}())\n")
    return scripts


def base_key(distributions: Iterable[metadata.Distribution]) -> str:
    """Digest of what decides the base's content: suite, packages, this module, every torch file's RECORD hash."""
    digest = hashlib.sha256(f"{SUITE}\n{' '.join(PACKAGES)}\n".encode())
    digest.update(Path(__file__).read_bytes())
    for distribution in distributions:
        digest.update(f"{distribution.metadata['Name']}=={distribution.version}\n".encode())
        # Only files inside site-packages: the venv's console scripts carry its path in their shebang.
        record = "".join(line + "\n" for line in (distribution.read_text("RECORD") or "").splitlines()
                         if not line.startswith(".."))
        digest.update(hashlib.sha256(record.encode()).digest())
    return digest.hexdigest()[:16]


def _python_minor(rootfs: Path) -> str:
    done = subprocess.run(["chroot", str(rootfs), "python3", "-c",
                           "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def debootstrap(rootfs: Path, mirror: str | None = None) -> None:
    """A minimal Debian with PACKAGES into `rootfs` (replaced if it exists)."""
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    command = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs),
               mirror or apt_mirror()]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EngineError(f"{' '.join(command)} failed (exit {done.returncode}): {done.stdout[-2000:]}"
                          f"{done.stderr[-2000:]}")
    # What a container image does not carry: apt's downloaded lists and packages.
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for path in (rootfs / leftover).glob("*"):
            if path.is_file():
                path.unlink()


def _add_tree(archive: tarfile.TarFile, rootfs: Path) -> None:
    for path in sorted(rootfs.rglob("*")):
        relative = path.relative_to(rootfs).as_posix()
        if relative.startswith(("proc/", "sys/", "dev/")):
            continue  # the runtime mounts these; debootstrap's device nodes are not needed
        archive.add(path, arcname=relative, recursive=False)


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    archive.addfile(info, io.BytesIO(data))


def build(engine: Engine, log=print) -> str:
    """The stand-in base's tag on `engine`, importing it unless an image with that key already exists."""
    distributions = torch_closure()
    tag = f"{REPOSITORY}:{base_key(distributions)}"
    if engine.docker("image", "inspect", tag, check=False).returncode == 0:
        log(f"engine base: {tag} cached")
        return tag
    started = time.monotonic()
    rootfs = engine.root / "base-rootfs"
    debootstrap(rootfs)
    minor = _python_minor(rootfs)
    venv_minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if minor != venv_minor or minor not in BASE_CONTRACT.python_minors:
        raise EngineError(f"debootstrap {SUITE} gave Python {minor}; the .venv's torch files are for {venv_minor} "
                          f"and the contract allows {BASE_CONTRACT.python_minors}")
    site = SITE_PACKAGES.format(minor=minor)
    log(f"engine base: rootfs in {time.monotonic() - started:.0f} s; importing torch {versions.TORCH_VERSION} "
        f"from {sys.prefix} ({len(distributions)} distributions)")
    process = subprocess.Popen(
        [DOCKER_CLI, "import", "--change", 'CMD ["python"]', "--change", "ENV LANG=C.UTF-8",
         "--message", f"gtp CPU stand-in base: Debian {SUITE} + torch {versions.TORCH_VERSION}", "-", tag],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=engine.env)
    try:
        with tarfile.open(fileobj=process.stdin, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            _add_tree(archive, rootfs)
            for distribution in distributions:
                for relative, path in _site_files(distribution):
                    archive.add(path, arcname=f"{site}/{relative}", recursive=False)
            for name, text in _scripts(distributions).items():
                _add_bytes(archive, f"usr/local/bin/{name}", text.encode(), mode=0o755)
        process.stdin.close()
    except BrokenPipeError:
        pass
    stderr = process.stderr.read()
    process.stdout.read()
    if process.wait() != 0:
        raise EngineError(f"docker import failed (exit {process.returncode}): {stderr.decode(errors='replace')}")
    shutil.rmtree(rootfs, ignore_errors=True)
    log(f"engine base: {tag} built in {time.monotonic() - started:.0f} s")
    return tag


def check_contract(engine: Engine, tag: str, contract: BaseContract = BASE_CONTRACT) -> list[str]:
    """What the image at `tag` lacks of the contract (empty when it holds), run inside the image itself."""
    probe = ("import shutil, sys, torch\n"
             "print(f'{sys.version_info[0]}.{sys.version_info[1]}', torch.__version__.split('+')[0])\n"
             f"print(' '.join(c for c in {list(contract.commands)!r} if not shutil.which(c)))\n")
    done = engine.docker("run", "--rm", "--network", "none", tag, "python", "-c", probe, check=False)
    if done.returncode != 0:
        return [f"`python -c 'import torch'` failed in {tag}: {done.stderr.decode(errors='replace')[-800:]}"]
    first, missing = (done.stdout.decode().splitlines() + ["", ""])[:2]
    python_minor, torch_version = first.split()
    problems = []
    if python_minor not in contract.python_minors:
        problems.append(f"Python {python_minor} is not one of {contract.python_minors}")
    if torch_version != contract.torch_version:
        problems.append(f"torch {torch_version} != {contract.torch_version}")
    if missing.strip():
        problems.append(f"not on PATH: {missing.strip()}")
    pip = engine.docker("run", "--rm", "--network", "none", tag, "python", "-m", "pip", "--version", check=False)
    if pip.returncode != 0:
        problems.append("`python -m pip` does not run")
    return problems
