"""The compatibility table (catalog/compatibility.py): every row passes for today's pins, a violated row and a
bump not re-verified fail the plan naming both pins and the source."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import compatibility
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
    found = compatibility.problems(_values(kubernetesVersion="1.33"))
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
