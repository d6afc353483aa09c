"""The pinned operators as host processes against the test cluster, with the stack's own configuration.

Kueue (sigs.k8s.io/kueue v0.19.2): the manager binary with the Configuration from the stack's
`kueue-manager-config` ConfigMap (the same integrations, queueing strategy, namespace selector...), changed only
where a host process must differ from the in-cluster Deployment:
- health, metrics and webhook servers on 127.0.0.1 ports; the webhook's serving cert is ours (IP SAN 127.0.0.1);
- `internalCertManagement.enable: false` (its cert rotator writes a cert for the Service's DNS name, which does not
  resolve here); the webhook configurations and CRD conversion webhooks are registered with `url:
  https://127.0.0.1:<port><path>` + our CA instead of `service:` (kwok's pod IPs are not routable) — same rules,
  paths, failure policies and selectors;
- `leaderElection.leaderElect: false` (one process);
- the feature gate VisibilityOnDemand=false: its aggregated API serves from the fixed cert dir /visibility
  (sigs.k8s.io/kueue@v0.19.2 pkg/visibility/server.go:68 and :112-115) and its APIServices are not registered here;
- with internal cert management off, the metrics server reads its cert from the fixed path
  /etc/kueue/metrics/certs (sigs.k8s.io/kueue@v0.19.2 cmd/kueue/main.go:217): the process runs in a private mount
  namespace (`unshare -m`) with an overlay on /etc holding that cert; the host's /etc is not touched.
It authenticates as cluster admin (not the manifest's ServiceAccount: RBAC of the operator is not what this tests).
"""

from __future__ import annotations

import base64
import copy
import shutil
from pathlib import Path
from typing import Any

import yaml

from tools.cluster_test import build
from tools.cluster_test.control_plane import WEBHOOK_CERT_DIR, Cluster, free_port
from verify.render import ClusterObject

KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def operator_of(item: ClusterObject) -> str | None:
    """`kueue`, `training-operator`, `kubeflow-trainer`, ... for an object of a vendored operator manifest."""
    if not item.source.startswith("operator "):
        return None
    name = Path(item.source.split(" ", 1)[1]).name
    for known in ("kueue", "training-operator", "kubeflow-trainer", "dlrover"):
        if name.startswith(known):
            return known
    return name


def kueue_objects(objects: list[ClusterObject]) -> list[ClusterObject]:
    return [item for item in objects if operator_of(item) == "kueue"]


def loopback(client_config: dict[str, Any], port: int, ca: bytes, host: str = "127.0.0.1") -> None:
    """A webhook clientConfig's `service:` → `url: https://<host>:<port><path>` with our CA (`host`: 127.0.0.1, or
    the Service's DNS name where the operator certifies only that; the apiserver resolves it to 127.0.0.1)."""
    service = client_config.pop("service", None) or {}
    client_config["url"] = f"https://{host}:{port}{service.get('path', '/')}"
    client_config["caBundle"] = base64.b64encode(ca).decode()


