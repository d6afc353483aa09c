"""A real multi-node Docker Swarm on this one machine, for `make swarm-test` (issue 28), torn down completely after.

    python -m tools.swarm_harness test [PYTEST ARGS]   # run tests/swarm_engine (root, output shown), time vs goal
    python -m tools.swarm_harness cleanup              # end what an interrupted run left (daemons, namespaces, links)

Each node is one Debian dockerd (tools.engine.Engine) in its own network namespace, started through
`nsenter --net=/run/netns/<ns>` (`ip netns exec` would remount /sys and hide the cgroups from the daemon) and
`unshare --uts` (its own hostname, so `docker node ls` and the tasks' placement name distinct servers). The
namespaces hang on a Linux bridge in the host by veth pairs with the test's own addresses (`SUBNET`); each daemon
advertises and carries Swarm's data path on its veth address, runs with its own data/exec roots, pidfile, socket and
containerd namespace, advertises `gpus_per_node` fake GPUs as generic resources
(`--node-generic-resource NVIDIA-GPU=<id>`, as docs/swarm.md tells a site to configure its real ones) and gets the node
labels the stack's placement uses (`docker node update --label-add`, docs/swarm.md's step 3).

Images reach the nodes without a registry: `seed` gives each node's data root hard links (`cp -al`) of a stopped
template daemon's `image/` and `overlay2/` trees. Docker never writes to an extracted layer (a container writes to
its own upper directory) and replaces its JSON indexes by rename, so the nodes share the layers' inodes: seconds,
no disk. Everything but the template (the engine root, reused across runs) lives under the harness root and is
removed by `stop`, which then checks that no daemon, namespace, link or mount is left.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conventions.names import CPU_STAND_IN_GPU_MODEL
from tools import system_packages
from tools.engine import Engine, EngineError, leftovers, mounts_under

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = Path("/var/tmp/gtp-swarm")
PREFIX = "gtpsw"
"""Names of everything the harness creates in the host: the bridge, veths and namespaces (cleanup's key)."""
BRIDGE = f"{PREFIX}0"
SUBNET = "10.213.0"
"""The test's own /24 (a private range nothing else here uses): bridge .1, node i at .1<i>."""
SWARM_PORT = 2377
CI_GOAL_S = 600
"""What the Swarm test may add to CI (issue 28: under 10 minutes)."""


def harness_root(environ: Mapping[str, str] = os.environ) -> Path:
    """`GTP_SWARM_ROOT`, else /var/tmp/gtp-swarm (short: containerd's socket paths are limited to 108 bytes)."""
    return Path(environ.get("GTP_SWARM_ROOT") or DEFAULT_ROOT).resolve()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise EngineError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def host_leftovers(root: Path) -> list[str]:
    """What the harness creates in the host and must not outlive it: its namespaces, links, processes, mounts."""
    found = [f"netns {name}" for name in _ip("netns", "list", check=False).stdout.split()
             if name.startswith(PREFIX)]
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            found.append(f"link {name}")
    found += [f"process {entry}" for entry in leftovers(root)]
    found += [f"mount {mount}" for mount in mounts_under(root)]
    return found


@dataclass
class Node:
    index: int
    engine: Engine

    @property
    def name(self) -> str:
        return f"{PREFIX}-node{self.index}"

    @property
    def address(self) -> str:
        return f"{SUBNET}.{10 + self.index}"

    @property
    def veth(self) -> str:
        return f"{PREFIX}-v{self.index}"

    def docker(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.engine.docker(*args, **kwargs)

    @property
    def url(self) -> str:
        return f"unix://{self.engine.socket}"


@dataclass
class SwarmHarness:
    """`size` nodes, node 1 the manager; `gpus_per_node` fake GPUs each; `labels` on every node."""

    root: Path = field(default_factory=harness_root)
    size: int = 3
    gpus_per_node: int = 1
    gpu_resource: str = "NVIDIA-GPU"
    labels: Mapping[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def manager(self) -> Node:
        return self.nodes[0]

    @property
    def shared(self) -> Path:
        """The host directory every node bind-mounts as the checkpoint volume (storage `host-path`)."""
        return self.root / "shared"

    def _node(self, index: int) -> Node:
        node_root = self.root / f"n{index}"
        resources = [f"--node-generic-resource={self.gpu_resource}=GPU-fake-{index}-{gpu}"
                     for gpu in range(self.gpus_per_node)]
        name = f"{PREFIX}-node{index}"
        # nsenter and unshare exec (no fork): the Popen's pid stays dockerd's, so Engine.stop signals the daemon.
        wrap = ("nsenter", f"--net=/run/netns/{name}", "unshare", "--uts", "sh", "-c",
                f'hostname {name} && exec "$@"', "sh")
        return Node(index, Engine(root=node_root, wrap=wrap, daemon_args=tuple(resources),
                                  containerd_namespace=name, min_free_gb=5))

    def start(self, seed_from: Path | None = None) -> SwarmHarness:
        """Network, daemons (their data roots seeded from the stopped daemon root `seed_from`), swarm, labels."""
        started = time.monotonic()
        left = host_leftovers(self.root)
        if left:
            raise EngineError(f"a previous Swarm harness left {left}: run `python -m tools.swarm_harness cleanup`")
        self.root.mkdir(parents=True, exist_ok=True)
        self.shared.mkdir(exist_ok=True)
        os.chown(self.shared, 10001, 10001)  # the trainer's uid, as docs/swarm.md asks of a site's host-path directory
        self.nodes = [self._node(index) for index in range(1, self.size + 1)]
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for node in self.nodes:
            _ip("netns", "add", node.name)
            _ip("link", "add", node.veth, "type", "veth", "peer", "name", "eth0", "netns", node.name)
            _ip("link", "set", node.veth, "master", BRIDGE, "up")
            _ip("-n", node.name, "addr", "add", f"{node.address}/24", "dev", "eth0")
            _ip("-n", node.name, "link", "set", "eth0", "up")
            _ip("-n", node.name, "link", "set", "lo", "up")
        self.timings["network"] = round(time.monotonic() - started, 1)
        if seed_from is not None:
            seeded = time.monotonic()
            for node in self.nodes:
                seed(seed_from, node.engine.root / "data")
            self.timings["image seeding"] = round(time.monotonic() - seeded, 1)
        daemons = time.monotonic()
        for node in self.nodes:
            node.engine.start()
        self.timings["daemons"] = round(time.monotonic() - daemons, 1)
        joined = time.monotonic()
        self.manager.docker("swarm", "init", "--advertise-addr", self.manager.address, "--listen-addr",
                            f"{self.manager.address}:{SWARM_PORT}", "--data-path-addr", self.manager.address)
        token = self.manager.docker("swarm", "join-token", "-q", "worker").stdout.decode().strip()
        for node in self.nodes[1:]:
            node.docker("swarm", "join", "--token", token, "--advertise-addr", node.address, "--listen-addr",
                        f"{node.address}:{SWARM_PORT}", "--data-path-addr", node.address,
                        f"{self.manager.address}:{SWARM_PORT}", timeout=60)
        label_args = [arg for key, value in sorted(self.labels.items()) for arg in ("--label-add", f"{key}={value}")]
        for node in self.nodes:
            if label_args:
                self.manager.docker("node", "update", *label_args, node.name)
        self.timings["swarm init and join"] = round(time.monotonic() - joined, 1)
        self.timings["harness start"] = round(time.monotonic() - started, 1)
        return self

    def node_of(self, hostname: str) -> Node:
        return next(node for node in self.nodes if node.name == hostname)

    def stop_node(self, node: Node) -> None:
        """The fault: the server's daemon stops (as `systemctl stop docker`: it stops its containers first)."""
        node.engine.stop()

    def stop(self) -> list[str]:
        """Stop every daemon, remove namespaces, links and the harness root; returns what is left (nothing)."""
        with contextlib.suppress(EngineError):
            if self.nodes and self.manager.engine.process:
                # No service may restart a task while the daemons go down.
                services = self.manager.docker("service", "ls", "-q", check=False).stdout.decode().split()
                if services:
                    self.manager.docker("service", "rm", *services, check=False, timeout=60)
        for node in reversed(self.nodes):
            with contextlib.suppress(EngineError):
                node.engine.stop()
        cleanup(self.root)
        return host_leftovers(self.root)


EDGE_SWARM = ROOT / "stacks" / "Pulumi.edge-swarm.yaml"
TEST_JOB = "swarm-finetune"


def cpu_stack(edge: Mapping[str, Any], *, host_path: str, max_steps: int = 40, gpus_per_node: int = 1,
              extra_args: Sequence[str] = ("--num-samples=512", "--log-every=1"),
              converge_timeout_seconds: int = 120) -> dict[str, Any]:
    """The test stack: edge-swarm's config, changed only where this machine differs from a site (no GPU, no
    IPsec, no registry, no NFS, small servers) and where a test needs a short run. Everything else (services,
    network, placement, restart policy, rendezvous) is planned by the same program from the same config."""
    stack = copy.deepcopy(dict(edge))
    config = stack["config"]
    swarm = config["gtp:cluster"]["swarm"]
    swarm["encryptOverlay"] = False  # measured: an encrypted overlay passes no traffic between these namespaces
    swarm["cpuStandIn"] = True  # no GPU here: the reserved generic resources are fake, the processes CPU ones
    swarm["convergeTimeoutSeconds"] = converge_timeout_seconds
    for group in config["gtp:gpuNodeGroups"].values():
        group["gpusPerNode"] = gpus_per_node
        group["gpuModel"] = CPU_STAND_IN_GPU_MODEL  # what marks a site without GPUs (cluster.swarm.cpuStandIn)
    workload = config["gtp:workloads"][TEST_JOB]
    # 1.5 of a node's 2 advertised CPUs: two tasks never fit on one node (without generic resources, which the
    # stand-in does not reserve, the CPU reservation is what keeps one task per server here).
    workload.update({"model": "cnn", "maxSteps": max_steps, "batchSize": 8, "checkpointEvery": 2, "cpu": "1.5",
                     "memory": "3Gi", "shmSize": "1Gi", "ephemeralStorage": "1Gi",
                     "terminationGracePeriodSeconds": 30, "extraArgs": list(extra_args)})
    config["gtp:storage"] = {"kind": "host-path", "hostPath": host_path}
    return stack


def seed(template: Path, data_root: Path) -> None:
    """Give `data_root` the images of the stopped daemon root `template`: hard links of its layer and image trees."""
    data_root.mkdir(parents=True, exist_ok=True)
    for tree in ("image", "overlay2"):
        if not (template / tree).is_dir():
            raise EngineError(f"{template / tree} is missing: the template is not an overlay2 daemon root")
        shutil.rmtree(data_root / tree, ignore_errors=True)
        done = subprocess.run(["cp", "-al", str(template / tree), str(data_root / tree)], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise EngineError(f"cp -al {template / tree} failed: {done.stderr.strip()[-2000:]}")


def cleanup(root: Path) -> list[str]:
    """End what a harness under `root` left: processes, mounts, namespaces, links, then the root itself."""
    for entry in leftovers(root):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(entry.split(":")[0]), signal.SIGKILL)
    time.sleep(0.5 if leftovers(root) else 0)
    for mount in mounts_under(root):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    for name in _ip("netns", "list", check=False).stdout.split():
        if name.startswith(PREFIX):
            _ip("netns", "delete", name, check=False)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            _ip("link", "delete", name, check=False)
    if not mounts_under(root):
        shutil.rmtree(root, ignore_errors=True)
    return host_leftovers(root)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else "help"
    try:
        if command == "cleanup":
            left = cleanup(harness_root())
            print("swarm: cleanup: " + ("nothing left" if not left else f"still there: {left}"))
            return 0 if not left else 1
        if command == "test":
            added = system_packages.install(system_packages.SUITES["swarm"])
            if added:
                print(f"swarm: installed {', '.join(added)}")
            started = time.monotonic()
            # -s: the ranks' nodes and each fault's recovery are printed as they happen (CI's log shows them).
            done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-s",
                                   "-m", "engine", "tests/swarm_engine", *args], cwd=ROOT, check=False)
            total = time.monotonic() - started
            print(f"swarm: tests/swarm_engine took {total:.0f} s = {total / CI_GOAL_S:.2f} x the "
                  f"{CI_GOAL_S // 60}-minute CI goal")
            return done.returncode
    except (EngineError, system_packages.MissingPackages) as error:
        print(f"swarm: {error}", file=sys.stderr)
        return 2
    print(__doc__)
    return 0 if command == "help" else 2


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
