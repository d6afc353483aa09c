"""TrainingOperators: the controllers the stack's workloads need, from their vendored copies at pinned versions.

- Kubeflow training-operator v1 (PyTorchJob), the kustomize render of overlay `standalone` (namespace `kubeflow`);
- DLRover's ElasticJob controller, the kustomize render of `manifests/bases` with the newer CRD of the same tag
  (namespace `dlrover`; vendor/SOURCES.md);
- Kubeflow Trainer v2 with its bundled JobSet controller (TrainJob), the kustomize render of overlay `manager`
  (namespace `kubeflow-system`);
- KEDA, Helm chart (namespace `keda`).

Only the operators a stack's workloads use are installed. Resource names contain `training-operator`,
`dlrover` and `keda`: the policy pack finds each custom resource's operator by that marker, and every custom
resource depends on its operator so that destroy deletes it while its controller can still remove finalizers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from catalog import versions
from catalog.images import ARM64_VARIANTS, OPERATOR_IMAGES, operator_images
from components.helm import pinned_release
from conventions import iam
from conventions.images import normalized
from conventions.kubernetes import restricted_pod
from conventions.names import PLATFORM_PRIORITY_CLASS, SYSTEM_ROLE_LABEL

KEDA_NAMESPACE = "keda"
KEDA_OPERATOR_SERVICE_ACCOUNT = "keda-operator"
"""The chart's default operator service account (values `serviceAccount.operator.name`)."""


KEDA_UID = 65532


KEDA_OPERATOR_APP = "keda-operator"
"""The operator pods' `app` label (chart 2.20.2 templates/manager/deployment.yaml: `app: {{ .Values.operator.name }}`,
default `keda-operator`)."""


def keda_values(priority_class: str | None = None, highly_available: bool = False) -> dict[str, Any]:
    """KEDA chart values: the operator on system nodes, restricted security context (the chart's defaults
    already drop ALL and run as non-root; they are stated here so a chart bump can't loosen them).

    `priority_class`: chart 2.20.2 top-level `priorityClassName` (all three Deployments, templates/*/deployment.yaml).
    `highly_available` (clusters with a system node group that rolls with a surge node, i.e. EKS): the operator runs
    two replicas — it elects a leader (the chart passes `--leader-elect`; values.yaml `operator.replicaCount`: "only
    one operator instance will be the leader", the other takes over on failover) — spread over nodes when there is
    room, with the chart's own `podDisruptionBudget.operator` at maxUnavailable 1: a drain moves one at a time and
    ScaledObjects/ScaledJobs keep being reconciled. The metrics API server and the admission webhooks stay at one
    replica without a budget (the chart: for the metrics server "only one instance will used", so a second adds
    nothing; a budget on one replica would block every drain). Without a system group (edge) nothing changes:
    two replicas on a single-node site with a budget would make its drain wait forever."""
    values: dict[str, Any] = {
        "nodeSelector": {SYSTEM_ROLE_LABEL: "system"},
        # The uid/gid each KEDA image already runs as: kedacore/keda v2.20.2 Dockerfile, Dockerfile.adapter and
        # Dockerfile.webhooks end in `FROM gcr.io/distroless/static:nonroot` + `USER 65532:65532`. Stating it
        # pins a high uid (Checkov CKV_K8S_40) without changing who the processes run as.
        "podSecurityContext": {pod: restricted_pod(user=KEDA_UID, group=KEDA_UID)
                               for pod in ("operator", "metricServer", "webhooks")},
        "serviceAccount": {"operator": {"create": True, "name": KEDA_OPERATOR_SERVICE_ACCOUNT}},
    }
    if priority_class:
        values["priorityClassName"] = priority_class
    if highly_available:
        values["operator"] = {"replicaCount": 2, "affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app": KEDA_OPERATOR_APP}}}}]}}}
        values["podDisruptionBudget"] = {"operator": {"maxUnavailable": 1}}
    return values


ROOT = Path(__file__).resolve().parent.parent


def _replace_image(text: str, manifest: str, source: str, target: str) -> str:
    text, count = re.subn(r"(?<=[\s=\"'])" + re.escape(source) + r"(?=[\s\"']|$)", target, text, flags=re.M)
    if count == 0:
        raise ValueError(f"{manifest}: image {source} (catalog/images.py OPERATOR_IMAGES) does not occur")
    return text


def architecture_manifest(text: str, manifest: str, architecture: str) -> str:
    """On an arm64 site, the images its project publishes for arm64 in place of the manifest's (catalog.images
    `ARM64_VARIANTS`: DLRover's `_aarch64` release images)."""
    if architecture != "arm64":
        return text
    for source in OPERATOR_IMAGES[manifest]:
        if source in ARM64_VARIANTS:
            text = _replace_image(text, manifest, source, ARM64_VARIANTS[source])
    return text


