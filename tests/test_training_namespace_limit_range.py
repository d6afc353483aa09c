"""The training namespace's LimitRange must be one the API server accepts: no default above its max
(k8s.io/kubernetes@v1.34.12 pkg/apis/core/validation/validation.go:7294/:7306). Found by the real control plane of
`make cluster-test` on stack dev (largest pod 900m CPU, default 1)."""

from components.training_namespace import QuotaSize, limit_range_spec
from conventions.quantities import cpu_cores, quantity_gib


def _size(cpu: str, memory: str, disk: str) -> QuotaSize:
    return QuotaSize(num_pods=1, gpu_resource="nvidia.com/gpu", gpus_per_pod=1, efa_per_pod=0, cpu=cpu,
                     memory=memory, ephemeral_storage=disk)


def test_defaults_never_exceed_max():
    item = limit_range_spec([_size("900m", "1Gi", "20Gi")])["limits"][0]
    assert item["max"] == {"cpu": "900m", "memory": "1Gi", "ephemeral-storage": "20Gi"}
    for field in ("default", "defaultRequest"):
        assert cpu_cores(item[field]["cpu"]) <= cpu_cores(item["max"]["cpu"]), field
        assert quantity_gib(item[field]["memory"]) <= quantity_gib(item["max"]["memory"]), field
    assert item["default"] == {"cpu": "900m", "memory": "1Gi", "ephemeral-storage": "2Gi"}


def test_defaults_stay_when_max_is_larger():
    item = limit_range_spec([_size("8", "32Gi", "100Gi")])["limits"][0]
    assert item["default"] == item["defaultRequest"] == {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"}


def test_the_ceiling_holds_dlrovers_job_master_whatever_the_workload_asks():
    """DLRover's controller sizes its job master itself (1 cpu, 2Gi, 2Gi: components/training_namespace.py
    DLROVER_MASTER): a per-container max below that would make the API server refuse the master pod of a small
    ElasticJob (found by planting memory 1Gi into edge: the simulation's `admitted` refused the master)."""
    small = QuotaSize(num_pods=1, gpu_resource="nvidia.com/gpu", gpus_per_pod=1, efa_per_pod=0, cpu="500m",
                      memory="1Gi", ephemeral_storage="1Gi", dlrover_master=True)
    item = limit_range_spec([small])["limits"][0]
    assert item["max"] == {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"}
    # without a master the ceiling stays the largest training pod
    assert limit_range_spec([_size("500m", "1Gi", "1Gi")])["limits"][0]["max"] == {
        "cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}
