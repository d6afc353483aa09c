"""A loopback control plane from the built binaries: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok (fake nodes and pod lifecycle), with a CA and client certificates made by openssl.

Everything lives under one state folder (default build/cluster-test/<name>): pki/, kubeconfigs, logs/, etcd data,
`processes.json` (pid, command and ports of what was started). `stop()` ends exactly those pids (never by name)
and `leftovers()` says what would remain: a live pid, a listening port, a mount under the state folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tools.cluster_test import build

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = "processes.json"
WEBHOOK_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""The rotators' fixed cert dir (cert-controller v0.16.0 rotator.go:877), bind-mounted per operator process."""
SERVICE_CIDR = "10.0.0.0/24"
# kube-apiserver: loopback serving; Pod Security (with NodeRestriction) is what the namespaces' labels drive;
# ResourceQuota, LimitRanger, Priority and the webhook plugins are in the default set of 1.34
# (k8s.io/kubernetes@v1.34.12 pkg/kubeapiserver/options/plugins.go:155 `DefaultOffAdmissionPlugins`: its
# defaultOnPlugins at :158-176 list LimitRanger, the two webhook plugins, ResourceQuota, Priority, PodSecurity).
APISERVER_FLAGS = (
    "--authorization-mode", "Node,RBAC", "--allow-privileged=true", "--profiling=false",
    "--enable-admission-plugins", "NodeRestriction,PodSecurity",
    # The apiserver's own endpoint is 127.0.0.1, which the Endpoints validation refuses (loopback range).
    "--endpoint-reconciler-type", "none",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(*command: str, cwd: Path | None = None) -> None:
    subprocess.run(command, check=True, cwd=cwd, capture_output=True)


def make_pki(directory: Path) -> None:
    """CA, the apiserver's serving cert (127.0.0.1 and the kubernetes service names), one client cert per
    component, a front-proxy client, the service-account key pair, a loopback serving cert for webhooks."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / "ca.crt").exists():
        return
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-days", "2", "-subj", "/CN=gtp-cluster-test-ca", cwd=directory)
    _run("openssl", "genrsa", "-out", "sa.key", "2048", cwd=directory)
    _run("openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    (directory / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n")
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject, ext in (("apiserver", "/CN=kube-apiserver", "server.ext"),
                               ("webhook", "/CN=loopback-webhook", "server.ext"),
                               ("admin", "/O=system:masters/CN=cluster-test-admin", "client.ext"),
                               ("controller-manager", "/CN=system:kube-controller-manager", "client.ext"),
                               ("scheduler", "/CN=system:kube-scheduler", "client.ext"),
                               ("kwok", "/O=system:masters/CN=kwok", "client.ext"),
                               ("front-proxy-client", "/CN=front-proxy-client", "client.ext")):
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=directory)
        _run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", ext, cwd=directory)


def kubeconfig(state: Path, user: str, port: int) -> Path:
    pki = state / "pki"
    path = state / f"{user}.kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                  "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": user, "user": {"client-certificate": str(pki / f"{user}.crt"),
                                          "client-key": str(pki / f"{user}.key")}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}]}))
    return path


@dataclass
class Cluster:
    """A started (or startable) test cluster under `state`."""

    state: Path
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, dict] = field(default_factory=dict)
    binaries: dict[str, Path] = field(default_factory=dict)
    stages: tuple[str, ...] = ()
    """kwok stage files (under kwok's kustomize/stage/) on top of KWOK_STAGES."""

    @property
    def admin(self) -> Path:
        return self.state / "admin.kubeconfig"

    @property
    def hosts(self) -> Path:
        return self.state / "hosts"

    def add_host(self, name: str) -> None:
        with self.hosts.open("a") as hosts:
            hosts.write(f"127.0.0.1 {name}\n")

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(self.binaries["kubectl"]), "--kubeconfig", str(self.admin), *args],
                              input=input, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])}: {done.stderr.strip()[-2000:]}")
        return done

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    # --- processes -------------------------------------------------------------------------------------------
    def spawn(self, name: str, command: list[str], env: dict[str, str] | None = None,
              ports: dict[str, int] | None = None) -> None:
        log = (self.state / "logs" / f"{name}.log").open("w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.state,
                                   env={**os.environ, **(env or {})}, start_new_session=True)
        self.processes[name] = {"pid": process.pid, "command": command[:1], "ports": sorted((ports or {}).values())}
        self._save()

    def _save(self) -> None:
        (self.state / PROCESSES).write_text(json.dumps({"ports": self.ports, "processes": self.processes}, indent=1))

    def wait(self, what: str, probe, timeout: float = 120.0) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            for name, info in self.processes.items():
                if not _alive(info["pid"]):
                    tail = (self.state / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"{name} exited while waiting for {what}:\n{tail}")
            try:
                if probe():
                    return time.monotonic() - started
            except (OSError, RuntimeError, ValueError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")

    def https_ok(self, port: int, path: str) -> bool:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=context, timeout=2) as answer:
            return answer.status == 200

    def start(self) -> None:
        """Start etcd, the apiserver, controller-manager, scheduler and kwok; return once the API is ready."""
        self.binaries.update(build.located(["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                            "kubectl", "kwok"]))
        (self.state / "logs").mkdir(parents=True, exist_ok=True)
        make_pki(self.pki)
        for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"):
            self.ports[name] = free_port()
        for user in ("admin", "controller-manager", "scheduler", "kwok"):
            kubeconfig(self.state, user, self.ports["apiserver"])
        etcd = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self.spawn("etcd", [str(self.binaries["etcd"]), "--name", "test", "--data-dir", str(self.state / "etcd-data"),
                            "--listen-client-urls", etcd, "--advertise-client-urls", etcd,
                            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                            "--initial-cluster", f"test={peer}", "--listen-metrics-urls", "",
                            "--unsafe-no-fsync"], ports={"c": self.ports["etcd"], "p": self.ports["etcd-peer"]})
        self.wait("etcd", lambda: urllib.request.urlopen(f"{etcd}/health", timeout=2).status == 200)
        pki = self.pki
        # The apiserver resolves an operator's webhook Service name (`<svc>.<ns>.svc`, the name its own cert
        # rotator certifies) to 127.0.0.1 through a hosts file of ours, bind-mounted on /etc/hosts in a private
        # mount namespace (the host's /etc/hosts is untouched; `add_host` appends in place, same inode).
        self.hosts.write_text(Path("/etc/hosts").read_text() + "\n# gtp cluster-test: operators run as processes\n")
        self.spawn("kube-apiserver", [
            "unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount --bind {self.hosts} /etc/hosts && exec "$0" "$@"',
            str(self.binaries["kube-apiserver"]), "--etcd-servers", etcd, "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1", "--secure-port", str(self.ports["apiserver"]),
            "--tls-cert-file", str(pki / "apiserver.crt"), "--tls-private-key-file", str(pki / "apiserver.key"),
            "--client-ca-file", str(pki / "ca.crt"),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            "--service-cluster-ip-range", SERVICE_CIDR, "--cert-dir", str(self.state / "apiserver-certs"),
            *APISERVER_FLAGS,
            "--requestheader-client-ca-file", str(pki / "ca.crt"),
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--proxy-client-cert-file", str(pki / "front-proxy-client.crt"),
            "--proxy-client-key-file", str(pki / "front-proxy-client.key")], ports={"s": self.ports["apiserver"]})
        self.wait("kube-apiserver /readyz", lambda: self.https_ok(self.ports["apiserver"], "/readyz"))
        for name, user in (("kube-controller-manager", "controller-manager"), ("kube-scheduler", "scheduler")):
            config = str(self.state / f"{user}.kubeconfig")
            extra = ["--use-service-account-credentials=true",
                     "--service-account-private-key-file", str(pki / "sa.key"),
                     "--root-ca-file", str(pki / "ca.crt"), "--cluster-signing-cert-file", str(pki / "ca.crt"),
                     "--cluster-signing-key-file", str(pki / "ca.key"), "--service-cluster-ip-range", SERVICE_CIDR,
                     "--cluster-name", "gtp-test"] if user == "controller-manager" else []
            self.spawn(name, [str(self.binaries[name]), "--kubeconfig", config, "--authentication-kubeconfig", config,
                              "--authorization-kubeconfig", config, "--bind-address", "127.0.0.1",
                              "--secure-port", str(self.ports[user]), "--leader-elect=false", *extra],
                       ports={"s": self.ports[user]})
        stages = self.state / "kwok-stages.yaml"
        stages.write_text(kwok_stages(KWOK_STAGES + self.stages))
        self.spawn("kwok", [str(self.binaries["kwok"]), "--config", str(stages),
                            "--kubeconfig", str(self.state / "kwok.kubeconfig"), "--manage-all-nodes=false",
                            "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
                            "--node-lease-duration-seconds", "40", "--cidr", "10.0.1.1/24", "--node-ip", "10.0.1.1",
                            "--server-address", f"127.0.0.1:{self.ports['kwok']}"], ports={"s": self.ports["kwok"]})
        self.wait("the default ServiceAccount", lambda: self.kubectl("-n", "default", "get", "serviceaccount",
                                                                     "default", check=False).returncode == 0)

    def stop(self) -> list[str]:
        """End what `start` (and the operators) started, newest first; what is left (should be nothing)."""
        saved = self.state / PROCESSES
        if saved.exists():
            data = json.loads(saved.read_text())
            self.processes, self.ports = data["processes"], data["ports"]
        for name in reversed(list(self.processes)):
            _end(self.processes[name]["pid"])
        for folder in (WEBHOOK_CERT_DIR, WEBHOOK_CERT_DIR.parent):  # the operators' empty mount points
            with contextlib.suppress(OSError):
                folder.rmdir()
        return self.leftovers()

    def leftovers(self) -> list[str]:
        """What would remain: a live pid, a listening port, a mount under the state folder."""
        left = [f"process {name} (pid {info['pid']}) still runs" for name, info in self.processes.items()
                if _alive(info["pid"])]
        for name, info in self.processes.items():
            for port in info.get("ports", []):
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        left.append(f"port 127.0.0.1:{port} of {name} still listens")
        mounts = Path("/proc/self/mounts").read_text() if Path("/proc/self/mounts").exists() else ""
        left += [f"mount {line.split()[1]} left" for line in mounts.splitlines()
                 if str(self.state) in line.split()[1]]
        return left

    def clean(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours (already exited, not reaped) counts as ended.
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ")[-1].startswith("Z"))


def _end(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the process group we started (start_new_session: its group id is its pid), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not _alive(pid):
                return
            time.sleep(0.2)


KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
               "pod/fast/pod-ready.yaml", "pod/fast/pod-delete.yaml")
"""kwok's upstream stage files (sigs.k8s.io/kwok@v0.8.0 kustomize/stage/...): nodes become Ready, pods Running,
deleted pods go. Not `pod-complete`: a Job's pods stay Running, so the run sees them Running on their nodes
(kwok v0.8.0 pkg/kwok/cmd/root.go refuses to start with no stage configured)."""


def kwok_stages(names: tuple[str, ...] = KWOK_STAGES) -> str:
    env = build.go_env()
    folder = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"], cwd=build.GOMOD / "kwok",
                            env=env, capture_output=True, text=True, check=True).stdout.strip()
    return "".join("---\n" + (Path(folder) / "kustomize" / "stage" / stage).read_text() for stage in names)
