"""Process-group setup for every launcher the platform uses.

* torchrun / dlrover-run set RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
* Kubeflow PyTorchJob runs one plain ``python -m trainer.train`` per pod with MASTER_ADDR, MASTER_PORT,
  WORLD_SIZE and RANK but no LOCAL_RANK: one process per pod, so LOCAL_RANK is 0.
* No env at all (a laptop): a world of one on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job."""

    rank: int
    """Global rank, 0..world_size-1."""
    local_rank: int
    """Rank on this node (selects the GPU and the metrics port)."""
    world_size: int
    """Number of processes in the job."""
    backend: str
    """Process-group backend in use (nccl or gloo)."""
    device: torch.device
    """Device the model lives on."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (for single-process runs and tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def resolve_backend(requested: str) -> str:
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    return requested


def env_contract(environ: dict[str, str] | None = None) -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from the launcher's env; pure so tests can check every launcher's shape."""
    environ = os.environ if environ is None else environ
    rank = int(environ.get("RANK", "0"))
    world_size = int(environ.get("WORLD_SIZE", "1"))
    # PyTorchJob sets no LOCAL_RANK: one process per pod, so the local rank is 0.
    local_rank = int(environ.get("LOCAL_RANK", "0"))
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK={rank} must be in [0, WORLD_SIZE={world_size})")
    return rank, local_rank, world_size


def init_distributed(requested_backend: str, timeout_s: float = 600.0) -> DistContext:
    """Join (or, alone, create) the default process group and pick the device."""
    rank, local_rank, world_size = env_contract()
    if "MASTER_ADDR" not in os.environ:
        if world_size != 1:
            raise ValueError("WORLD_SIZE > 1 but MASTER_ADDR is unset: launch with torchrun, dlrover-run or a "
                             "PyTorchJob env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK)")
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(free_port())
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world_size))
    backend = resolve_backend(requested_backend)
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise ValueError("--backend nccl needs CUDA, but torch.cuda.is_available() is False; use gloo")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        # cpu:gloo too: dcp.async_save needs a CPU-capable group for its background collectives.
        pg_backend = "cpu:gloo,cuda:nccl"
    else:
        device = torch.device("cpu")
        pg_backend = "gloo"
    dist.init_process_group(backend=pg_backend, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)
    return DistContext(rank=rank, local_rank=local_rank, world_size=world_size, backend=backend, device=device)


def gather_ints(value: int) -> list[int]:
    """Every rank's ``value``, indexed by rank, on every rank (one tiny blocking all-gather of CPU tensors: the
    default group is gloo, or cpu:gloo,cuda:nccl, so gloo carries it). A world of one gets ``[value]``."""
    mine = torch.tensor([value], dtype=torch.int64)
    everyone = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return [int(tensor.item()) for tensor in everyone]


def exit_process(code: int) -> None:
    """Tear down and leave with ``code`` without running interpreter shutdown.

    gloo aborts at interpreter exit in about a third of successful runs ("terminate called without an active
    exception", exit 134) and Kubeflow would mark the pod failed; destroy, flush, ``os._exit`` removes that.
    """
    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception as error:  # teardown must not turn a result into a crash
            print(f"destroy_process_group failed: {error}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
