"""The Debian packages a test suite needs, installed by the make target that runs it (so README's commands work on a
fresh machine, and `.ci/run` calls nothing else).

    python -m tools.system_packages test      # what `make test` needs (prometheus, skopeo, graphviz, chromium, gnupg)
    python -m tools.system_packages engine    # what `make engine-test` needs (docker.io, registry, skopeo, ...)

As root, what is missing is installed with apt-get; otherwise the command exits 2 with the one `sudo apt-get
install` line to run. Nothing is installed that is already there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SystemPackage:
    command: str
    """The binary that shows the package is installed (a name on PATH, or an absolute path)."""
    package: str
    """The Debian package that ships it."""
    why: str


PACKAGES: dict[str, SystemPackage] = {package.package: package for package in (
    SystemPackage("prometheus", "prometheus", "tests/simulate/test_prometheus.py runs the KEDA queries through it; "
                  "its promtool unit-tests the alert rules and dashboard queries (tests/gpu/test_alert_rules.py)"),
    SystemPackage("skopeo", "skopeo", "the mirror copies images with it (tests/test_mirror.py, tests/engine)"),
    SystemPackage("dot", "graphviz", "draws the plan's overview.svg (verify/overview.py, tests/test_overview.py)"),
    SystemPackage("chromium", "chromium", "the headless browser tests/test_overview.py screenshots overview.svg with"),
    SystemPackage("gpg", "gnupg", "tests/image/test_efa_installer_verification.py signs and verifies with throwaway "
                  "keys, as the image's efa-installer stage verifies AWS's EFA installer"),
    SystemPackage("/usr/sbin/dockerd", "docker.io", "the Docker Engine of tests/engine (Debian's 20.10 and its CLI)"),
    SystemPackage("/usr/bin/containerd", "containerd", "dockerd's container runtime manager"),
    SystemPackage("/usr/sbin/runc", "runc", "the OCI runtime containerd starts containers with"),
    SystemPackage("/usr/bin/docker-registry", "docker-registry", "the local registries of tests/engine"),
    SystemPackage("/usr/sbin/debootstrap", "debootstrap", "the CPU stand-in base of the training image"),
    SystemPackage("ip", "iproute2", "the Swarm test's network namespaces, bridge and veth pairs (tools.swarm_harness)"),
    SystemPackage("nsenter", "util-linux", "starts each Swarm test node's dockerd in its network namespace"),
)}
SUITES: dict[str, tuple[str, ...]] = {
    "test": ("prometheus", "skopeo", "graphviz", "chromium", "gnupg"),
    "engine": ("docker.io", "containerd", "runc", "docker-registry", "skopeo", "debootstrap"),
    "swarm": ("docker.io", "containerd", "runc", "debootstrap", "iproute2", "util-linux"),
}


class MissingPackages(RuntimeError):
    """Packages are missing and can't be installed here; the message is the command to run."""


def _present(command: str) -> bool:
    return os.path.exists(command) if os.path.isabs(command) else shutil.which(command) is not None


def missing(names: Sequence[str], packages: Mapping[str, SystemPackage] | None = None) -> list[str]:
    """The packages of `names` whose command is not installed, in the given order."""
    table = PACKAGES if packages is None else packages
    return [name for name in names if not _present(table[name].command)]


def install(names: Sequence[str], *, is_root: bool | None = None, run=subprocess.run) -> list[str]:
    """Install what is missing of `names` (root only); returns what was installed."""
    wanted = missing(names)
    if not wanted:
        return []
    if not (os.geteuid() == 0 if is_root is None else is_root):
        reasons = "; ".join(f"{name}: {PACKAGES[name].why}" for name in wanted)
        raise MissingPackages(f"missing Debian packages ({reasons}): run `sudo apt-get install -y "
                              f"--no-install-recommends {' '.join(wanted)}`")
    environ = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", *wanted]):
        done = run(command, env=environ, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise MissingPackages(f"{' '.join(command)} failed (exit {done.returncode}): "
                                  f"{(done.stderr or '').strip()[-2000:]}")
    return wanted


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in SUITES:
        print(f"usage: python -m tools.system_packages {{{','.join(SUITES)}}}", file=sys.stderr)
        return 2
    try:
        added = install(SUITES[args[0]])
    except MissingPackages as error:
        print(f"system packages: {error}", file=sys.stderr)
        return 2
    if added:
        print(f"system packages: installed {', '.join(added)}")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
