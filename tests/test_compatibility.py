"""The compatibility table (catalog/compatibility.py): every row passes for today's pins, a violated row and a
bump not re-verified fail the plan naming both pins and the source."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from catalog import compatibility, versions
from stack_config import ConfigError
from tests.conftest import plan_modified, plan_stack


def _values(**changes: str) -> dict[str, str]:
    return {**compatibility.pin_values(), "kubernetesVersion": "1.34", **changes}


def test_todays_pins_satisfy_every_row() -> None:
    assert compatibility.problems(_values()) == []


@pytest.mark.parametrize("row", [row.name for row in compatibility.ROWS])
def test_every_row_fails_when_one_of_its_pins_moves(row: str) -> None:
    target = next(r for r in compatibility.ROWS if r.name == row)
    pin = next(iter(target.verified_at))
    found = compatibility.problems(_values(**{pin: "v9.9.9"}), lambda r: r.name == row)
    assert [r.name for r, _ in found] == [row]
    assert f"{pin} is v9.9.9, verified at {target.verified_at[pin]}" in found[0][1]


def test_the_autoscaler_row_fails_on_another_kubernetes_minor(tmp_path: Path) -> None:
    found = compatibility.problems(_values(kubernetesVersion="1.33"), lambda row: row.component != "trainer")
    assert [r.name for r, _ in found] == ["cluster-autoscaler-kubernetes"]
    with pytest.raises(ConfigError, match=r"kubernetesVersion: CLUSTER_AUTOSCALER_APP 1\.34\.1 × kubernetesVersion "
                                          r"1\.33 break compatibility row 'cluster-autoscaler-kubernetes': .*built for "
                                          r"Kubernetes 1\.34.*source: kubernetes/autoscaler"):
        plan_modified(tmp_path, "dev", lambda c: c.update({"gtp:kubernetesVersion": "1.33"}))


def test_the_jobset_row_fails_when_jobset_and_kueue_disagree() -> None:
    row = next(r for r in compatibility.ROWS if r.name == "kueue-jobset")
    assert "Kueue v0.19.2 builds against v0.12.0" in row.violated(_values(JOBSET_VERSION="v0.13.0"))
    assert row.violated(_values()) is None


def test_the_trainjob_sets_no_field_kueues_trainer_api_lacks() -> None:
    """Row kueue-trainer: Kueue v0.19.2 updates TrainJobs with Trainer v2.2.1's struct."""
    plan = plan_stack("prod")
    jobs = [r for r in plan.resources if r.type.endswith(":TrainJob")]
    assert jobs and all("runtimePatches" not in r.inputs["spec"] for r in jobs)
    runtimes = [r for r in plan.resources if r.type.endswith(":ClusterTrainingRuntime")]
    assert runtimes and all("envInjection" not in str(r.inputs["spec"].get("mlPolicy")) for r in runtimes)


def _row(name: str) -> compatibility.Row:
    return next(row for row in compatibility.ROWS if row.name == name)


# Per row: a kubernetesVersion inside its range and one outside, with the text the row's failure names.
KUBERNETES_RANGES = {
    "nvidia-device-plugin-kubernetes": ("1.32", "1.9",
                                        r"nvidia-device-plugin-0\.20\.0/Chart\.yaml:7 kubeVersion '>= 1\.10\.0-0'"),
    "dcgm-exporter-kubernetes": ("1.32", "1.18", r"dcgm-exporter-4\.6\.0/Chart\.yaml:5 kubeVersion '>= 1\.19\.0-0'"),
    "prometheus-kubernetes": ("1.25", "1.24", r"charts/alertmanager/Chart\.yaml:12 kubeVersion '>=1\.25\.0-0'"),
    "grafana-kubernetes": ("1.35", "2.0", r"grafana-10\.1\.4/Chart\.yaml:5 kubeVersion '\^1\.8\.0-0'"),
    "keda-chart-kubernetes": ("1.23", "1.22", r"keda-2\.20\.2/Chart\.yaml:7 kubeVersion '>=v1\.23\.0-0'"),
    "keda-kubernetes": ("1.33", "1.32", r"KEDA 2\.20 supports Kubernetes 1\.33–1\.35, the cluster runs 1\.32"),
    "kueue-kubernetes": ("1.29", "1.28", r"Kueue v0\.19\.2 supports Kubernetes >= 1\.29, the cluster runs 1\.28"),
    "trainer-kubernetes": ("1.31", "1.30", r"Kubeflow Trainer v2\.3\.0 supports Kubernetes >= 1\.31"),
    "training-operator-kubernetes": ("1.28", "1.27", r"training-operator v1\.9\.4 supports Kubernetes >= 1\.28"),
    "jobset-kubernetes": ("1.34", "1.33", r"JobSet v0\.12\.0 supports Kubernetes 1\.34–1\.36, the cluster runs 1\.33"),
    "cluster-autoscaler-kubernetes": ("1.34", "1.35", r"built for Kubernetes 1\.34, the cluster runs 1\.35"),
}


