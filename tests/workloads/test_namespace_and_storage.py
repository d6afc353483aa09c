"""Namespace guard rails and storage specs as pure data."""

from __future__ import annotations

from components.shared_storage import claim_spec, ingress_rules, persistent_volume_spec
from components.training_namespace import QuotaSize, limit_range_spec, namespace_labels, network_policies, quota_hard


def test_quota_sized_from_the_workload():
    hard = quota_hard([QuotaSize(num_pods=4, gpu_resource="nvidia.com/gpu", gpus_per_pod=8, efa_per_pod=32,
                                 cpu="180", memory="1800Gi", ephemeral_storage="20Gi")])
    assert hard["requests.nvidia.com/gpu"] == "32"
    assert hard["requests.vpc.amazonaws.com/efa"] == "128"
    assert hard["requests.cpu"] == hard["limits.cpu"] == "720"
    assert hard["pods"] == "4"


def test_quota_of_a_shared_gpu_stack_forbids_whole_gpus_and_counts_dlrover_master():
    hard = quota_hard([QuotaSize(num_pods=3, gpu_resource="nvidia.com/gpu.shared", gpus_per_pod=1, efa_per_pod=0,
                                 cpu="4", memory="8Gi", ephemeral_storage="20Gi", dlrover_master=True)])
    assert hard["requests.nvidia.com/gpu"] == "0"
    assert hard["requests.nvidia.com/gpu.shared"] == "3"
    assert hard["pods"] == "4" and hard["requests.cpu"] == "13" and hard["requests.memory"] == "26Gi"
    assert "requests.vpc.amazonaws.com/efa" not in hard


def test_pod_security_labels_warn_and_audit_restricted():
    labels = namespace_labels("baseline")
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"


def test_network_policies_default_deny_dns_and_same_job():
    policies = network_policies(jobs=[("training.kubeflow.org/job-name", "gpt"),
                                      ("jobset.sigs.k8s.io/jobset-name", "tune")],
                                metrics_namespace="gpu-metrics", num_metrics_ports=8, api_server_egress=False)
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert {"protocol": "UDP", "port": 53} in policies["dns"]["egress"][0]["ports"]
    job = {"matchLabels": {"training.kubeflow.org/job-name": "gpt"}}
    assert policies["same-job-gpt"]["ingress"] == [{"from": [{"podSelector": job}]}]
    assert "ports" not in policies["same-job-gpt"]["egress"][0]  # NCCL uses ephemeral ports
    # one policy per workload: a job's pods talk only to their own job's
    assert policies["same-job-tune"]["podSelector"] == {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "tune"}}
    assert policies["metrics"]["ingress"][0]["ports"][0]["endPort"] == 9464 + 7
    ports = [p["port"] for p in policies["aws-egress"]["egress"][0]["ports"]]
    assert ports == [443]


def test_limit_range_ceiling_is_the_largest_training_pod():
    def size(cpu: str, memory: str, scratch: str) -> QuotaSize:
        return QuotaSize(num_pods=1, gpu_resource="nvidia.com/gpu", gpus_per_pod=1, efa_per_pod=0, cpu=cpu,
                         memory=memory, ephemeral_storage=scratch)

    spec = limit_range_spec([size("8", "64Gi", "20Gi"), size("12000m", "32Gi", "100Gi")])
    assert spec["limits"][0]["max"] == {"cpu": "12000m", "memory": "64Gi", "ephemeral-storage": "100Gi"}


def test_storage_ports_and_volume():
    assert ingress_rules("efs") == [(2049, 2049)]
    assert ingress_rules("fsx-lustre") == [(988, 988), (1018, 1023)]
    pv = persistent_volume_spec("fsx-lustre", size_gib=4800, storage_class="sc", volume_handle="fs-1",
                                volume_attributes={"dnsname": "d", "mountname": "m"})
    assert pv["accessModes"] == ["ReadWriteMany"] and pv["csi"]["driver"] == "fsx.csi.aws.com"
    assert pv["persistentVolumeReclaimPolicy"] == "Retain"
    assert claim_spec(size_gib=100, storage_class="sc", volume_name="pv")["volumeName"] == "pv"
