"""`rendezvous start-up`: can every multi-node job form its rendezvous when its pods start far apart?

The worst start skew the stack allows (`stack_config.derived.startup_bound_seconds`: a node group scaling from its
minimum, a slow image pull) is what the first worker may wait for the last. Per workload kind:
- PyTorchJob with Workers (training-operator v1.9.4): torchrun's c10d rendezvous host is `<job>-worker-0`
  (pkg/controller.v1/pytorch/elastic.go:149-150, unless `rdzvHost`), a headless Service without
  `publishNotReadyAddresses` (pkg/controller.v1/common/service.go:229-233), so the name resolves only once worker-0
  is Ready; each other worker's TCPStore client retries for `read_timeout` (PET_RDZV_CONF from
  `elasticPolicy.rdzvConf`, elastic.go:171-184; default 60 s, torch 2.13 c10d_rendezvous_backend.py:148) and then
  exits, and the operator fails the job when the *sum* of container restarts of its running pods reaches
  `runPolicy.backoffLimit` (pkg/core/job.go:95-132). So `read_timeout` must cover the skew, and one restart of
  every worker (a rendezvous re-formed once) must stay under `backoffLimit`.
- TrainJob: JobSet's headless Service publishes not-ready addresses by default (the vendored JobSet CRD,
  `spec.network.publishNotReadyAddresses`: "Defaults to True"), so the name resolves as soon as the pod has an IP.
- DLRover ElasticJob: the master pod creates its ClusterIP Service (dlrover v0.6.1 dlrover/python/master/
  dist_master.py:67 `_create_master_service_on_k8s`; go/elasticjob/pkg/common/resource.go:165-186, a ClusterIP
  Service resolves whatever its endpoints' readiness) and only then the workers: the rendezvous host exists first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verify.render import ClusterObject
from verify.simulate.model import CheckResult, Finding, Modeled

MODELS = (Modeled("TRAINING_OPERATOR_VERSION", "v1.9.4"), Modeled("DLROVER_VERSION", "v0.6.1"))
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

NAME = "rendezvous start-up"
TORCH_READ_TIMEOUT_DEFAULT = 60


def _conf(policy: Mapping[str, Any]) -> dict[str, str]:
    return {str(entry.get("key")): str(entry.get("value")) for entry in policy.get("rdzvConf") or []}


def _pytorchjob(item: ClusterObject, bound: int, result: CheckResult) -> None:
    spec = item.obj.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs") or {}
    policy = spec.get("elasticPolicy")
    if "Worker" not in replicas or policy is None:
        return
    subject = f"PyTorchJob {item.namespace}/{item.name}"
    workers = int(policy.get("maxReplicas") or replicas["Worker"].get("replicas") or 1)
    host = policy.get("rdzvHost") or f"{item.name}-worker-0"
    try:
        read_timeout = int(_conf(policy).get("read_timeout", TORCH_READ_TIMEOUT_DEFAULT))
    except ValueError:
        read_timeout = TORCH_READ_TIMEOUT_DEFAULT
    result.details.append(f"{subject}: host {host} resolves when Ready; read_timeout {read_timeout} s against a "
                          f"start-up bound of {bound} s; {workers} worker(s)")
    result.record(read_timeout >= bound, None if read_timeout >= bound else Finding(
        subject, f"its workers wait {read_timeout} s for the rendezvous host {host}, which resolves only once "
                 f"worker-0 is Ready (a headless Service without publishNotReadyAddresses), but the stack lets a pod "
                 f"start up to {bound} s after another (a node group scaling up, an image pull): the others exit "
                 "and restart every ~read_timeout until the job's restarts reach backoffLimit",
        f"set elasticPolicy.rdzvConf read_timeout to at least {bound} (workload_kinds/pytorchjob.py "
        "`rendezvous_conf`)"))
    backoff = (spec.get("runPolicy") or {}).get("backoffLimit")
    if backoff is None:
        return
    ok = int(backoff) > workers
    result.record(ok, None if ok else Finding(
        subject, f"runPolicy.backoffLimit {backoff} with {workers} worker(s): training-operator sums the container "
                 "restarts of all running pods, so one restart of each worker (one re-formed rendezvous) fails "
                 "the job",
        "give an elastic job a per-worker budget: backoffLimit × workers (workload_kinds/pytorchjob.py)"))


def check(objects: list[ClusterObject], bound: int | None) -> list[CheckResult]:
    """Every multi-node job of the stack against the stack's start-up bound (None: not known, e.g. a Swarm)."""
    jobs = [item for item in objects if item.source == "stack" and item.kind in ("PyTorchJob", "TrainJob",
                                                                                  "ElasticJob")]
    if not jobs or bound is None:
        return []
    result = CheckResult(NAME)
    for item in jobs:
        if item.kind == "PyTorchJob":
            _pytorchjob(item, bound, result)
        elif item.kind == "TrainJob":
            result.record(True)
            result.details.append(f"TrainJob {item.namespace}/{item.name}: JobSet publishes not-ready addresses "
                                  "(its default): the rendezvous host resolves before it is Ready")
        else:
            result.record(True)
            result.details.append(f"ElasticJob {item.namespace}/{item.name}: DLRover's master creates its Service "
                                  "before the workers")
    return [result]
