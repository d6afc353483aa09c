"""A real Docker Engine and local registries for the tests, started under a build folder and stopped afterwards.

    python -m tools.engine install        # apt-get install what is missing (root)
    python -m tools.engine test [PYTEST ARGS]   # start, run tests/engine, stop; prints each phase's time
    python -m tools.engine cleanup        # end what an interrupted run left under the engine root

Debian's `docker.io` (Engine 20.10 with containerd, runc and BuildKit) runs here as root when it leaves the host's
networking alone: `--iptables=false --ip6tables=false --ip-masq=false --bridge=none`, its own data and exec roots,
pidfile and socket, and its own containerd namespace, so it never meets another daemon on the machine. RUN steps
of a build then need `--network host` (there is no bridge). Debian's own CLI (`/usr/bin/docker`, 20.10) is used:
a newer CLI on PATH demands the buildx plugin for BuildKit builds.

Registries are Debian's `docker-registry` (the CNCF Distribution registry) on 127.0.0.1, each with its own storage
folder. Docker treats 127.0.0.0/8 registries as insecure (plain HTTP) by default; skopeo is told so through the
`registries.conf` of `Engine.registries_conf()`.

Everything lives under `GTP_ENGINE_ROOT` (default `build/engine`): CI points it outside the clone so that the CPU
base image (`tools.engine_base`) is reused across runs on one machine; a run's other images, BuildKit's cache and the
registries' storage are removed at its end (`Engine.prune`, `Engine.stop`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools import system_packages

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ENGINE_ROOT = ROOT / "build" / "engine"
DOCKER_CLI = "/usr/bin/docker"
"""Debian's 20.10 CLI: BuildKit builds without the buildx plugin a newer CLI on PATH would demand."""
DOCKERD = "/usr/sbin/dockerd"
REGISTRY = "/usr/bin/docker-registry"
START_TIMEOUT_S = 60
MIN_FREE_GB = 15
STOP_TIMEOUT_S = 30


class EngineError(RuntimeError):
    """The engine or a registry could not be installed, started or stopped; the message says what to do."""


def engine_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the engine keeps its state: `GTP_ENGINE_ROOT`, else build/engine of this checkout."""
    return Path(environ.get("GTP_ENGINE_ROOT") or DEFAULT_ENGINE_ROOT).resolve()


def install() -> list[str]:
    """apt-get install what the engine tests need and is missing (tools.system_packages); returns what was
    installed. Not root: EngineError with the command to run."""
    try:
        return system_packages.install(system_packages.SUITES["engine"])
    except system_packages.MissingPackages as error:
        raise EngineError(str(error)) from error


def host_ca_bundle(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The CA bundle this machine's own clients trust (`PIP_CERT`, `SSL_CERT_FILE`, else Debian's), if any."""
    for candidate in (environ.get("PIP_CERT"), environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait(check, what: str, timeout_s: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise EngineError(f"{what} did not answer within {timeout_s:g} s" + (f"; its log ends:\n{tail}" if tail else ""))


def _stop_process(process: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        # The whole session (dockerd started its own containerd in it): nothing may be left behind.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def mounts_under(path: Path, mounts: Path = Path("/proc/self/mounts")) -> list[str]:
    """Mount points at or below `path` (deepest first), from the mount table."""
    prefix = str(path.resolve())
    found = []
    for line in mounts.read_text().splitlines():
        target = line.split()[1].replace("\\040", " ")
        if target == prefix or target.startswith(prefix + "/"):
            found.append(target)
    return sorted(found, key=len, reverse=True)


@dataclass
class Registry:
    """A Distribution registry on 127.0.0.1, its blobs under `root`."""

    root: Path
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Registry:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        config = self.root / "config.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "version": 0.1, "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(self.root / "data")}, "delete": {"enabled": True}},
            "http": {"addr": self.address},
        }))
        log = self.root / "registry.log"
        self.process = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=log.open("wb"),
                                        stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: _answers(self.address), f"registry {self.address}", START_TIMEOUT_S, log)
        return self

    def stop(self) -> None:
        if self.process:
            _stop_process(self.process)
            self.process = None