def site_manifest(text: str, manifest: str, site_images: Mapping[str, str], architecture: str = "amd64") -> str:
    """The vendored operator manifest `manifest` with every image it runs (catalog.images.OPERATOR_IMAGES:
    container images and images passed as controller flags) replaced by its site copy. Only whole references are
    replaced (after `image: `, a quote or a flag's `=`); each must occur, so a bump that changes an image fails
    here instead of deploying the upstream one."""
    for source in operator_images(manifest, architecture):
        site = site_images.get(normalized(source))
        if site is None:
            raise ValueError(f"{manifest}: no site image for {source}")
        text = _replace_image(text, manifest, source, site)
    return text


SITE_COPY_MARKER = "-site-"
"""In the name of a derived manifest whose images are the site registry's (`derived_name`); the policy rule
`offline-images-from-site-registry` (policy/gtp_policy/rules_supply_chain.py `SITE_COPY`) accepts only such files
on an air-gapped stack — a copy that only adds the priority class still runs upstream images."""


def derived_name(manifest: str, text: str, *, site: bool) -> str:
    """`<vendored stem>[-site]-<sha256 prefix of text>.yaml`."""
    stem = Path(manifest).name.removesuffix(".yaml")
    return f"{stem}{SITE_COPY_MARKER if site else '-'}{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"


DEPLOYMENT_KIND = re.compile(r"^kind: Deployment\s*$", re.MULTILINE)


def with_priority_class(text: str, manifest: str, priority_class: str) -> str:
    """`text` with `priorityClassName: <priority_class>` in the pod template of every Deployment; every other
    document stays byte-exact. A manifest without a Deployment is an error (a bump that renamed the kind would
    otherwise leave the controller without a class silently)."""
    documents = text.split("\n---\n")
    found = 0
    for index, document in enumerate(documents):
        # Parse only what can be a Deployment: the manifests are megabytes of CRDs, whose pure-Python parse
        # cost seconds on every plan (a document's own kind is an unindented line).
        if not DEPLOYMENT_KIND.search(document):
            continue
        body = yaml.safe_load(document)
        if not isinstance(body, dict) or body.get("kind") != "Deployment":
            continue
        body["spec"]["template"]["spec"]["priorityClassName"] = priority_class
        leading = "---\n" if document.startswith("---\n") else ""
        documents[index] = leading + yaml.safe_dump(body, sort_keys=False).rstrip("\n")
        found += 1
    if not found:
        raise ValueError(f"{manifest}: no Deployment to give priorityClassName {priority_class!r}")
    return "\n---\n".join(documents)


def operator_file(manifest: str, site_images: Mapping[str, str], manifest_dir: str,
                  priority_class: str | None = None, architecture: str = "amd64") -> str:
    """The file a ConfigFile applies: the vendored one as is, or a copy derived from it — rewritten to the site's
    images (offline) and/or with `priority_class` on its controllers' pods (`with_priority_class`) — written under
    `manifest_dir` as `<name>-<content sha256 prefix>.yaml` (relative to the project root, where Pulumi runs the
    program). The vendored file stays byte-exact; the copy is derived from it on every run."""
    arm64_images = architecture == "arm64" and any(image in ARM64_VARIANTS for image in OPERATOR_IMAGES[manifest])
    if not site_images and not priority_class and not arm64_images:
        return manifest
    text = architecture_manifest((ROOT / manifest).read_text(), manifest, architecture)
    if site_images:
        text = site_manifest(text, manifest, site_images, architecture)
    if priority_class:
        text = with_priority_class(text, manifest, priority_class)
    # Named by content: a new lock (new digests) is a new file, so the plan diff and Pulumi see the change, and
    # plans of the same stack with different locks never overwrite each other's copy.
    target = f"{manifest_dir}/{derived_name(manifest, text, site=bool(site_images))}"
    (ROOT / manifest_dir).mkdir(parents=True, exist_ok=True)
    path = ROOT / target
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return target


def selected_manifests(operators: frozenset[str]) -> dict[str, str]:
    """Operator name → vendored manifest for the manifest-installed operators among `operators`, in install order
    (catalog/versions.py `OPERATOR_MANIFESTS`); `keda` is the one other name (a chart). An unknown name is refused."""
    unknown = sorted(operators - set(versions.OPERATOR_MANIFESTS) - {"keda"})
    if unknown:
        raise ValueError(f"no operator named {unknown}; known: {[*versions.OPERATOR_MANIFESTS, 'keda']}")
    return {operator: manifest for operator, manifest in versions.OPERATOR_MANIFESTS.items() if operator in operators}


