"""`swarm`: distributed PyTorch as Docker Swarm services, one task per GPU server (`cluster.mode: swarm`).

The same trainer image and JSON logs as on Kubernetes; `torchrun --nproc-per-node=gpu` on every server with a c10d
rendezvous hosted by the head service (components/swarm_training.py explains the scheme and its limits).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from components.swarm_training import (
    SwarmJobShape,
    SwarmTraining,
    SwarmTrainingArgs,
    head_service_name,
    storage_mount,
    worker_service_name,
)
from components.training_pod import bench_args, trainer_args
from conventions.trainer_cli import checkpoint_dir
from stack_config import Problem, StackConfig, WorkloadConfig
from stack_config.derived import configured_pods
from stack_config.kinds import GeneratedName
from workload_kinds.base import Deployment, SwarmContext, SwarmWorkloadKind


def job_shape(context: SwarmContext) -> SwarmJobShape:
    config = context.config
    workload, storage = context.workload, config.storage
    checkpoints = checkpoint_dir(storage.mount_path, workload.name)
    if workload.entrypoint == "train":
        args = trainer_args(model=workload.model, max_steps=workload.max_steps, batch_size=workload.batch_size,
                            checkpoint_dir=checkpoints, checkpoint_every=workload.checkpoint_every,
                            extra=workload.extra_args, metrics=False)
    else:
        args = bench_args(model=workload.model, steps=workload.max_steps, batch_size=workload.batch_size,
                          sizes=workload.bench_sizes, output=f"{checkpoints}/bench.json")
    elastic = workload.elastic
    swarm = config.cluster.swarm
    assert swarm is not None  # the swarm target requires it
    return SwarmJobShape(
        job_name=workload.name, image=context.image,
        min_nodes=elastic.min_nodes if elastic else workload.num_nodes,
        max_nodes=configured_pods(workload),
        gpus_per_node=context.gpus_per_node, gpu_resource_name=swarm.gpu_resource_name,
        constraints=context.constraints, module=f"trainer.{workload.entrypoint}", trainer_args=args,
        cpu=workload.cpu, memory=workload.memory, shm_size=workload.shm_size, scratch_size=workload.ephemeral_storage,
        storage_mount=storage_mount(storage.kind, job_name=workload.name, mount_path=storage.mount_path,
                                    nfs_server=storage.nfs_server, nfs_path=storage.nfs_path,
                                    nfs_options=storage.nfs_options, host_path=storage.host_path),
        mount_path=storage.mount_path, checkpoint_dir=checkpoints,
        max_restarts=elastic.max_restarts if elastic else 0, restart_attempts=workload.backoff_limit,
        stop_grace_seconds=workload.termination_grace_period_seconds, cpu_stand_in=swarm.cpu_stand_in,
    )


class SwarmKind(SwarmWorkloadKind):
    name: ClassVar[str] = "swarm"
    entrypoints: ClassVar[frozenset[str]] = frozenset({"train", "bench"})
    # The services run `torchrun -m trainer.<entrypoint>` through a shell wrapper of our image.
    own_image: ClassVar[bool] = False
    # Swarm refuses a service, network, secret or volume name over 63 characters (swarmkit manager/controlapi/
    # common.go:68-70 `validateAnnotations`); a worker task's hostname `<job>-worker-<slot>` (`service_spec`) is the
    # longest name derived from the job's, and a hostname the rendezvous resolves is a DNS label.
    generated_names: ClassVar[tuple[GeneratedName, ...]] = (
        GeneratedName(worker_service_name("{job}") + "-{index}", "the last worker task's hostname",
                      "components/swarm_training.py service_spec; swarmkit manager/controlapi/common.go:68"),
    )

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        if workload.backoff_limit < 1:
            # backoffLimit is each task's restart_policy.max_attempts (components/swarm_training.py service_spec),
            # and swarmkit ignores a max_attempts of 0: "Maximum attempts to restart a given container before
            # giving up (default value is 0, which is ignored)" (the Docker provider's ServiceTaskSpecRestartPolicy),
            # so 0 would restart a failing task forever instead of never.
            yield Problem(f"{path}.backoffLimit", f"{workload.backoff_limit} would be each Swarm task's restart "
                          "policy max_attempts, which swarmkit reads as no limit at all (0 is ignored): a failing task "
                          "would restart forever; allowed: 1..100 restarts per task")

    def deploy(self, context: SwarmContext) -> Deployment:
        config = context.config
        swarm = config.cluster.swarm
        assert swarm is not None
        shape = job_shape(context)
        SwarmTraining(context.resource_name("job"), SwarmTrainingArgs(
            provider=context.provider, shape=shape, secrets=context.secrets, registry_auth=context.registry_auth,
            converge_timeout_seconds=swarm.converge_timeout_seconds, encrypt_overlay=swarm.encrypt_overlay),
            opts=context.opts("job"))
        head, worker = head_service_name(shape.job_name), worker_service_name(shape.job_name)
        return Deployment(watch={
            "services": f"docker service ls --filter label=gtp.dev/job={shape.job_name}",
            "tasks": f"docker service ps --no-trunc {head} {worker}",
            "logs": f"docker service logs --follow --raw {head}",
        })