def _answers(address: str) -> bool:
    host, port = address.split(":")
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
        return True
    return False


@dataclass
class Engine:
    """One dockerd (and the containerd it starts) under `root`; `docker(...)` runs Debian's CLI against it."""

    root: Path = field(default_factory=engine_root)
    storage_driver: str = "overlay2"
    process: subprocess.Popen | None = None
    registries: list[Registry] = field(default_factory=list)
    wrap: tuple[str, ...] = ()
    """A command the daemon is started through (tools.swarm_harness: `nsenter --net=<namespace> unshare --uts ...`,
    which exec the daemon, so `process` is still dockerd)."""
    daemon_args: tuple[str, ...] = ()
    """More dockerd flags (a Swarm node's labels and generic resources)."""
    containerd_namespace: str = "gtp-engine"
    min_free_gb: float = MIN_FREE_GB

    @property
    def socket(self) -> Path:
        return self.root / "run" / "docker.sock"

    @property
    def env(self) -> dict[str, str]:
        """The environment for the CLI: this daemon, BuildKit, no user config of the machine's docker."""
        return {**os.environ, "DOCKER_HOST": f"unix://{self.socket}", "DOCKER_BUILDKIT": "1",
                "DOCKER_CONFIG": str(self.root / "cli")}

    def start(self) -> Engine:
        if not Path(DOCKERD).exists():
            raise EngineError(f"{DOCKERD} is missing: run `python -m tools.engine install` (root) first")
        for folder in ("data", "exec", "run", "cli"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        free_gb = shutil.disk_usage(self.root).free / 1e9
        if free_gb < self.min_free_gb:
            raise EngineError(f"{free_gb:.1f} GB free under {self.root}; the engine tests need about "
                              f"{self.min_free_gb:g} GB "
                              "(a 5 GB base, its pushes to two local registries, the builds)")
        log = self.root / "dockerd.log"
        # A short exec root: containerd's shim sockets live under it and a unix socket path is limited to 108 bytes.
        command = [*self.wrap, DOCKERD, "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
                   "--pidfile", str(self.root / "run" / "docker.pid"), "--host", f"unix://{self.socket}",
                   "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--bridge=none",
                   "--storage-driver", self.storage_driver,
                   "--containerd-namespace", self.containerd_namespace,
                   "--containerd-plugins-namespace", f"{self.containerd_namespace}-plugins", *self.daemon_args]
        self.process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                        start_new_session=True)

        def answers() -> bool:
            if self.process.poll() is not None:
                raise EngineError(f"dockerd exited with {self.process.returncode}; its log ends:\n"
                                  + log.read_text(errors="replace")[-3000:])
            return self.docker("version", check=False).returncode == 0

        _wait(answers, "dockerd", START_TIMEOUT_S, log)
        return self

    def registry(self, name: str) -> Registry:
        """Start one more local registry (its storage under the engine root, fresh each time)."""
        folder = self.root / "registries" / name
        shutil.rmtree(folder, ignore_errors=True)
        started = Registry(folder).start()
        self.registries.append(started)
        return started

    def registries_conf(self) -> Path:
        """A containers-registries.conf marking the local registries plain HTTP (`insecure`), for skopeo's
        `--registries-conf` (skopeo 1.9 does not read CONTAINERS_REGISTRIES_CONF: measured)."""
        conf = self.root / "registries.conf"
        conf.write_text("".join(f'[[registry]]\nlocation = "{registry.address}"\ninsecure = true\n\n'
                                for registry in self.registries))
        return conf

    def docker(self, *args: str, check: bool = True, input: bytes | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run the CLI; with `check`, a failure raises EngineError carrying the command and its stderr."""
        done = subprocess.run([DOCKER_CLI, *args], env=self.env, input=input, capture_output=True,
                              timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise EngineError(f"docker {' '.join(args)} failed (exit {done.returncode}):\n"
                              + done.stderr.decode(errors="replace")[-4000:])
        return done

    def build(self, context: Path, tag: str, build_args: Mapping[str, str], *, platform: str = "linux/amd64",
              dockerfile: Path | None = None, ca_bundle: Path | None = None, timeout: float = 1800) -> str:
        """`docker build` with BuildKit as pulumi-docker runs it (context, Dockerfile, platform, build args),
        RUN steps on the host network (the daemon has no bridge); returns the image ID.

        `ca_bundle` goes in as the BuildKit secret `pip-ca` (images/trainer/Dockerfile): by default the host's
        bundle, whose roots include a TLS-inspecting proxy's CA where one sits between this machine and PyPI."""
        command = ["build", "--network", "host", "--platform", platform, "--tag", tag,
                   "--file", str(dockerfile or context / "Dockerfile")]
        for key in sorted(build_args):
            command += ["--build-arg", f"{key}={build_args[key]}"]
        bundle = ca_bundle if ca_bundle is not None else host_ca_bundle()
        if bundle:
            command += ["--secret", f"id=pip-ca,src={bundle}"]
        self.docker(*command, str(context), timeout=timeout)
        return self.docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.decode().strip()

    def prune(self, keep: set[str]) -> None:
        """Remove every image but `keep` (tags) and BuildKit's cache: a run's builds and planted variants would
        otherwise pile up under the engine root, run after run (the base is what is worth keeping)."""
        listed = self.docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}").stdout.decode().split()
        doomed = [tag for tag in listed if tag not in keep and not tag.endswith(":<none>")]
        if doomed:
            self.docker("image", "rm", "--force", *doomed, check=False, timeout=600)
        self.docker("image", "prune", "--force", check=False, timeout=600)
        self.docker("builder", "prune", "--all", "--force", check=False, timeout=600)

    def stop(self) -> None:
        """Stop registries (their storage is scratch: deleted) and the daemon, unmount what it left, and fail if a
        process or mount survives."""
        for registry in self.registries:
            registry.stop()
            shutil.rmtree(registry.root, ignore_errors=True)
        self.registries.clear()
        if self.process:
            with contextlib.suppress(Exception):
                # Containers first: a running one keeps its overlay mounted.
                ids = self.docker("ps", "-aq", check=False).stdout.decode().split()
                if ids:
                    self.docker("rm", "-f", *ids, check=False, timeout=60)
            _stop_process(self.process)
            self.process = None
        for mount in mounts_under(self.root):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
        left = list(mounts_under(self.root))
        if left:
            raise EngineError(f"mounts left under {self.root}: {left}")


