"""Apply a stack's `build/plan/<stack>/cluster.yaml` to the test cluster for real, watch what the real controllers
do, and write `build/plan/<stack>/cluster-run.json` with the simulation's check names.

Order (kinds, as Pulumi's dependencies and helm's install order give them): Namespaces and CRDs (then wait for
every CRD to be Established), the kwok Nodes, the rest of the configuration (PriorityClasses, storage, RBAC,
ServiceAccounts, ConfigMaps, Secrets, Services, quotas, LimitRanges, NetworkPolicies), the webhook
configurations, the operators started as processes (each waited for ready), the custom resources that are configuration
(flavors, queues, runtimes), and last the workloads and PodDisruptionBudgets.

Explicit rules for what the harness replaces (`prepare`), each recorded in cluster-run.json's `replaced`:
- a Secret's values are `[secret]` in cluster.yaml: applied with a placeholder value;
- the webhook configurations and CRD conversion webhooks of an operator run as a process: `url:` on loopback
  (tools/cluster_test/operators.py); those of charts and operators that are not run (their server would be a kwok
  pod, which serves nothing): not registered, and the simulator keeps the `admission webhooks` answer for them;
  the stack's own are registered as they are;
- APIServices (aggregated APIs served by a pod): not registered, for the same reason;
- every Deployment/DaemonSet/StatefulSet/Job is applied as it is: its pods are created by the real
  controller-manager, admitted by the real Pod Security/quota/LimitRange/Priority admission, scheduled by the real
  scheduler onto the kwok nodes and made Running by kwok (a process-run operator's own Deployment too: its pods do
  nothing, the process does the work);
- an adopted cluster (`cluster.mode: existing`) gets the site's RuntimeClasses first (verify/simulate/runtime.py
  `site_runtime_classes`, the target's traits, the simulator's same assumption);
- custom resources whose controller is not run (e.g. KEDA's ScaledJob, DLRover's ElasticJob): applied (schema and
  CEL rules are the API server's), no pods expected; their pod checks stay the simulator's (`not_run`);
- a ProvisioningRequest (Kueue's provisioning admission check, `kueue.atomicProvisioning`): the cluster-autoscaler
  is not run (its pod does nothing under kwok) and every group already has its maxSize nodes, so the harness does
  the autoscaler's part and sets `Accepted` and `Provisioned` True on each request Kueue creates (`provisioned`);
  whether the gang fits its group within maxSize stays the simulator's `provisioned` check;
- day two (tools/cluster_test/day_two.py), once day one's checks are read: the training objects are applied again
  with another trainer image digest (`new image`), then with one pod fewer (`pod count`), and what Kueue and the
  operators do to each running job is recorded in `day_two` beside what its kind declares;
- a claim of a dynamically provisioned StorageClass (e.g. Prometheus' `gtp-prometheus`, ebs.csi.aws.com): no CSI
  driver runs here, so the harness does the driver's part and adds a PersistentVolume of the class, pre-bound to
  the claim (size and access modes as asked); whether the class exists and suits the claim stays the simulator's
  `claims bound` check.
"""

from __future__ import annotations

import base64
import copy
import json
import time
import urllib.error
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.image_admission_policy import allowed_images_expression
from components.kueue import PROVISIONING_CONTROLLER, QUEUE_LABEL
from tools.cluster_test import day_two
from tools.cluster_test import nodes as kwok_nodes
from tools.cluster_test.api import Api
from tools.cluster_test.control_plane import ROOT, Cluster
from tools.cluster_test.objects import OPERATOR_KINDS, identity, subject
from tools.cluster_test.operators import (
    WEBHOOK_KINDS,
    JobSet,
    Kueue,
    Trainer,
    TrainingOperator,
    operator_of,
    rewrite_webhooks,
)
from verify.plan_record import COMPUTED, SECRET
from verify.render import ClusterObject, load

