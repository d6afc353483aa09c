"""Which pins must agree, and how each pairing was verified: one row per pairing, checked on every plan.

A row names the pins it relates (`catalog/versions.py` names, or the stack's `kubernetesVersion`), the values it was
verified at, the upstream source read, and its decision. `stack_config/rules.py` turns a violated row into a plan
error naming both pins and the source, and a row whose pins moved since it was verified into one too: a version
bump is not done until its rows are re-read and updated here.

A row may concern one installed component (`component`): the plan checks it only on stacks that install it
(stack_config/derived.py `installed_parts`). Rows relating the stack's `kubernetesVersion` are checked on EKS
stacks, whose Kubernetes version the stack sets.

`FLOORS` is the second table: the lowest version of a pinned component (or of one the sites must provide) that
carries the fix of a published advisory. A pin below a floor fails the plan naming the pin and the advisory.
`NO_ROW` lists every `catalog/versions.py` pin that has no row here, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from catalog import versions

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    name: str
    pins: tuple[str, ...]
    """`catalog.versions` attribute names (and `kubernetesVersion`, the stack's) the row relates."""
    verified_at: dict[str, str]
    """Pin → the value the row was verified at (the stack's `kubernetesVersion` is not pinned here)."""
    source: str
    """The upstream files read, at their tags, with lines."""
    decision: str
    violated: Callable[[Mapping[str, str]], str | None] = field(default=lambda values: None)
    """Given every pin's current value (and `kubernetesVersion`), why they disagree; None when they agree."""
    component: str = ""
    """The installed component the row is about (stack_config/derived.py `installed_parts`): checked only on
    stacks that install it. Empty: a pairing of pins, checked on every stack."""


def chart_app_version(chart_dir: str) -> str:
    """`appVersion` of a vendored chart's Chart.yaml."""
    for line in (ROOT / chart_dir / "Chart.yaml").read_text().splitlines():
        if line.startswith("appVersion:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    raise ValueError(f"{chart_dir}/Chart.yaml has no appVersion")


def _minor(version: str) -> str:
    return ".".join(version.lstrip("v").split(".")[:2])


def version_tuple(text: str) -> tuple[int, int, int]:
    """`v1.23.0-0`, `1.34`, `2.20.2` → (major, minor, patch); a pre-release or build suffix is dropped and a missing
    part is 0 (a stack's `kubernetesVersion` names a minor: it is compared as its `.0`)."""
    core = text.strip().lstrip("v").split("-")[0].split("+")[0]
    parts = [int(part) for part in core.split(".") if part]
    return (parts + [0, 0, 0])[0], (parts + [0, 0, 0])[1], (parts + [0, 0, 0])[2]


_TERM = re.compile(r"(>=|<=|!=|>|<|=|\^|~)?\s*(v?[0-9][0-9A-Za-z.+-]*)")


def satisfies(version: str, constraint: str) -> bool:
    """Whether `version` meets a Helm `kubeVersion` constraint, in the forms the vendored charts use (Masterminds
    semver, which Helm checks `kubeVersion` with): `>=`, `>`, `<=`, `<`, `=`, `!=`, `^` (same major; same minor
    under 1.0), `~` (same minor); terms separated by spaces or commas all hold, `||` separates alternatives."""
    have = version_tuple(version)
    for alternative in constraint.split("||"):
        terms = _TERM.findall(alternative)
        if not terms:
            raise ValueError(f"cannot read the version constraint {constraint!r}")
        if all(_holds(have, op, version_tuple(bound)) for op, bound in terms):
            return True
    return False


def _holds(have: tuple[int, int, int], op: str, bound: tuple[int, int, int]) -> bool:
    if op == "^":
        upper = (bound[0] + 1, 0, 0) if bound[0] else (0, bound[1] + 1, 0)
        return bound <= have < upper
    if op == "~":
        return bound <= have < (bound[0], bound[1] + 1, 0)
    return {">=": have >= bound, ">": have > bound, "<=": have <= bound, "<": have < bound, "!=": have != bound,
            "=": have == bound, "": have == bound}[op]


def chart_kube_versions(chart_dir: str) -> list[tuple[str, int, str]]:
    """(Chart.yaml path, line, constraint) of every `kubeVersion` a vendored chart and its unpacked subcharts
    declare."""
    found = []
    for chart_yaml in sorted((ROOT / chart_dir).rglob("Chart.yaml")):
        for number, line in enumerate(chart_yaml.read_text().splitlines(), start=1):
            if line.startswith("kubeVersion:"):
                found.append((str(chart_yaml.relative_to(ROOT)), number, line.split(":", 1)[1].strip().strip("\"'")))
    return found


def _chart_admits_kubernetes(pin: str) -> Callable[[Mapping[str, str]], str | None]:
    """Helm refuses to install a chart whose `kubeVersion` the cluster's version fails (`helm install` checks it
    against the API server's version)."""
    def violated(values: Mapping[str, str]) -> str | None:
        chart = getattr(versions, pin)
        outside = [f"{path}:{line} kubeVersion {constraint!r}"
                   for path, line, constraint in chart_kube_versions(chart.path)
                   if not satisfies(values["kubernetesVersion"], constraint)]
        if outside:
            return (f"Kubernetes {values['kubernetesVersion']} is outside chart {chart.chart} {chart.version}'s "
                    f"declared range ({'; '.join(outside)})")
        return None
    return violated


def _kubernetes_within(name: str, oldest: str, newest: str | None = None) -> Callable[[Mapping[str, str]], str | None]:
    def violated(values: Mapping[str, str]) -> str | None:
        have = version_tuple(values["kubernetesVersion"])[:2]
        if have < version_tuple(oldest)[:2] or (newest is not None and have > version_tuple(newest)[:2]):
            window = f"{oldest}–{newest}" if newest else f">= {oldest}"
            return f"{name} supports Kubernetes {window}, the cluster runs {values['kubernetesVersion']}"
        return None
    return violated


def _autoscaler_matches(values: Mapping[str, str]) -> str | None:
    app = values["CLUSTER_AUTOSCALER_APP"]
    if _minor(app) != _minor(values["kubernetesVersion"]):
        return (f"cluster-autoscaler {app} (chart {versions.CLUSTER_AUTOSCALER.version}) is built for Kubernetes "
                f"{_minor(app)}, the cluster runs {values['kubernetesVersion']}")
    return None


def _equal(left: str, right: str, what: str) -> Callable[[Mapping[str, str]], str | None]:
    def violated(values: Mapping[str, str]) -> str | None:
        return None if values[left] == values[right] else f"{what}: {values[left]} != {values[right]}"
    return violated


KUEUE_JOBSET = "v0.12.0"
"""The JobSet module Kueue v0.19.2 builds against (go.mod:48 `sigs.k8s.io/jobset v0.12.0`)."""

ROWS: tuple[Row, ...] = (
    Row("kueue-trainer", ("KUEUE_VERSION", "KUBEFLOW_TRAINER_VERSION"),
        {"KUEUE_VERSION": "v0.19.2", "KUBEFLOW_TRAINER_VERSION": "v2.3.0"},
        "kubernetes-sigs/kueue v0.19.2 go.mod:14 (`github.com/kubeflow/trainer/v2 v2.2.1`), "
        "pkg/controller/jobs/trainjob/trainjob_controller.go:154-182 and :226 `PodSets` (pod sets from Trainer "
        "v2.2.1's runtime framework), :243-283 and :295 (`c.Update` of the whole TrainJob with the v2.2.1 struct); "
        "kubeflow/trainer "
        "`git diff v2.2.1 v2.3.0 -- pkg/apis/trainer/v1alpha1`: TorchMLPolicySource.envInjection "
        "(trainingruntime_types.go:209-257), PodSpecPatch.terminationGracePeriodSeconds (trainjob_types.go:457-462), "
        "storageUri validation and command/args MaxLength",
        "compatible for what the platform submits: Kueue reads ClusterTrainingRuntimes and writes only its own "
        "runtimePatch (nodeSelector, tolerations, scheduling gates, labels, annotations), but its Update carries the "
        "v2.2.1 struct, so a field new in v2.3.0 set on a TrainJob (a runtimePatch's terminationGracePeriodSeconds) "
        "would be dropped at admission, and envInjection is invisible to its pod-set count. The platform sets "
        "neither (workload_kinds/trainjob.py; tests/test_compatibility.py); the resources Kueue counts come from "
        "resourcesPerNode, which both versions apply alike for the platform's runtime (the policy rule "
        "`k8s-trainjob-resources-per-node`)."),
    Row("kueue-jobset", ("KUEUE_VERSION", "JOBSET_VERSION"),
        {"KUEUE_VERSION": "v0.19.2", "JOBSET_VERSION": "v0.12.0"},
        "kubernetes-sigs/kueue v0.19.2 go.mod:48 (`sigs.k8s.io/jobset v0.12.0`); the vendored Trainer v2.3.0 render "
        "bundles JobSet v0.12.0 (vendor/SOURCES.md)",
        "Kueue computes a TrainJob's JobSet with the JobSet API it builds against: the same minor as the "
        "controller Trainer bundles.",
        lambda values: None if values["JOBSET_VERSION"] == KUEUE_JOBSET else (
            f"JobSet {values['JOBSET_VERSION']} runs, Kueue {values['KUEUE_VERSION']} builds against {KUEUE_JOBSET}")),
    Row("training-operator-kueue", ("TRAINING_OPERATOR_VERSION", "KUEUE_VERSION"),
        {"TRAINING_OPERATOR_VERSION": "v1.9.4", "KUEUE_VERSION": "v0.19.2"},
        "kubernetes-sigs/kueue v0.19.2 go.mod:15 (`github.com/kubeflow/training-operator v1.9.3`); kubeflow/trainer "
        "`git diff --stat v1.9.3 v1.9.4 -- pkg/apis/kubeflow.org/v1`: only zz_generated.openapi.go (descriptions)",
        "compatible: the PyTorchJob Go types Kueue vendors (v1.9.3) are those v1.9.4 serves."),
    Row("provisioning-request-crd-autoscaler", ("CLUSTER_AUTOSCALER_VERSION", "CLUSTER_AUTOSCALER_APP"),
        {"CLUSTER_AUTOSCALER_VERSION": "1.34.1", "CLUSTER_AUTOSCALER_APP": "1.34.1"},
        "kubernetes/autoscaler tag cluster-autoscaler-1.34.1 "
        "cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml (vendor/SOURCES.md); "
        "vendor/charts/cluster-autoscaler-9.52.1/Chart.yaml appVersion",
        "the vendored ProvisioningRequest CRD must be the one of the autoscaler the chart runs: the autoscaler "
        "and Kueue's provisioning admission check read ProvisioningRequests through it.",
        _equal("CLUSTER_AUTOSCALER_VERSION", "CLUSTER_AUTOSCALER_APP",
               "the ProvisioningRequest CRD's autoscaler tag vs the chart's appVersion")),
    Row("cluster-autoscaler-kubernetes", ("CLUSTER_AUTOSCALER_APP", "kubernetesVersion"),
        {"CLUSTER_AUTOSCALER_APP": "1.34.1"},
        "kubernetes/autoscaler cluster-autoscaler/README.md \"Releases\" (\"We recommend using Cluster Autoscaler "
        "with the Kubernetes control plane ... version for which it was meant\"; \"versioning scheme was changed "
        "to match Kubernetes minor releases exactly\"); vendor/charts/cluster-autoscaler-9.52.1/Chart.yaml:2 "
        "appVersion 1.34.1",
        "the autoscaler simulates the scheduler of its own minor: it must be the cluster's minor.",
        _autoscaler_matches, component="cluster-autoscaler"),
    # --- Kubernetes minor × each vendored chart's declared range (Chart.yaml `kubeVersion`) ---------------------
    # The vendored folders are byte-exact copies of the upstream chart at its tag (vendor/SOURCES.md); the
    # device plugin's and dcgm-exporter's Chart.yaml were also compared with the upstream tag (identical). The
    # others' sources name the vendored file, which is what the row reads.
    Row("nvidia-device-plugin-kubernetes", ("NVIDIA_DEVICE_PLUGIN", "kubernetesVersion"),
        {"NVIDIA_DEVICE_PLUGIN": "0.20.0"},
        "NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/Chart.yaml:7 (kubeVersion "
        "\">= 1.10.0-0\"; its node-feature-discovery subchart declares none) and README.md:78 (\"Kubernetes version >= "
        "1.10\")",
        "Helm installs the chart only on a cluster inside its kubeVersion: every supported minor is.",
        _chart_admits_kubernetes("NVIDIA_DEVICE_PLUGIN"), component="nvidia-device-plugin"),
    Row("dcgm-exporter-kubernetes", ("DCGM_EXPORTER", "kubernetesVersion"), {"DCGM_EXPORTER": "4.6.0"},
        "NVIDIA/dcgm-exporter tag 4.4.1-4.6.0 deployment/Chart.yaml:5 (kubeVersion \">= 1.19.0-0\"; identical to "
        "vendor/charts/dcgm-exporter-4.6.0/Chart.yaml)",
        "Helm installs the chart only on a cluster inside its kubeVersion: every supported minor is.",
        _chart_admits_kubernetes("DCGM_EXPORTER"), component="dcgm-exporter"),
    Row("efa-device-plugin-kubernetes", ("EFA_DEVICE_PLUGIN", "kubernetesVersion"), {"EFA_DEVICE_PLUGIN": "v0.5.20"},
        "vendor/charts/aws-efa-k8s-device-plugin-v0.5.20/Chart.yaml and README.md (aws/eks-charts de5fdc1d "
        "stable/aws-efa-k8s-device-plugin): no kubeVersion, and the README states no Kubernetes range",
        "no declared range to check; a bump re-reads the chart for one (this row then fails until it is checked).",
        _chart_admits_kubernetes("EFA_DEVICE_PLUGIN"), component="efa"),
    Row("prometheus-kubernetes", ("PROMETHEUS", "kubernetesVersion"), {"PROMETHEUS": "27.39.0"},
        "vendor/charts/prometheus-27.39.0/Chart.yaml:6 (kubeVersion \">=1.19.0-0\"; prometheus-community/helm-charts "
        "tag prometheus-27.39.0) and charts/alertmanager/Chart.yaml:12 (\">=1.25.0-0\"; tag alertmanager-1.26.0); "
        "the kube-state-metrics, node-exporter and pushgateway subcharts declare none",
        "Helm installs the chart only on a cluster inside every kubeVersion it and its subcharts declare.",
        _chart_admits_kubernetes("PROMETHEUS"), component="prometheus"),
    Row("grafana-kubernetes", ("GRAFANA", "kubernetesVersion"), {"GRAFANA": "10.1.4"},
        "vendor/charts/grafana-10.1.4/Chart.yaml:5 (kubeVersion \"^1.8.0-0\"; grafana/helm-charts tag "
        "grafana-10.1.4 charts/grafana)",
        "Helm installs the chart only on a cluster inside its kubeVersion (any 1.x from 1.8).",
        _chart_admits_kubernetes("GRAFANA"), component="grafana"),
    Row("keda-chart-kubernetes", ("KEDA", "kubernetesVersion"), {"KEDA": "2.20.2"},
        "vendor/charts/keda-2.20.2/Chart.yaml:7 (kubeVersion \">=v1.23.0-0\"; kedacore/charts tag v2.20.2 keda)",
        "Helm installs the chart only on a cluster inside its kubeVersion; KEDA's own tested window is narrower "
        "(row keda-kubernetes).",
        _chart_admits_kubernetes("KEDA"), component="keda"),
    # --- Kubernetes minor × the operators' documented ranges -------------------------------------------------------
    Row("keda-kubernetes", ("KEDA", "kubernetesVersion"), {"KEDA": "2.20.2"},
        "keda.sh/docs/2.20/operate/cluster/ \"Kubernetes Compatibility\" (\"each KEDA release is generally tested "
        "against N-2 Kubernetes minor versions\"; matrix row \"v2.20 v1.33 - v1.35\"; an earlier copy of the page "
        "read \"v2.20 TBD\")",
        "KEDA 2.20 is tested on Kubernetes 1.33-1.35 only (its N-2 policy): a stack that would run it on 1.32 is "
        "refused rather than run untested.",
        _kubernetes_within("KEDA 2.20", "1.33", "1.35"), component="keda"),
    Row("kueue-kubernetes", ("KUEUE_VERSION", "kubernetesVersion"), {"KUEUE_VERSION": "v0.19.2"},
        "kubernetes-sigs/kueue v0.19.2 README.md:95 (\"Requires Kubernetes 1.29 or newer\")",
        "every supported minor is 1.29 or newer.",
        _kubernetes_within("Kueue v0.19.2", "1.29"), component="kueue"),
    Row("trainer-kubernetes", ("KUBEFLOW_TRAINER_VERSION", "kubernetesVersion"), {"KUBEFLOW_TRAINER_VERSION": "v2.3.0"},
        "kubeflow/trainer v2.3.0 docs/operator-guides/installation.md:12 (\"Kubernetes >= 1.31\"); the JobSet "
        "v0.12.0 controller it bundles is installed by the same render",
        "every supported minor is 1.31 or newer.",
        _kubernetes_within("Kubeflow Trainer v2.3.0", "1.31"), component="trainer"),
    Row("training-operator-kubernetes", ("TRAINING_OPERATOR_VERSION", "kubernetesVersion"),
        {"TRAINING_OPERATOR_VERSION": "v1.9.4"},
        "kubeflow/trainer v2.3.0 docs/legacy-v1/installation.md:21 (the training-operator v1 guide: \"Kubernetes >= "
        "1.28\"); v1.9.4 itself documents no range, its CI runs v1.34.3 and v1.35.0 "
        "(.github/workflows/integration-tests.yaml:29-44, e2e-test-train-api.yaml:15)",
        "every supported minor is 1.28 or newer.",
        _kubernetes_within("training-operator v1.9.4", "1.28"), component="training-operator"),
    Row("jobset-kubernetes", ("JOBSET_VERSION", "kubernetesVersion"), {"JOBSET_VERSION": "v0.12.0"},
        "kubernetes-sigs/jobset v0.12.0 site/content/en/docs/installation/_index.md:25 (\"A Kubernetes cluster running "
        "one of the last 3 Kubernetes minor versions\"); the tag is of 2026-05-08 and builds against k8s.io/api "
        "v0.36.0 (go.mod:13), so the last three were 1.34-1.36",
        "Trainer v2.3.0 runs its TrainJobs as JobSets with the v0.12.0 controller it bundles: a stack running "
        "TrainJobs on 1.32 or 1.33 would run JobSet outside its documented window, and is refused.",
        _kubernetes_within("JobSet v0.12.0", "1.34", "1.36"), component="trainer"),
    # --- GPU stack ----------------------------------------------------------------------------------------------
    Row("device-plugin-driver", ("NVIDIA_DEVICE_PLUGIN",), {"NVIDIA_DEVICE_PLUGIN": "0.20.0"},
        "NVIDIA/k8s-device-plugin v0.20.0 README.md:71-78 \"Prerequisites\" (\"NVIDIA drivers ~= 384.81\"; "
        "\"nvidia-docker >= 2.0 || nvidia-container-toolkit >= 1.7.0 (>= 1.11.0 to use integrated GPUs on "
        "Tegra-based systems)\"; \"nvidia-container-runtime configured as the default low-level runtime\", which "
        "gpu.runtimeClassName stands in for on adopted k3s clusters)",
        "the platform pins no driver or toolkit: EKS's NVIDIA AMIs bring both, an adopted cluster or a Swarm site "
        "installs them. The site preconditions in docs/edge.md and docs/swarm.md name these minimums (and the "
        "toolkit's CVE floor, FLOORS), tests/test_compatibility.py checks they do.",
        component="nvidia-device-plugin"),
    Row("efa-installer-nccl-torch", ("EFA_INSTALLER", "TORCH_VERSION"),
        {"EFA_INSTALLER": "1.50.0", "TORCH_VERSION": "2.13.0"},
        "catalog/versions.py EFA_INSTALLER note (EFA release notes row 1.50.0: aws-ofi-nccl 1.21.1); aws/aws-ofi-nccl "
        "release v1.21.1 (\"tested with NCCL v2.31.2-1 while maintaining backward compatibility with older NCCL "
        "versions (NCCL v2.17.1 and later)\"; its CUDA runtime calls use \"their CUDA Driver API equivalents\", no "
        "CUDA range stated); torch 2.13.0 METADATA Requires-Dist nvidia-nccl-cu13==2.29.7 and "
        "cuda-toolkit[...]==13.0.3",
        "the plugin loads into torch's own NCCL (2.29.7, CUDA 13 build) inside aws-ofi-nccl 1.21.1's NCCL range; "
        "aws-ofi-nccl states no CUDA range of its own, so the CUDA pairing is NCCL's, which torch's wheel fixes.",
        lambda values: _efa_carries_torchs_nccl(values), component="efa"),  # noqa: PLW0108 (defined below)
    Row("dlrover-python-controller", ("DLROVER_VERSION", "DLROVER_PYTHON"),
        {"DLROVER_VERSION": "v0.6.1", "DLROVER_PYTHON": "0.6.1"},
        "intelligent-machine-learning/dlrover v0.6.1: the controller's manifest (go/elasticjob/config) and the "
        "python package (setup.py:34 version=\"0.6.1\") are released from the one tag; docs/deployment/controller.md:8 "
        "names no Kubernetes range (\"Ensure you have Kubernetes installed\")",
        "the image's dlrover (the job master and dlrover-run) is the controller's release; DLRover documents no "
        "Kubernetes range to check.",
        lambda values: None if values["DLROVER_PYTHON"] == values["DLROVER_VERSION"].lstrip("v") else (
            f"the image's dlrover {values['DLROVER_PYTHON']} is not the controller's {values['DLROVER_VERSION']}")),
    Row("torch-cuda-base-image", ("TORCH_VERSION", "PYTORCH_BASE_IMAGE"),
        {"TORCH_VERSION": "2.13.0", "PYTORCH_BASE_IMAGE": versions.PYTORCH_BASE_IMAGE},
        "torch 2.13.0 METADATA Requires-Dist cuda-toolkit[...]==13.0.3 (CUDA 13.0); the pinned pytorch/pytorch tag "
        "2.13.0-cuda13.0-cudnn9-runtime (catalog/versions.py PYTORCH_BASE_IMAGE)",
        "the x86_64 base carries the torch release and the CUDA minor torch's wheels are built for.",
        lambda values: _base_carries_torch(values)),  # noqa: PLW0108 (defined below)
)


TORCH_BUILD = {"nccl": "2.29.7", "cuda": "13.0"}
"""NCCL and CUDA of TORCH_VERSION's Linux wheels: torch 2.13.0 METADATA `Requires-Dist: nvidia-nccl-cu13==2.29.7`
and `cuda-toolkit[...]==13.0.3` (tests/test_compatibility.py reads them from the installed torch)."""
EFA_READ = {"aws_ofi_nccl": "1.21.1", "nccl_range": ("2.17.1", "2.31.2")}
"""What row efa-installer-nccl-torch read of EFA_INSTALLER's bundled plugin."""


def _efa_carries_torchs_nccl(values: Mapping[str, str]) -> str | None:
    installer = versions.EFA_INSTALLER
    if installer.aws_ofi_nccl != EFA_READ["aws_ofi_nccl"] or installer.nccl_range != EFA_READ["nccl_range"]:
        return (f"EFA_INSTALLER records aws-ofi-nccl {installer.aws_ofi_nccl} (NCCL {'-'.join(installer.nccl_range)}), "
                f"the row read aws-ofi-nccl {EFA_READ['aws_ofi_nccl']} (NCCL {'-'.join(EFA_READ['nccl_range'])})")
    oldest, newest = installer.nccl_range
    if not version_tuple(oldest) <= version_tuple(TORCH_BUILD["nccl"]) <= version_tuple(newest):
        return (f"torch {values['TORCH_VERSION']}'s NCCL {TORCH_BUILD['nccl']} is outside aws-ofi-nccl "
                f"{installer.aws_ofi_nccl}'s NCCL {oldest}-{newest} (EFA installer {values['EFA_INSTALLER']})")
    return None


def _base_carries_torch(values: Mapping[str, str]) -> str | None:
    tag = values["PYTORCH_BASE_IMAGE"].split("@")[0].rsplit(":", 1)[-1]
    want = f"{values['TORCH_VERSION']}-cuda{TORCH_BUILD['cuda']}-"
    return None if tag.startswith(want) else f"base image tag {tag} is not torch {want.rstrip('-')}"


def pin_values() -> dict[str, str]:
    """The current value of every pin a row names (except the stack's `kubernetesVersion`)."""
    return {"KUEUE_VERSION": versions.KUEUE_VERSION, "KUBEFLOW_TRAINER_VERSION": versions.KUBEFLOW_TRAINER_VERSION,
            "JOBSET_VERSION": versions.JOBSET_VERSION, "TRAINING_OPERATOR_VERSION": versions.TRAINING_OPERATOR_VERSION,
            "CLUSTER_AUTOSCALER_APP": chart_app_version(versions.CLUSTER_AUTOSCALER.path),
            "CLUSTER_AUTOSCALER_VERSION": versions.CLUSTER_AUTOSCALER_VERSION,
            **{pin: getattr(versions, pin).version for pin in CHART_PINS},
            "KEDA_APP": chart_app_version(versions.KEDA.path),
            "DCGM_EXPORTER_APP": chart_app_version(versions.DCGM_EXPORTER.path),
            "EFA_INSTALLER": versions.EFA_INSTALLER.version, "TORCH_VERSION": versions.TORCH_VERSION,
            "PYTORCH_BASE_IMAGE": versions.PYTORCH_BASE_IMAGE,
            "DLROVER_VERSION": versions.DLROVER_VERSION, "DLROVER_PYTHON": versions.DLROVER_PYTHON}


CHART_PINS = ("NVIDIA_DEVICE_PLUGIN", "DCGM_EXPORTER", "EFA_DEVICE_PLUGIN", "PROMETHEUS", "GRAFANA", "KEDA")
"""The vendored charts whose version is a pin of a row (the cluster autoscaler's row reads its appVersion)."""


def problems(values: Mapping[str, str], uses: Callable[[Row], bool] = lambda row: True) -> list[tuple[Row, str]]:
    """(row, why) for every row the stack uses whose pins moved since it was verified, or which is violated."""
    found = []
    for row in ROWS:
        if not uses(row):
            continue
        moved = [f"{pin} is {values[pin]}, verified at {row.verified_at[pin]}" for pin in row.pins
                 if pin in row.verified_at and values[pin] != row.verified_at[pin]]
        if moved:
            found.append((row, f"pins moved since the row was verified ({'; '.join(moved)}): re-read "
                               f"{row.source} and update catalog/compatibility.py"))
            continue
        why = row.violated(values)
        if why:
            found.append((row, why))
    return found


# --- CVE floors -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Floor:
    """The first releases that carry the fix of one published advisory for a component of the GPU stack."""

    component: str
    pin: str | None
    """The `pin_values` name compared with the floor; None for a component the platform does not pin (the sites
    or EKS's AMIs provide it): the site preconditions in docs/edge.md and docs/swarm.md state the floor instead
    (tests check they do)."""
    fixed_in: tuple[str, ...]
    """The first fixed release of each release line the advisory names; a version is below the floor when it is
    older than the fix of its own line, or, on a line not listed, older than the newest fix."""
    advisory: str
    """CVE and GHSA ids."""
    what: str
    source: str
    """What was read, and where."""
    introduced: str | None = None
    """The first release with the vulnerable code, where the code was read to show older ones lack it (an advisory
    often says "all versions up to"); None: every older release counts as affected."""
    uses: str = ""
    """The installed component (stack_config/derived.py `installed_parts`) that exposes a stack to it."""
    accepted: Mapping[str, str] = field(default_factory=dict)
    """Pin value → why the pin stays below this floor for now. Only that exact value passes: any other value below
    the floor fails again. An entry is a recorded, reviewed risk, not a fix."""


def below_floor(version: str, fixed_in: tuple[str, ...], introduced: str | None = None) -> bool:
    """Whether `version` has the vulnerable code and lacks the fix (see `Floor.fixed_in`, `Floor.introduced`)."""
    have = version_tuple(version)
    if introduced is not None and have < version_tuple(introduced):
        return False
    fixes = sorted(version_tuple(fix) for fix in fixed_in)
    same_line = [fix for fix in fixes if fix[:2] == have[:2]]
    return have < (same_line[0] if same_line else fixes[-1])


FLOORS: tuple[Floor, ...] = (
    Floor("KEDA", "KEDA_APP", ("2.17.3", "2.18.3", "2.19.0"), "CVE-2025-68476 / GHSA-c4p6-qg4m-9jmr",
          "arbitrary file read through a TriggerAuthentication's HashiCorp Vault service-account path",
          "kedacore/keda v2.20.2 CHANGELOG.md:272-274 (v2.18.3 \"Fix CVE-2025-68476\", #7334) and :390-392 (v2.17.3, "
          "#7333); the GHSA id and \"Fixed in 2.17.3 / 2.18.3 / 2.19.0+\" from third-party advisory digests found "
          "with the code search (the advisory page itself was not in the stored corpora)",
          uses="keda"),
    Floor("KEDA", "KEDA_APP", ("2.21.0",), "CVE-2026-77524 / GHSA-637c-6jxx-4rwm",
          "critical: a TriggerAuthentication or ClusterTriggerAuthentication using Vault Kubernetes auth or "
          "boundServiceAccountToken gets service-account tokens minted without an explicit audience, letting a "
          "namespace-scoped user escalate to cluster admin; every 2.20.x and older, fixed only in 2.21.0",
          "three independent third-party digests of kedacore/keda release v2.21.0 and its advisory found with the "
          "code search (\"Vulnerable <=2.20.2 ... with no backport. Fixed only in 2.21.0\"); keda.sh "
          "docs/2.22/authentication-providers/bound-service-account-token/ (\"Starting in KEDA 2.21, token minting "
          "requires an operator-configured audience mapping\"). kedacore/keda's own advisory page and the v2.21.0 "
          "tag were not in the stored snapshot (its newest tag is v2.20.2)",
          uses="keda",
          accepted={"2.20.2": "no KEDA 2.21 chart is vendored yet (a new chart, its images in catalog/images.py, "
                              "2.21's breaking changes to token audiences, and its tested window 1.34-1.36 all "
                              "move with it). Exploiting it needs create on triggerauthentications or "
                              "clustertriggerauthentications, which the platform grants no one short of cluster "
                              "admin: the only EKS access entries are the deployer and adminRoleArns, both "
                              "AmazonEKSClusterAdminPolicy (components/eks_cluster.py:206-211); the chart's "
                              "keda:edit role aggregates into edit/admin only with rbac.aggregateToDefaultRoles, "
                              "false by default (vendor/charts/keda-2.20.2/values.yaml:327, "
                              "templates/manager/clusterrole.yaml:164-186) and not set by "
                              "components/training_operators.py; no RoleBinding the platform creates names "
                              "keda.sh; and its own TriggerAuthentication uses podIdentity "
                              "(components/keda_scaling.py), neither Vault nor boundServiceAccountToken. RBAC "
                              "granted outside the stack is not covered: docs/image.md says to keep it to cluster "
                              "admins until the bump"}),
    Floor("KEDA", "KEDA_APP", ("2.20.0",), "GHSA-6w3m-4hhp-775q",
          "moderate: injection into the PostgreSQL scaler's generated connection string",
          "kedacore/keda v2.20.2 CHANGELOG.md:197 (v2.20.0: \"PostgreSQL Scaler: Quote whitespace-containing "
          "connection parameters in generated connection strings\", #7784; commit 703de9dec); the GHSA id, its "
          "severity and \"patched 2.20\" from third-party advisory digests found with the code search",
          uses="keda"),
    Floor("dcgm-exporter", "DCGM_EXPORTER_APP", ("4.8.2",), "CVE-2026-47483",
          "unauthenticated /debug/pprof endpoints on the metrics port: denial of service and information disclosure",
          "NVIDIA/product-security 2026/5857/5857.md (Security Bulletin: NVIDIA DCGM Exporter - July 2026: DCGM "
          "Exporter affected \"0.0 to 4.8.2\", updated version 4.8.2); NVIDIA/dcgm-exporter: the pprof handlers "
          "first appear in tag 4.5.1-4.8.0 internal/pkg/server/server.go:26 and :104-107 (commit 3cb017b), tag "
          "4.4.1-4.6.0 (the vendored chart's appVersion) has none (`git grep pprof` finds only go.mod:77 and "
          "go.sum), and 4.5.3-4.8.2 makes them opt-in (pkg/cmd/app.go:354-357 --enable-pprof)",
          introduced="4.8.0", uses="dcgm-exporter"),
    Floor("NVIDIA Container Toolkit", None, ("1.19.1",), "CVE-2026-24260",
          "time-of-check time-of-use race: code execution, escalation of privileges, data tampering (CVSS 8.5); GPU "
          "Operator up to 26.3.1 bundles affected toolkits",
          "NVIDIA/product-security 2026/5850/5850.md (Security Bulletin: NVIDIA Container Toolkit - June 2026: \"All "
          "versions up to and including 1.19.0\", updated version 1.19.1)",
          uses="nvidia-device-plugin"),
    Floor("NVIDIA Container Toolkit", None, ("1.17.8",), "CVE-2025-23266",
          "container escape through the toolkit's createContainer hooks (NVIDIAScape); GPU Operator up to 25.3.0 "
          "bundles affected toolkits",
          "CVEProject/cvelistV5 cves/2025/23xxx/CVE-2025-23266.json (NVIDIA's record: \"NVIDIA Container Toolkit All "
          "versions up to and including 1.17.7\")",
          uses="nvidia-device-plugin"),
)


NO_ADVISORY: dict[str, str] = {
    "NVIDIA_DEVICE_PLUGIN": "no CVE or GHSA for k8s-device-plugin itself: v0.20.0's CHANGELOG.md names none, its "
                            "history only dependency bumps (e.g. grpc for CVE-2023-32731, long before v0.20.0), and "
                            "the searches found only scanner reports on its base image",
    "KUEUE_VERSION": "no CVE or GHSA id: Kueue v0.19 notes (CHANGELOG/CHANGELOG-0.19.md:197-206, :343-348) fix a "
                     "MultiKueue path-kubeconfig file read (#12223, in v0.19.0) and KueueViz WebSocket issues "
                     "without an id; v0.19.2 has both fixes, and the platform deploys neither MultiKueue nor KueueViz",
    "TRAINING_OPERATOR_VERSION": "no CVE or GHSA for kubeflow training-operator found (issues corpus; CHANGELOG.md "
                                 "and the commit messages at kubeflow/trainer v1.9.4 name none)",
    "KUBEFLOW_TRAINER_VERSION": "Trainer v2 and its bundled JobSet were not searched for advisories",
    "DLROVER_VERSION": "not searched beyond the GPU stack; none known to the table",
    "EFA_INSTALLER": "the EFA installer and aws-ofi-nccl were not searched for advisories",
}
"""GPU-stack pins with no floor: searched without finding a citable advisory, or not searched (pin → which)."""


def floor_problems(values: Mapping[str, str],
                   uses: Callable[[Floor], bool] = lambda floor: True) -> list[tuple[Floor, str]]:
    """(floor, why) for every pinned component a stack installs that is below a floor and not accepted."""
    found = []
    for floor in FLOORS:
        if floor.pin is None or not uses(floor):
            continue
        value = values[floor.pin]
        if below_floor(value, floor.fixed_in, floor.introduced) and value not in floor.accepted:
            found.append((floor, f"{floor.pin} {value} is below {floor.component}'s floor "
                                 f"{' / '.join(floor.fixed_in)} for {floor.advisory} ({floor.what}; source: "
                                 f"{floor.source}): move the pin to a fixed release"))
    return found


# --- Pins without a row -----------------------------------------------------------------------------------------

NO_ROW: dict[str, str] = {
    "SUPPORTED_KUBERNETES_VERSIONS": "the minors a stack may set; each row relating kubernetesVersion checks them",
    "EKS_ADDONS": "EKS offers each add-on build for the Kubernetes versions it supports (`aws eks "
                  "describe-addon-versions`, read when pinning, versions.py) and refuses another at CreateAddon",
    "EKS_KUBE_PROXY": "one build per supported minor, picked by kubernetesVersion (versions.eks_addon_version)",
    "EKS_DEFAULT_BUILD_ADDONS": "add-ons whose build is EKS's default for the cluster's minor, read at up (EKS "
                                "itself offers only builds compatible with it); pinned per stack by "
                                "cluster.addonVersions",
    "EKS_MANAGED_ADDONS": "the names of the add-ons above, not a pin",
    "EKS_ADDON_BUILD": "the shape of a build string, not a pin",
    "NODE_MONITORING_AGENT": "the add-on's name, not a pin",
    "CLUSTER_TEST_KUBERNETES": "test-only: the control plane `make cluster-test` builds (the newest 1.34 patch the Go "
                               "module proxy serves); tests/cluster_test checks it against the stacks' minor",
    "CLUSTER_TEST_ETCD": "test-only: kubeadm's etcd for Kubernetes 1.34 (k8s.io/kubernetes cmd/kubeadm constants.go)",
    "KWOK_VERSION": "test-only: the fake-node controller of `make cluster-test`, not deployed by any stack",
    "PULUMI_CLI_VERSION": "test-only: the Pulumi CLI `make up-test` builds; tests/up_test checks it is of the Python "
                          "SDK's major and not older",
    "PULUMI_KUBERNETES_PROVIDER": "test-only: the provider plugin `make up-test` builds; tests/up_test checks it is "
                                  "the version the pinned pulumi-kubernetes SDK asks the engine for",
    "PULUMI_KUBERNETES_PROVIDER_MODULE": "the Go module version of PULUMI_KUBERNETES_PROVIDER's tag",
    "NFD_CRDS": "a file's path inside the NVIDIA_DEVICE_PLUGIN chart (row of that chart)",
    "TRAINER_VERSION": "this project's own trainer package",
    "BASE_IMAGES": "the x86_64 entry is PYTORCH_BASE_IMAGE (row torch-cuda-base-image); the arm64 ones are unpinned "
                   "(None) until a digest is verified",
    "CLUSTER_AUTOSCALER": "row cluster-autoscaler-kubernetes reads the chart's appVersion (CLUSTER_AUTOSCALER_APP)",
    "TRAINING_OPERATOR_MANIFEST": "derived from TRAINING_OPERATOR_VERSION",
    "DLROVER_MANIFEST": "derived from DLROVER_VERSION",
    "KUEUE_MANIFEST": "derived from KUEUE_VERSION",
    "PROVISIONING_REQUEST_CRD": "a vendored file's path: its tag is CLUSTER_AUTOSCALER_VERSION (row "
                                "provisioning-request-crd-autoscaler), its bytes checked by tools.vendor",
    "TRAINER_MANIFEST": "derived from KUBEFLOW_TRAINER_VERSION",
    "OPERATOR_MANIFESTS": "a table of the *_MANIFEST paths above, by operator name",
}
"""Every `catalog/versions.py` pin with no row above, and why none applies."""