@dataclass
class TrainingOperatorsArgs:
    provider: k8s.Provider
    operators: frozenset[str] = frozenset()
    """What to install, by name: any of catalog/versions.py `OPERATOR_MANIFESTS` (`training-operator`: Kubeflow
    training-operator v1, PyTorchJob; `dlrover`: DLRover's ElasticJob controller; `trainer`: Kubeflow Trainer v2 +
    JobSet, TrainJob) and `keda` (KEDA's chart: ScaledObject / ScaledJob). Default none."""
    system_node_selector: dict[str, str] | None = None
    """Where KEDA runs; None on clusters without a labelled system group (edge)."""
    keda_identity_cluster: pulumi.Input[str] | None = None
    """EKS cluster name: give KEDA's operator a Pod Identity role (permissions are attached by whoever needs them,
    e.g. KedaScaling for its queue). None = no AWS identity (edge)."""
    aws_opts: pulumi.ResourceOptions | None = None
    site_images: dict[str, str] = field(default_factory=dict)
    """Air-gapped stacks: upstream image → the site registry's copy; the operator manifests are applied from copies
    rewritten to them (`operator_file`) and KEDA's chart values point at them. Default: none."""
    architecture: str = "amd64"
    """The architecture of the nodes the operators run on (`amd64`, `arm64`): on arm64 the operators whose projects
    publish arm64 as separate images run those (catalog.images `ARM64_VARIANTS`). Default amd64."""
    manifest_dir: str = "build/offline"
    """Where the derived operator manifests (site images, priority class) are written, relative to the project
    root."""
    platform_priority: pulumi.Resource | None = None
    """The `gtp-platform` PriorityClass (components/platform_priority.py): every operator's controller pods name
    it (derived manifests, KEDA's values) and wait for it. None: the upstream manifests' (no class). The vendored
    operators stay single-replica without a PodDisruptionBudget: the training-operator v1.9.4 manifest starts it
    without `--leader-elect` (two replicas would both reconcile every job); DLRover's and Trainer/JobSet's managers
    do elect a leader (their config's `leaderElection.leaderElect: true`), but a second one would only idle as a
    standby on the system group, and a budget on one replica would block every drain. A drain restarts the
    controller elsewhere; running jobs keep running meanwhile."""


class TrainingOperators(pulumi.ComponentResource):
    manifests: dict[str, k8s.yaml.v2.ConfigFile]
    keda: k8s.helm.v3.Release | None = None
    keda_operator_role: aws.iam.Role | None = None

    def __init__(self, name: str, args: TrainingOperatorsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:TrainingOperators", name, None, opts)
        priority = PLATFORM_PRIORITY_CLASS if args.platform_priority else None
        child = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                       depends_on=[args.platform_priority] if args.platform_priority else [])
        # Each vendored render, applied object by object by the provider (nothing fetched at deploy time; the
        # offline plan records the file and renders its objects into cluster.yaml).
        self.manifests = {
            operator: k8s.yaml.v2.ConfigFile(
                f"{name}-{operator}",
                file=operator_file(manifest, args.site_images, args.manifest_dir, priority, args.architecture),
                opts=child)
            for operator, manifest in selected_manifests(args.operators).items()}
        if "keda" in args.operators:
            values = keda_values(priority, highly_available=args.system_node_selector is not None)
            if args.system_node_selector is not None:
                values["nodeSelector"] = dict(args.system_node_selector)
            else:
                values.pop("nodeSelector")
            keda_after: list[pulumi.Resource] = [args.platform_priority] if args.platform_priority else []
            if args.keda_identity_cluster is not None:
                aws_child = pulumi.ResourceOptions.merge(args.aws_opts or pulumi.ResourceOptions(),
                                                         pulumi.ResourceOptions(parent=self))
                self.keda_operator_role = aws.iam.Role(
                    f"{name}-keda-operator", assume_role_policy=iam.pod_identity_trust(),
                    description="KEDA operator (Pod Identity); policies attached per scaler", opts=aws_child)
                # The Pod Identity webhook injects credentials when a pod is created, so the association must
                # exist before the operator's pod does.
                keda_after.append(aws.eks.PodIdentityAssociation(
                    f"{name}-keda-operator", cluster_name=args.keda_identity_cluster, namespace=KEDA_NAMESPACE,
                    service_account=KEDA_OPERATOR_SERVICE_ACCOUNT, role_arn=self.keda_operator_role.arn,
                    opts=aws_child))
            chart = versions.KEDA
            self.keda = pinned_release(
                f"{name}-keda", chart, release_name="keda", namespace=KEDA_NAMESPACE, create_namespace=True,
                values=values, opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=keda_after),
                site_images=args.site_images)
        self.register_outputs({})

    @property
    def installed(self) -> dict[str, pulumi.Resource]:
        """Operator name (`training-operator`, `dlrover`, `trainer`, `keda`) → what its custom resources depend on."""
        return {**self.manifests, **({"keda": self.keda} if self.keda is not None else {})}