PLAN_DIR = ROOT / "build" / "plan"
FIRST = ("Namespace", "CustomResourceDefinition")
CONFIG_CRS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "AdmissionCheck",
              "ClusterTrainingRuntime", "TrainingRuntime", "TriggerAuthentication", "ClusterTriggerAuthentication")
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job", "ReplicaSet", "Pod", "PyTorchJob", "TrainJob",
             "JobSet", "ScaledJob", "ElasticJob")
CORE_CONTROLLED = ("Deployment", "DaemonSet", "StatefulSet", "Job", "ReplicaSet", "Pod")
"""Workloads whose pods the real kube-controller-manager creates."""
PLACEHOLDER = base64.b64encode(b"cluster-test placeholder").decode()
PROVISIONING_API = "autoscaling.x-k8s.io/v1"
PROVISION_SECONDS = 90


def provisioned(request: dict[str, Any]) -> bool:
    return any(c.get("type") == "Provisioned" and c.get("status") == "True"
               for c in (request.get("status") or {}).get("conditions") or [])


def provisioned_status(request: dict[str, Any]) -> dict[str, Any]:
    """The status the cluster-autoscaler writes on a request it booked capacity for (conditions Accepted and
    Provisioned, cluster-autoscaler FAQ.md:659-661 at cluster-autoscaler-1.34.1; metav1.Condition fields, all
    required by the vendored CRD)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    generation = int((request.get("metadata") or {}).get("generation") or 1)
    return {"status": {"conditions": [
        {"type": kind, "status": "True", "reason": reason, "message": "cluster-test harness stands in for the "
         "cluster-autoscaler: the group already has its maxSize nodes", "lastTransitionTime": now,
         "observedGeneration": generation}
        for kind, reason in (("Accepted", "Accepted"), ("Provisioned", "Provisioned"))]}}
SETTLE_SECONDS = 90.0


def _served_by(item: ClusterObject, operators: list) -> Any:
    """The process that serves this webhook configuration / CRD conversion: the one whose Service it names."""
    obj = item.obj
    configs = [hook.get("clientConfig") or {} for hook in obj.get("webhooks") or []]
    conversion = ((obj.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
    configs.append(conversion.get("clientConfig") or {})
    services = {((c.get("service") or {}).get("namespace"), (c.get("service") or {}).get("name")) for c in configs}
    return next((op for op in operators if (op.namespace, op.service) in services), None)


def prepare(objects: list[ClusterObject], operators: list, ca: bytes
            ) -> tuple[list[tuple[ClusterObject, dict[str, Any]]], dict[str, str]]:
    """The objects to apply (as applied) and, for every object not applied as it is, the rule (subject → rule).
    `operators`: those run as processes (`namespace`, `service`: the webhook Service they stand for; `host`,
    `port`: where they serve)."""
    applied, replaced = [], {}
    for item in objects:
        obj, operator = item.obj, operator_of(item)
        served = _served_by(item, operators)
        if item.kind == "APIService":
            replaced[identity(item)] = "not registered: an aggregated API served by a pod, which kwok does not run"
            continue
        conversion = ((obj.get("spec") or {}).get("conversion") or {}).get("strategy")
        if item.kind in WEBHOOK_KINDS or (item.kind == "CustomResourceDefinition" and conversion == "Webhook"):
            if served is not None:
                obj = rewrite_webhooks(obj, served.port, ca, served.host)
                replaced[identity(item)] = (f"webhooks served by the {served.name} process at "
                                            f"{served.host}:{served.port}")
            elif item.kind in WEBHOOK_KINDS and (operator is not None or item.source.startswith("chart ")):
                replaced[identity(item)] = ("not registered: its server would be a kwok pod (serves nothing); "
                                            "the simulation keeps this answer")
                continue
        if item.kind == "ValidatingAdmissionPolicy" and any(
                variable.get("expression") == COMPUTED for variable in (obj.get("spec") or {}).get("variables") or []):
            # The production image policy's allowed list holds the stack's build, known only at apply: the training
            # pods' images are the plan's marker here, and day two's is NEW_IMAGE (components/image_admission_policy).
            obj = copy.deepcopy(obj)
            for variable in obj["spec"]["variables"]:
                if variable.get("expression") == COMPUTED:
                    variable["expression"] = allowed_images_expression([COMPUTED, day_two.NEW_IMAGE])
            replaced[identity(item)] = (f"its {COMPUTED} CEL list is the plan's image marker and day two's image "
                                        "(the stack's build is known only at apply)")
        if item.kind == "Secret":
            obj = dict(obj)
            for field in ("data", "stringData"):
                if isinstance(obj.get(field), dict):
                    obj[field] = {k: (PLACEHOLDER if field == "data" else "placeholder") if v == SECRET else v
                                  for k, v in obj[field].items()}
        applied.append((item, obj))
    for claim, volume in provisioned_volumes(objects):
        replaced[identity(claim)] = (f"bound to PersistentVolume {volume.name}, made as its class's provisioner "
                                     "would (no CSI driver runs here)")
        applied.append((volume, volume.obj))
    return applied, replaced


def provisioned_volumes(objects: list[ClusterObject]) -> list[tuple[ClusterObject, ClusterObject]]:
    """(claim, volume) for every claim without a volume whose StorageClass (in `objects`) provisions dynamically."""
    classes = {item.name: item.obj for item in objects if item.kind == "StorageClass"}
    found = []
    for item in objects:
        spec = item.obj.get("spec") or {}
        storage_class = classes.get(spec.get("storageClassName") or "")
        if item.kind != "PersistentVolumeClaim" or spec.get("volumeName") or storage_class is None:
            continue
        name = f"cluster-test-{item.namespace}-{item.name}"
        volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                  "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})["storage"]},
                           "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                           "storageClassName": spec["storageClassName"],
                           "persistentVolumeReclaimPolicy": "Delete",
                           "claimRef": {"namespace": item.namespace, "name": item.name},
                           "csi": {"driver": storage_class.get("provisioner"), "volumeHandle": name}}}
        found.append((item, ClusterObject(source="cluster-test harness (the CSI driver's part)", obj=volume)))
    return found


def phase(item: ClusterObject) -> int:
    if item.kind in FIRST:
        return 0
    if item.kind in WORKLOADS or item.kind == "PodDisruptionBudget":
        return 4
    if item.kind in WEBHOOK_KINDS:
        return 2
    if item.kind in CONFIG_CRS or ("." in str(item.obj.get("apiVersion", "")).split("/")[0] and item.kind not in (
            "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PriorityClass", "StorageClass",
            "NetworkPolicy", "PodDisruptionBudget", "RuntimeClass")):
        return 3
    return 1


class Run:
    """One stack's real run."""

    def __init__(self, stack: str, cluster: Cluster, groups: list, objects: list[ClusterObject],
                 log=print, site_runtime_classes: dict[str, str] | None = None):
        self.stack, self.cluster, self.groups, self.objects, self.log = stack, cluster, groups, objects, log
        self.site_runtime_classes = dict(site_runtime_classes or {})
        self.api = Api(cluster)
        self.refused: dict[str, str] = {}
        self.accepted: list[str] = []
        self.operators: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    def apply_all(self, items: list[tuple[ClusterObject, dict[str, Any]]]) -> None:
        for item, obj in items:
            message = self.api.apply(obj)
            if message is None:
                self.accepted.append(identity(item))
            else:
                self.refused[identity(item)] = message

    def execute(self) -> dict[str, Any]:
        started = time.monotonic()
        self.api.discover()
        operators = [op for op in (Kueue(self.cluster, self.objects), TrainingOperator(self.cluster, self.objects),
                                   JobSet(self.cluster, self.objects), Trainer(self.cluster, self.objects))
                     if op.present()]
        items, replaced = prepare(self.objects, operators, (self.cluster.pki / "ca.crt").read_bytes())
        by_phase: dict[int, list] = defaultdict(list)
        for item, obj in items:
            by_phase[phase(item)].append((item, obj))
        self.apply_all(by_phase[0])
        self.cluster.wait("every CRD Established", self._established, timeout=60)
        self.api.discover()
        for node in kwok_nodes.node_objects(self.groups):
            message = self.api.apply(node)
            if message:
                raise RuntimeError(f"kwok Node {node['metadata']['name']} refused: {message}")
        self.cluster.kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=60s")
        self.timings["nodes ready"] = time.monotonic() - started
        for name, handler in sorted(self.site_runtime_classes.items()):
            # An adopted cluster's own RuntimeClasses (the site installs them; the simulator assumes the same ones).
            message = self.api.apply({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                      "metadata": {"name": name}, "handler": handler})
            if message:
                raise RuntimeError(f"the site's RuntimeClass {name} refused: {message}")
        self.apply_all(by_phase[1])
        # Webhook configurations first (training-operator's cert rotator injects its CA into its configuration and
        # is not ready before it exists); nothing is applied until every operator is ready.
        self.apply_all(by_phase[2])
        for op in operators:
            self.timings[f"{op.name} ready"] = op.start()
            self.operators[op.name] = op.port
        self.apply_all(by_phase[3])
        self.apply_all(by_phase[4])
        self.timings["applied"] = time.monotonic() - started
        if self.provisioning:
            self.provision_requests()
            self.timings["provisioned"] = time.monotonic() - started
            replaced["ProvisioningRequest (each one Kueue creates)"] = (
                "Accepted and Provisioned set by the harness, as the cluster-autoscaler would (it is not run; every "
                "group has its maxSize nodes)")
        self.settle()
        self.timings["settled"] = time.monotonic() - started
        report = self.report(replaced)
        # Day two, after day one's checks were read: a new trainer image, then a new size, on the running jobs
        # (day_two.py).
        report["day_two"] = day_two.run_all(self)
        # A production stack's image policy, asked about a pod of an unlisted image (day_two.image_policy).
        report["image_policy"] = day_two.image_policy(self)
        report["timings_s"]["day two"] = round(time.monotonic() - started, 1)
        return report

    @property
    def provisioning(self) -> bool:
        """The stack has an AdmissionCheck of Kueue's provisioning controller."""
        return any(item.kind == "AdmissionCheck" and (item.obj.get("spec") or {}).get("controllerName")
                   == PROVISIONING_CONTROLLER for item in self.objects)

    def provision_requests(self) -> None:
        """Play the cluster-autoscaler's part for ProvisioningRequests (module docstring) until every queued
        Kueue Workload is admitted or PROVISION_SECONDS passed (the `admitted`/`queued` checks then report it)."""
        deadline = time.monotonic() + PROVISION_SECONDS
        while time.monotonic() < deadline:
            for request in self.api.items(PROVISIONING_API, "ProvisioningRequest"):
                if not provisioned(request):
                    meta = request["metadata"]
                    path = self.api.path(PROVISIONING_API, "ProvisioningRequest", meta.get("namespace"), meta["name"])
                    try:
                        self.api.request("PATCH", f"{path}/status", provisioned_status(request),
                                         content_type="application/merge-patch+json")
                    except urllib.error.HTTPError as error:
                        self.log(f"ProvisioningRequest {meta['name']}: status refused (HTTP {error.code})")
            workloads = self.api.items("kueue.x-k8s.io/v1beta2", "Workload")
            if workloads and all(any(c.get("type") == "Admitted" and c.get("status") == "True"
                                     for c in (w.get("status") or {}).get("conditions") or []) for w in workloads):
                return
            time.sleep(2)

    def _established(self) -> bool:
        return all(any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in (crd.get("status") or {}).get("conditions") or [])
                   for crd in self.api.items("apiextensions.k8s.io/v1", "CustomResourceDefinition"))

    # --- watching ----------------------------------------------------------------------------------------------
    def pods(self) -> list[dict[str, Any]]:
        return self.api.items("v1", "Pod")

    def settle(self) -> None:
        """Wait until every pod is Running (or nothing changes for a while, up to SETTLE_SECONDS)."""
        deadline, last, quiet = time.monotonic() + SETTLE_SECONDS, None, 0
        while time.monotonic() < deadline:
            state = sorted((p["metadata"]["name"], p["status"].get("phase")) for p in self.pods())
            if state and all(phase == "Running" for _, phase in state) and state == last:
                return
            quiet = quiet + 1 if state == last else 0
            if quiet >= 8:
                return
            last = state
            time.sleep(2)

    def owners(self) -> dict[str, dict[str, Any]]:
        """uid → object, for everything that can own a pod."""
        found = {}
        for api_version, kind in (("apps/v1", "ReplicaSet"), ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"),
                                  ("apps/v1", "StatefulSet"), ("batch/v1", "Job"),
                                  ("kubeflow.org/v1", "PyTorchJob"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
                                  ("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("keda.sh/v1alpha1", "ScaledJob")):
            for obj in self.api.items(api_version, kind):
                obj.setdefault("kind", kind)
                found[obj["metadata"]["uid"]] = obj
        return found

    def top_owner(self, obj: dict[str, Any], owners: dict[str, dict[str, Any]]) -> str:
        """The cluster.yaml object a pod (or anything) comes from: `Kind namespace/name`."""
        while True:
            parent = next((owners[ref["uid"]] for ref in obj["metadata"].get("ownerReferences") or []
                           if ref["uid"] in owners), None)
            if parent is None:
                break
            obj = parent
        metadata = obj["metadata"]
        name = metadata["name"]
        if metadata.get("generateName") and not self._named(obj.get("kind", ""), metadata.get("namespace"), name):
            name = "<auto-named>"
        return subject(obj.get("kind", "Pod"), metadata.get("namespace"), name)

    def _named(self, kind: str, namespace: str | None, name: str) -> bool:
        return any(item.kind == kind and item.namespace == namespace and item.name == name for item in self.objects)

    def events(self) -> list[dict[str, Any]]:
        return self.api.items("v1", "Event")

    def report(self, replaced: dict[str, str]) -> dict[str, Any]:
        owners = self.owners()
        pods = self.pods()
        node_group = {n["metadata"]["name"]: kwok_nodes.group_of(n) for n in self.api.items("v1", "Node")}
        by_owner: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pod in pods:
            by_owner[self.top_owner(pod, owners)].append(pod)
        uid_subject = {uid: self.top_owner(obj, owners) for uid, obj in owners.items()}
        failed_create: dict[str, list[str]] = defaultdict(list)
        unschedulable: dict[str, list[str]] = defaultdict(list)
        for event in self.events():
            involved = event.get("involvedObject") or {}
            if event.get("reason") == "FailedCreate":
                failed_create[uid_subject.get(involved.get("uid"), subject(
                    involved.get("kind", ""), involved.get("namespace"), involved.get("name", "")))].append(
                    event.get("message", ""))
            if event.get("reason") == "FailedScheduling":
                pod_owner = next((s for s, ps in by_owner.items()
                                  if any(p["metadata"]["uid"] == involved.get("uid") for p in ps)), None)
                if pod_owner:
                    unschedulable[pod_owner].append(event.get("message", ""))
        workloads = [item for item in self.objects if item.kind in WORKLOADS]
        not_run = sorted(identity(item) for item in workloads
                         if item.kind in OPERATOR_KINDS and OPERATOR_KINDS[item.kind] not in self.operators)
        expected = [identity(item) for item in workloads
                    if (item.kind in CORE_CONTROLLED or OPERATOR_KINDS.get(item.kind) in self.operators)
                    and identity(item) not in self.refused]
        checks: dict[str, dict[str, Any]] = {}

        def check(name: str) -> dict[str, Any]:
            return checks.setdefault(name, {"passed": 0, "total": 0, "findings": [], "details": [], "objects": {}})

        def record(name: str, who: str, ok: bool, detail: str, rule: str = "", fix: str = "") -> None:
            entry = check(name)
            entry["total"] += 1
            entry["passed"] += ok
            entry["objects"][who] = detail
            entry["details"].append(f"{who}: {detail}")
            if not ok:
                entry["findings"].append({"subject": who, "rule": rule or detail, "fix": fix or "see the rule"})

        for who in sorted(self.accepted):
            record("admission webhooks", who, True, "accepted")
        for who, message in sorted(self.refused.items()):
            record("admission webhooks", who, False, "refused", rule=f"refused by the API server: {message}",
                   fix="make the object valid for the API server, its CRD schema/CEL rules and webhooks")
        idle_daemons = {subject("DaemonSet", d["metadata"]["namespace"], d["metadata"]["name"])
                        for d in self.api.items("apps/v1", "DaemonSet")
                        if not (d.get("status") or {}).get("desiredNumberScheduled")}
        for who in expected:
            created = by_owner.get(who, [])
            if who in idle_daemons and not created and not failed_create.get(who):
                record("admitted", who, True, "no pod: no node selects it")
                record("scheduled", who, True, "runs on no node group")
                continue
            refusals = failed_create.get(who, [])
            priority = [m for m in refusals if "PriorityClass" in m]
            other = [m for m in refusals if "PriorityClass" not in m]
            if priority:
                record("priority classes", who, False, "pods refused", rule=priority[0],
                       fix="create the PriorityClass or name an existing one")
            elif created:
                names = {p["spec"].get("priorityClassName") for p in created} - {None}
                record("priority classes", who, True, ", ".join(sorted(names)) or "none named")
            if other or not created:
                suspended = self._suspended(who)
                if suspended and not other:
                    record("admitted", who, False, "never created", rule="its job stays suspended (not admitted "
                           "by Kueue)", fix="see the queued check")
                else:
                    record("admitted", who, False, "pods refused", rule=(other or ["no pod was created"])[0],
                           fix="make the pod template fit its namespace's Pod Security level, quota and LimitRange")
            else:
                record("admitted", who, True, f"{len(created)} pod(s) created")
            if created:
                groups = sorted({node_group.get(p["spec"].get("nodeName") or "", "") for p in created} - {""})
                waiting = [p for p in created if p["status"].get("phase") != "Running"]
                if waiting:
                    message = (unschedulable.get(who) or [f"{len(waiting)} pod(s) {waiting[0]['status'].get('phase')}"])
                    record("scheduled", who, False, "not running", rule=message[-1],
                           fix="make the pod fit a node group (labels, taints, allocatable)")
                else:
                    record("scheduled", who, True, "runs on " + ", ".join(groups))
        self._queued(record, owners)
        for pdb in self.api.items("policy/v1", "PodDisruptionBudget"):
            who = subject("PodDisruptionBudget", pdb["metadata"]["namespace"], pdb["metadata"]["name"])
            status = pdb.get("status") or {}
            allowed = int(status.get("disruptionsAllowed") or 0)
            evicted = self._evict_one(pdb, pods)
            detail = (f"{allowed} disruption(s) allowed with {status.get('currentHealthy', 0)} healthy pod(s); "
                      f"eviction of one (dry run): {evicted}")
            record("drains", who, allowed >= 1 and evicted.startswith("allowed"), detail,
                   rule=f"a node drain is blocked: {detail}",
                   fix="allow at least one disruption (maxUnavailable, or minAvailable below the replicas)")
        for entry in checks.values():
            entry["details"] = sorted(entry["details"])
        return {"stack": self.stack, "kubernetes": "v1.34.12 (kube-apiserver, controller-manager, scheduler) + kwok",
                "operators": sorted(self.operators), "not_run": not_run, "replaced": dict(sorted(replaced.items())),
                "timings_s": {k: round(v, 1) for k, v in self.timings.items()},
                "checks": dict(sorted(checks.items())),
                "ok": all(not c["findings"] for c in checks.values())}

    def _evict_one(self, pdb: dict[str, Any], pods: list[dict[str, Any]]) -> str:
        """What the Eviction API (what `kubectl drain` calls) answers for one of the budget's pods, as a dry run."""
        namespace = pdb["metadata"]["namespace"]
        wanted = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        mine = [p for p in pods if p["metadata"]["namespace"] == namespace and p["status"].get("phase") == "Running"
                and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]
        if not mine:
            return "no running pod selected"
        name = mine[0]["metadata"]["name"]
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"dryRun": ["All"]}}
        try:
            self.api.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)
        except urllib.error.HTTPError as error:
            return f"refused (HTTP {error.code}): {json.loads(error.read() or b'{}').get('message', '')}"
        return f"allowed (pod {name})"

    def _suspended(self, who: str) -> bool:
        kind, _, rest = who.partition(" ")
        namespace, _, name = rest.partition("/")
        if kind != "Job":
            return False
        done = self.cluster.kubectl("-n", namespace, "get", "job", name, "-o", "jsonpath={.spec.suspend}",
                                    check=False)
        return done.stdout.strip() == "true"

    def _queued(self, record, owners: dict[str, dict[str, Any]]) -> None:
        workloads = self.api.items("kueue.x-k8s.io/v1beta2", "Workload")
        queued = [item for item in self.objects if item.kind in WORKLOADS
                  and QUEUE_LABEL in ((item.obj.get("metadata") or {}).get("labels") or {})]
        for item in queued:
            who = identity(item)
            if item.kind in OPERATOR_KINDS and OPERATOR_KINDS[item.kind] not in self.operators:
                continue
            mine = [w for w in workloads if self.top_owner(w, owners) == who]
            admitted = [w for w in mine if (w.get("status") or {}).get("admission")]
            if admitted:
                flavors = sorted({flavor for w in admitted
                                  for podset in w["status"]["admission"].get("podSetAssignments") or []
                                  for flavor in (podset.get("flavors") or {}).values()})
                queue = admitted[0]["status"]["admission"].get("clusterQueue")
                record("queued", who, True, f"admitted by Kueue into flavor {', '.join(flavors)} of {queue}")
            else:
                # Kueue's reason is on QuotaReserved (then Admitted); PodsReady (waitForPodsReady) says nothing of it.
                rank = {"QuotaReserved": 0, "Admitted": 1}
                found = sorted((rank.get(c.get("type"), 2), c.get("message", "")) for w in mine
                                for c in (w.get("status") or {}).get("conditions") or []
                                if c.get("status") == "False" and c.get("type") != "PodsReady")
                conditions = [message for _, message in found]
                record("queued", who, False, "not admitted",
                       rule=(conditions or ["no Workload was admitted" if mine else "Kueue made no Workload"])[0],
                       fix="fit the job into its ClusterQueue's quota and a flavor whose labels a node group has")