def rewrite_webhooks(obj: dict[str, Any], port: int, ca: bytes, host: str = "127.0.0.1") -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    if obj.get("kind") in WEBHOOK_KINDS:
        for hook in obj.get("webhooks") or []:
            loopback(hook["clientConfig"], port, ca, host)
    if obj.get("kind") == "CustomResourceDefinition":
        conversion = (obj.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            loopback(conversion["webhook"]["clientConfig"], port, ca, host)
    return obj


class Kueue:
    """Kueue's manager as a process; `port` is where its webhooks listen."""

    name = "kueue"
    host = "127.0.0.1"
    service = "kueue-webhook-service"

    def __init__(self, cluster: Cluster, objects: list[ClusterObject]):
        self.cluster = cluster
        self.objects = kueue_objects(objects)
        deployment = next((item for item in self.objects if item.kind == "Deployment"), None)
        self.namespace = deployment.namespace if deployment else "kueue-system"
        self.port = free_port()
        self.health = free_port()
        self.metrics = free_port()

    def present(self) -> bool:
        return any(item.kind == "ConfigMap" and item.name == KUEUE_CONFIG_MAP for item in self.objects)

    def config(self) -> dict[str, Any]:
        stored = next(item for item in self.objects if item.kind == "ConfigMap" and item.name == KUEUE_CONFIG_MAP)
        config = yaml.safe_load(stored.obj["data"][KUEUE_CONFIG_KEY])
        config["health"] = {**(config.get("health") or {}), "healthProbeBindAddress": f"127.0.0.1:{self.health}"}
        config["metrics"] = {**(config.get("metrics") or {}), "bindAddress": f"127.0.0.1:{self.metrics}"}
        config["webhook"] = {**(config.get("webhook") or {}), "port": self.port, "host": "127.0.0.1",
                             "certDir": str(self.certs)}
        config["leaderElection"] = {**(config.get("leaderElection") or {}), "leaderElect": False}
        config["internalCertManagement"] = {"enable": False}
        return config

    @property
    def home(self) -> Path:
        return self.cluster.state / "kueue"

    @property
    def certs(self) -> Path:
        return self.home / "certs"

    def start(self) -> float:
        binary = build.located(["kueue"])["kueue"]
        pki = self.cluster.pki
        for folder in (self.certs, self.home / "etc-upper" / "kueue" / "metrics" / "certs"):
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(pki / "webhook.crt", folder / "tls.crt")
            shutil.copy(pki / "webhook.key", folder / "tls.key")
        (self.home / "etc-work").mkdir(exist_ok=True)
        config = self.home / "config.yaml"
        config.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={self.home}/etc-upper,"
                  f"workdir={self.home}/etc-work /etc && exec {binary} --config {config} "
                  "--feature-gates=VisibilityOnDemand=false")
        self.cluster.spawn("kueue", ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           env={"KUBECONFIG": str(self.cluster.admin)},
                           ports={"w": self.port, "h": self.health, "m": self.metrics})
        import urllib.request
        return self.cluster.wait("Kueue /readyz", lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{self.health}/readyz", timeout=2).status == 200)


class RotatedOperator:
    """An operator whose own cert rotator (github.com/open-policy-agent/cert-controller) makes its webhook cert,
    run as a process: training-operator v1.9.4, JobSet v0.12.0, Kubeflow Trainer v2.3.0.

    Each rotator certifies `<webhook Service>.<namespace>.svc` (training-operator pkg/cert/cert.go:49 at v1.9.4,
    JobSet pkg/util/cert/cert.go:55 at v0.12.0, Trainer pkg/util/cert/cert.go:70 at v2.3.0), stores the cert in its
    Secret, injects its CA into its webhook configurations, and then waits for the files in the fixed dir
    /tmp/k8s-webhook-server/serving-certs (cert-controller v0.16.0 pkg/rotator/rotator.go:877
    `ensureCertsMounted`), which a pod gets from the kubelet's secret volume. So the process runs in a private mount
    namespace (`unshare -m`) with that dir bind-mounted from the state folder, where the harness
    writes the Secret's files as the kubelet would; JobSet and Trainer read their namespace from
    /var/run/secrets/kubernetes.io/serviceaccount/namespace (a tmpfs on /run there holds it), training-operator from
    $MY_POD_NAMESPACE. The webhooks are registered with `url: https://<svc>.<ns>.svc:<port>/...`, a name the
    apiserver resolves to 127.0.0.1 in its private /etc/hosts. Flags and config are the vendored Deployment's and
    ConfigMap's, except addresses on 127.0.0.1 ports, one replica without leader election."""

    name = ""
    binary = ""
    service = ""
    secret = ""
    config_map: str | None = None

    def __init__(self, cluster: Cluster, objects: list[ClusterObject]):
        self.cluster = cluster
        self.objects = [item for item in objects if operator_of(item) == self.operator]
        self.deployment = next((item for item in self.objects if item.kind == "Deployment" and
                                item.name.startswith(self.name)), None)
        self.namespace = self.deployment.namespace if self.deployment else ""
        self.port, self.health, self.metrics, self.extra = free_port(), free_port(), free_port(), free_port()

    operator = ""
    """operator_of() of its manifest's objects."""

    @property
    def host(self) -> str:
        return f"{self.service}.{self.namespace}.svc"

    def present(self) -> bool:
        return self.deployment is not None

    def arguments(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> float:
        binary = build.located([self.binary])[self.binary]
        self.cluster.add_host(self.host)
        home = self.cluster.state / self.name
        certs = home / "serving-certs"
        certs.mkdir(parents=True, exist_ok=True)
        mounted = WEBHOOK_CERT_DIR
        account = "/run/secrets/kubernetes.io/serviceaccount"
        # No tmpfs over /tmp: the clone (and so this state folder, the kubeconfig and the config file) may live
        # under /tmp. The mount point is made on the host (empty; removed by `Cluster.stop`), the bind is private.
        mounted.mkdir(parents=True, exist_ok=True)
        script = (f"mount --bind {certs} {mounted} "
                  f"&& mount -t tmpfs -o size=1m tmpfs /run && mkdir -p {account} && "
                  f"echo {self.namespace} > {account}/namespace && exec \"$0\" \"$@\"")
        self.cluster.spawn(self.name, ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(binary),
                                       *self.arguments()],
                           env={"KUBECONFIG": str(self.cluster.admin), "MY_POD_NAMESPACE": self.namespace},
                           ports={"w": self.port, "h": self.health, "m": self.metrics})
        # The kubelet's part: the rotator's Secret as files in its cert dir.
        self.cluster.wait(f"{self.name}'s webhook cert Secret", lambda: self._mount_secret(certs))
        import urllib.request
        return self.cluster.wait(f"{self.name} /readyz", lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{self.health}/readyz", timeout=2).status == 200)

    def _mount_secret(self, folder: Path) -> bool:
        secret = self.cluster.get("-n", self.namespace, "secret", self.secret)
        data = secret.get("data") or {}
        if "tls.crt" not in data or "tls.key" not in data:
            return False
        for key, value in data.items():
            (folder / key).write_bytes(base64.b64decode(value))
        return True

    def stack_config(self) -> dict[str, Any]:
        stored = next(item for item in self.objects if item.kind == "ConfigMap" and item.name == self.config_map)
        return yaml.safe_load(stored.obj["data"][KUEUE_CONFIG_KEY])

    def loopback_config(self) -> dict[str, Any]:
        """The stack's controller-runtime Configuration with its servers on this run's loopback ports and leader
        election off (one process)."""
        config = self.stack_config()
        config["leaderElection"] = {**(config.get("leaderElection") or {}), "leaderElect": False}
        config["health"] = {**(config.get("health") or {}), "healthProbeBindAddress": f"127.0.0.1:{self.health}"}
        config["metrics"] = {**(config.get("metrics") or {}), "bindAddress": f"127.0.0.1:{self.metrics}"}
        config["webhook"] = {**(config.get("webhook") or {}), "port": self.port, "host": "127.0.0.1"}
        return config

    def write_config(self, config: dict[str, Any]) -> Path:
        path = self.cluster.state / self.name / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path


class TrainingOperator(RotatedOperator):
    """The vendored Deployment passes no args: its flag defaults (webhook Service `training-operator`, Secret
    `training-operator-webhook-cert`), with 127.0.0.1 health/metrics addresses. Its webhook server has no host flag
    (controller-runtime `webhook.Options{Port}` only, cmd/training-operator.v1/main.go at v1.9.4): it listens on
    every interface, on a random port, for the run's duration."""

    name = binary = operator = "training-operator"
    service = "training-operator"
    secret = "training-operator-webhook-cert"

    def arguments(self) -> list[str]:
        return ["--webhook-server-port", str(self.port), "--health-probe-bind-address", f"127.0.0.1:{self.health}",
                "--metrics-bind-address", f"127.0.0.1:{self.metrics}", "--leader-elect=false"]


class JobSet(RotatedOperator):
    """JobSet v0.12.0 with the stack's `jobset-manager-config` Configuration (its Deployment's `--config`)."""

    name = binary = "jobset"
    operator = "kubeflow-trainer"
    service = "jobset-webhook-service"
    secret = "jobset-webhook-server-cert"
    config_map = "jobset-manager-config"

    def arguments(self) -> list[str]:
        config = self.loopback_config()
        return [f"--config={self.write_config(config)}", "--zap-log-level=2"]


class Trainer(RotatedOperator):
    """Kubeflow Trainer v2.3.0 with the stack's `kubeflow-trainer-config` Configuration."""

    name = "kubeflow-trainer"
    binary = "trainer-controller-manager"
    operator = "kubeflow-trainer"
    service = "kubeflow-trainer-controller-manager"
    secret = "kubeflow-trainer-webhook-cert"
    config_map = "kubeflow-trainer-config"

    def arguments(self) -> list[str]:
        config = self.loopback_config()
        if "statusServer" in config:
            config["statusServer"] = {**config["statusServer"], "port": self.extra}
        return [f"--config={self.write_config(config)}", "--zap-log-level=2"]