@pytest.mark.parametrize("name", sorted(KUBERNETES_RANGES))
def test_each_kubernetes_row_passes_inside_its_range_and_fails_outside(name: str) -> None:
    inside, outside, text = KUBERNETES_RANGES[name]
    row = _row(name)
    assert row.violated(_values(kubernetesVersion=inside)) is None
    assert re.search(text, row.violated(_values(kubernetesVersion=outside)) or "")


def test_keda_rows_also_refuse_a_kubernetes_newer_than_kedas_window() -> None:
    assert "the cluster runs 1.36" in _row("keda-kubernetes").violated(_values(kubernetesVersion="1.36"))
    assert _row("keda-kubernetes").violated(_values(kubernetesVersion="1.35")) is None


def test_every_kubernetes_version_supported_satisfies_the_rows_except_the_documented_ones() -> None:
    """The table against the minors a stack may set: only KEDA 2.20 (tested 1.33-1.35), JobSet v0.12.0 (the last
    three minors at its release, 1.34-1.36) and the autoscaler (its own minor) leave any out."""
    from catalog import versions

    refused = {version: sorted(row.name for row, _ in compatibility.problems(_values(kubernetesVersion=version)))
               for version in versions.SUPPORTED_KUBERNETES_VERSIONS}
    assert refused == {"1.32": ["cluster-autoscaler-kubernetes", "jobset-kubernetes", "keda-kubernetes"],
                       "1.33": ["cluster-autoscaler-kubernetes", "jobset-kubernetes"], "1.34": [],
                       "1.35": ["cluster-autoscaler-kubernetes"]}