def site(stack: str, objects: list[ClusterObject], stack_file: Path | None = None) -> tuple[list, dict[str, str]]:
    """What the stack's cluster has before the stack deploys anything: its node groups as the simulator derives them
    (the kwok nodes' one source), from its offline plan (planned in-process) and its cluster objects, and the
    RuntimeClasses an adopted cluster's site already has."""
    from verify.plan import run as plan_run
    from verify.simulate import nodes as sim_nodes
    from verify.simulate import queue, runtime
    from verify.simulate.pods import expand_pods

    plan = plan_run(stack, stack_file=stack_file)
    pods = expand_pods(objects, plan)
    expanded = [*queue.admitted_pods(objects, pods), *sim_nodes.addon_pods(plan)]
    mode = sim_nodes._mode(plan)
    classes = runtime.runtime_classes(objects, mode)
    groups = sim_nodes.node_groups(plan, objects, expanded, classes)
    return groups, runtime.site_runtime_classes(mode)


def run_stack(stack: str, cluster: Cluster, log=print,
              plant: Callable[[list[ClusterObject]], list[ClusterObject]] | None = None) -> dict[str, Any]:
    """Plan the stack in-process (for its node groups), apply its cluster.yaml, return cluster-run.json's content.
    `plant`: changes the objects before the apply (the planted-defect tests)."""
    directory = PLAN_DIR / stack
    objects = load((directory / "cluster.yaml").read_text())
    groups, runtime_classes = site(stack, objects)
    if plant is not None:
        objects = plant(objects)
    report = Run(stack, cluster, groups, objects, log, site_runtime_classes=runtime_classes).execute()
    report["site_runtime_classes"] = runtime_classes
    report["nodes"] = {g.name: kwok_nodes.node_count(g) for g in groups}
    return report


def write(report: dict[str, Any], stack: str) -> Path:
    path = PLAN_DIR / stack / "cluster-run.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