def leftovers(root: Path) -> list[str]:
    """Processes whose command line names `root` (dockerd, containerd, shims, registries): none after `stop`."""
    found = []
    marker = str(root)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker in cmdline:
                found.append(f"{proc.name}: {cmdline.strip()[:200]}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else "help"
    try:
        if command == "install":
            added = install()
            print("engine: installed " + (", ".join(added) if added else "nothing (all present)"))
            return 0
        if command == "cleanup":
            # After an interrupted run: end whatever still runs under the engine root, and unmount what it left.
            root = engine_root()
            for entry in leftovers(root):
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(entry.split(":")[0]), signal.SIGKILL)
            for mount in mounts_under(root):
                subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
            left = leftovers(root) + mounts_under(root)
            print(f"engine: cleanup of {root}: " + ("nothing left" if not left else f"still there: {left}"))
            return 0 if not left else 1
        if command == "test":
            added = install()
            if added:
                print(f"engine: installed {', '.join(added)}")
            started = time.monotonic()
            python = sys.executable
            done = subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-m", "engine",
                                   "tests/engine", *args], cwd=ROOT, check=False)
            print(f"engine: tests/engine took {time.monotonic() - started:.0f} s")
            return done.returncode
    except EngineError as error:
        print(f"engine: {error}", file=sys.stderr)
        return 2
    print(__doc__)
    return 0 if command == "help" else 2


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
