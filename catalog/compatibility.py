"""Which pins must agree, and how each pairing was verified: one row per pairing, checked on every plan.

A row names the pins it relates (`catalog/versions.py` names, or the stack's `kubernetesVersion`), the values it was
verified at, the upstream source read, and its decision. `stack_config/rules.py` turns a violated row into a plan
error naming both pins and the source, and a row whose pins moved since it was verified into one too: a version
bump is not done until its rows are re-read and updated here.

Not covered yet (issue 26, "Version compatibility and CVE floors"): Kubernetes minor × each chart's range, KEDA,
EFA installer × aws-ofi-nccl × NCCL × torch's CUDA, device plugin × driver, and the CVE floors table.
"""

from __future__ import annotations

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


def chart_app_version(chart_dir: str) -> str:
    """`appVersion` of a vendored chart's Chart.yaml."""
    for line in (ROOT / chart_dir / "Chart.yaml").read_text().splitlines():
        if line.startswith("appVersion:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    raise ValueError(f"{chart_dir}/Chart.yaml has no appVersion")


def _minor(version: str) -> str:
    return ".".join(version.lstrip("v").split(".")[:2])


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
    Row("cluster-autoscaler-kubernetes", ("CLUSTER_AUTOSCALER_APP", "kubernetesVersion"),
        {"CLUSTER_AUTOSCALER_APP": "1.34.1"},
        "kubernetes/autoscaler cluster-autoscaler/README.md \"Releases\" (\"We recommend using Cluster Autoscaler "
        "with the Kubernetes control plane ... version for which it was meant\"; \"versioning scheme was changed "
        "to match Kubernetes minor releases exactly\"); vendor/charts/cluster-autoscaler-9.52.1/Chart.yaml:2 "
        "appVersion 1.34.1",
        "the autoscaler simulates the scheduler of its own minor: it must be the cluster's minor.",
        _autoscaler_matches),
)


def pin_values() -> dict[str, str]:
    """The current value of every pin a row names (except the stack's `kubernetesVersion`)."""
    return {"KUEUE_VERSION": versions.KUEUE_VERSION, "KUBEFLOW_TRAINER_VERSION": versions.KUBEFLOW_TRAINER_VERSION,
            "JOBSET_VERSION": versions.JOBSET_VERSION, "TRAINING_OPERATOR_VERSION": versions.TRAINING_OPERATOR_VERSION,
            "CLUSTER_AUTOSCALER_APP": chart_app_version(versions.CLUSTER_AUTOSCALER.path)}


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