def test_a_chart_without_a_declared_range_fails_once_a_bump_declares_one(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _row("efa-device-plugin-kubernetes")
    assert compatibility.chart_kube_versions(versions.EFA_DEVICE_PLUGIN.path) == []
    assert row.violated(_values(kubernetesVersion="1.34")) is None
    monkeypatch.setattr(compatibility, "chart_kube_versions", lambda path: [(f"{path}/Chart.yaml", 5, ">=1.35.0-0")])
    assert "Kubernetes 1.34 is outside chart aws-efa-k8s-device-plugin v0.5.20's declared range" in row.violated(
        _values(kubernetesVersion="1.34"))


@pytest.mark.parametrize(("version", "constraint", "expected"), [
    ("1.34", ">= 1.10.0-0", True), ("1.9", ">= 1.10.0-0", False), ("1.34", ">=v1.23.0-0", True),
    ("1.35", "^1.8.0-0", True), ("2.0", "^1.8.0-0", False), ("0.3", "^0.2.0", False), ("1.30", "~1.30.0", True),
    ("1.31", "~1.30.0", False), ("1.30", ">=1.25.0-0, <1.31.0-0", True), ("1.31", ">=1.25.0-0 <1.31.0-0", False),
    ("1.20", "<1.19 || >=1.20", True), ("1.19", "<1.19 || >=1.20", False),
])
def test_kube_version_constraints_read_as_helm_does(version: str, constraint: str, expected: bool) -> None:
    assert compatibility.satisfies(version, constraint) is expected


def test_a_kubernetes_row_fails_the_plan_naming_both_pins_and_the_source(tmp_path: Path) -> None:
    """dev runs KEDA (autoscaling.mode scaledjob): on 1.32 both the autoscaler and KEDA's window refuse it."""
    with pytest.raises(ConfigError, match=r"kubernetesVersion: KEDA 2\.20\.2 × kubernetesVersion 1\.32 break "
                                          r"compatibility row 'keda-kubernetes': KEDA 2\.20 supports Kubernetes "
                                          r"1\.33–1\.35.*source: keda\.sh/docs/2\.20/operate/cluster/"):
        plan_modified(tmp_path, "dev", lambda c: c.update({"gtp:kubernetesVersion": "1.32"}))


def test_rows_of_components_a_stack_does_not_install_are_not_checked(tmp_path: Path) -> None:
    """prod runs no KEDA: 1.32 is refused by the autoscaler row alone, not by KEDA's."""
    with pytest.raises(ConfigError) as error:
        plan_modified(tmp_path, "prod", lambda c: c.update({"gtp:kubernetesVersion": "1.32"}))
    assert "cluster-autoscaler-kubernetes" in str(error.value) and "keda" not in str(error.value)


# --- GPU stack rows ---------------------------------------------------------------------------------------------

def test_torchs_build_is_what_the_table_records() -> None:
    """TORCH_BUILD against the installed torch's own metadata (the EFA and base-image rows rest on it)."""
    import importlib.metadata

    assert importlib.metadata.version("torch") == versions.TORCH_VERSION
    requires = importlib.metadata.requires("torch") or []
    assert f"nvidia-nccl-cu13=={compatibility.TORCH_BUILD['nccl']}" in " ".join(requires)
    cuda = [r for r in requires if r.startswith("cuda-toolkit[")]
    assert len(cuda) == 1 and re.search(rf"=={re.escape(compatibility.TORCH_BUILD['cuda'])}\.\d+", cuda[0]), cuda


def test_the_efa_row_fails_when_torchs_nccl_leaves_the_plugins_range(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _row("efa-installer-nccl-torch")
    assert row.violated(_values()) is None
    monkeypatch.setitem(compatibility.TORCH_BUILD, "nccl", "2.32.1")
    assert row.violated(_values()) == ("torch 2.13.0's NCCL 2.32.1 is outside aws-ofi-nccl 1.21.1's NCCL "
                                       "2.17.1-2.31.2 (EFA installer 1.50.0)")


def test_the_efa_row_fails_when_the_installers_plugin_record_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(versions, "EFA_INSTALLER", dataclasses.replace(versions.EFA_INSTALLER, aws_ofi_nccl="1.20.0"))
    assert "EFA_INSTALLER records aws-ofi-nccl 1.20.0" in _row("efa-installer-nccl-torch").violated(_values())


def test_the_efa_row_fails_the_plan_of_a_stack_with_efa_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(compatibility.TORCH_BUILD, "nccl", "2.16.0")
    with pytest.raises(ConfigError, match=r"catalog\.versions\.EFA_INSTALLER: EFA_INSTALLER 1\.50\.0 × TORCH_VERSION "
                                          r"2\.13\.0 break compatibility row 'efa-installer-nccl-torch': torch "
                                          r"2\.13\.0's NCCL 2\.16\.0 is outside .*source: catalog/versions\.py"):
        plan_modified(tmp_path, "prod", lambda c: None)


def test_the_base_image_row_fails_on_another_torch_or_cuda() -> None:
    row = _row("torch-cuda-base-image")
    assert row.violated(_values()) is None
    other = versions.PYTORCH_BASE_IMAGE.replace("cuda13.0", "cuda12.8")
    assert row.violated(_values(PYTORCH_BASE_IMAGE=other)) == ("base image tag 2.13.0-cuda12.8-cudnn9-runtime is not "
                                                               "torch 2.13.0-cuda13.0")
    assert "is not torch 2.14.0-cuda13.0" in row.violated(_values(TORCH_VERSION="2.14.0"))


def test_the_dlrover_row_fails_when_the_images_dlrover_is_another_release() -> None:
    row = _row("dlrover-python-controller")
    assert row.violated(_values()) is None
    assert row.violated(_values(DLROVER_PYTHON="0.6.0")) == "the image's dlrover 0.6.0 is not the controller's v0.6.1"


def test_docs_state_the_device_plugins_driver_and_toolkit_minimums() -> None:
    """Row device-plugin-driver and the toolkit's floor: the platform pins neither, the sites must meet them."""
    docs = compatibility.ROOT / "docs"
    toolkit = max((floor for floor in compatibility.FLOORS if floor.component == "NVIDIA Container Toolkit"),
                  key=lambda floor: compatibility.version_tuple(floor.fixed_in[0]))
    edge_text = (docs / "edge.md").read_text()
    edge = edge_text[edge_text.index("## Edge on k3s / Jetson"):]
    swarm = (docs / "swarm.md").read_text()
    for text in ("NVIDIA driver >= 384.81", "toolkit\n  >= 1.7.0 (1.11.0 on Jetson) for device plugin v0.20.0",
                 f"NVIDIA Container Toolkit >= {toolkit.fixed_in[0]} ({toolkit.advisory})"):
        assert text in edge, text
    assert f"NVIDIA Container Toolkit >= {toolkit.fixed_in[0]} ({toolkit.advisory}" in swarm


# --- CVE floors -------------------------------------------------------------------------------------------------

def test_no_pin_is_below_a_floor_unless_accepted() -> None:
    assert compatibility.floor_problems(_values()) == []


@pytest.mark.parametrize("index", range(len(compatibility.FLOORS)))
def test_each_floor_fails_a_pin_below_it_and_passes_one_at_it(index: int) -> None:
    floor = compatibility.FLOORS[index]
    oldest = min(floor.fixed_in, key=compatibility.version_tuple)
    major, minor, patch = compatibility.version_tuple(oldest)
    below = f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.9"
    if floor.pin is None:  # site-provided: docs/edge.md and docs/swarm.md state it (test_docs_state_...)
        assert (compatibility.below_floor(below, floor.fixed_in)
                and not compatibility.below_floor(oldest, floor.fixed_in))
        return
    found = compatibility.floor_problems(_values(**{floor.pin: below}), lambda f: f is floor)
    assert len(found) == 1 and found[0][1].startswith(f"{floor.pin} {below} is below {floor.component}'s floor")
    assert floor.advisory in found[0][1]
    assert compatibility.floor_problems(_values(**{floor.pin: max(floor.fixed_in, key=compatibility.version_tuple)}),
                                        lambda f: f is floor) == []


def test_a_floor_checks_each_release_line_against_its_own_fix() -> None:
    fixed = ("2.17.3", "2.18.3", "2.19.0")
    assert compatibility.below_floor("2.18.2", fixed) and not compatibility.below_floor("2.18.3", fixed)
    assert compatibility.below_floor("2.16.9", fixed) and not compatibility.below_floor("2.20.2", fixed)


def test_a_release_older_than_the_vulnerable_code_is_not_below_the_floor() -> None:
    """dcgm-exporter 4.6.0 (the vendored chart) predates the /debug/pprof handlers CVE-2026-47483 is about."""
    floor = next(f for f in compatibility.FLOORS if "CVE-2026-47483" in f.advisory)
    assert compatibility.pin_values()["DCGM_EXPORTER_APP"] == "4.6.0"
    assert not compatibility.below_floor("4.6.0", floor.fixed_in, floor.introduced)
    assert compatibility.below_floor("4.8.1", floor.fixed_in, floor.introduced)
    assert compatibility.below_floor("4.6.0", floor.fixed_in)  # what the bulletin's "0.0 to 4.8.2" alone would say


def test_the_keda_critical_is_accepted_for_todays_pin_only() -> None:
    floor = next(f for f in compatibility.FLOORS if "CVE-2026-77524" in f.advisory)
    assert set(floor.accepted) == {"2.20.2"} and compatibility.below_floor("2.20.2", floor.fixed_in)
    found = compatibility.floor_problems(_values(KEDA_APP="2.20.1"), lambda f: f is floor)
    assert [f.advisory for f, _ in found] == ["CVE-2026-77524 / GHSA-637c-6jxx-4rwm"]


def test_a_pin_below_a_floor_fails_the_plan_naming_the_pin_and_the_advisory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dev runs KEDA: without the recorded acceptance, today's KEDA fails its plan."""
    index, floor = next((i, f) for i, f in enumerate(compatibility.FLOORS) if "CVE-2026-77524" in f.advisory)
    floors = list(compatibility.FLOORS)
    floors[index] = dataclasses.replace(floor, accepted={})
    monkeypatch.setattr(compatibility, "FLOORS", tuple(floors))
    with pytest.raises(ConfigError, match=r"catalog\.versions\.KEDA_APP: KEDA_APP 2\.20\.2 is below KEDA's floor "
                                          r"2\.21\.0 for CVE-2026-77524 / GHSA-637c-6jxx-4rwm \(critical.*source: "):
        plan_modified(tmp_path, "dev", lambda c: None)


# --- Coverage of catalog/versions.py ----------------------------------------------------------------------------

def test_every_pin_in_versions_has_a_row_or_a_reason() -> None:
    pins = {name for name, value in vars(versions).items()
            if name.isupper() and not name.startswith("_") and name != "VENDOR_DIR"
            and isinstance(value, (str, tuple, dict, versions.HelmChart, versions.EfaInstaller))}
    in_rows = {pin for row in compatibility.ROWS for pin in row.pins}
    assert pins - in_rows - set(compatibility.NO_ROW) == set()
    assert set(compatibility.NO_ROW) & in_rows == set()  # a reason only where no row applies
    assert set(compatibility.NO_ROW) <= pins


def test_every_gpu_stack_pin_has_a_floor_or_says_why_not() -> None:
    gpu_stack = {"NVIDIA_DEVICE_PLUGIN", "DCGM_EXPORTER", "KUEUE_VERSION", "TRAINING_OPERATOR_VERSION",
                 "KUBEFLOW_TRAINER_VERSION", "DLROVER_VERSION", "EFA_INSTALLER", "KEDA"}
    floored = {pin.removesuffix("_APP") for pin in (f.pin for f in compatibility.FLOORS) if pin}
    assert gpu_stack - floored - set(compatibility.NO_ADVISORY) == set()


def test_a_section_that_fails_to_parse_leaves_the_pin_rows_reported(tmp_path: Path) -> None:
    """The rows relating pins (and the autoscaler's) need only `cluster`: a typo in `workloads` does not hide them."""
    def edit(config: dict) -> None:
        config["gtp:kubernetesVersion"] = "1.33"
        next(iter(config["gtp:workloads"].values()))["numNodes"] = "two"

    with pytest.raises(ConfigError) as error:
        plan_modified(tmp_path, "dev", edit)
    assert "numNodes" in str(error.value) and "compatibility row 'cluster-autoscaler-kubernetes'" in str(error.value)
