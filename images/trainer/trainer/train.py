"""Train a model: build, train, close.

Local, 2 CPU processes::

    torchrun --standalone --nproc-per-node 2 -m trainer.train --model cnn --max-steps 50 --checkpoint-dir /tmp/ck

Elastic (1 to 4 nodes, c10d rendezvous; DLRover's ``dlrover-run`` takes the same arguments)::

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes 1:4 --nproc-per-node 8 --max-restarts 3 \\
        --rdzv-backend c10d --rdzv-endpoint $HEAD:29400 --rdzv-id job1 -m trainer.train --checkpoint-dir /ckpt

Kubeflow PyTorchJob: each pod runs ``python -m trainer.train ...`` with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK.

Exit codes: 0 done, 2 permanent error (flags, data, weights), 3 the hang watchdog ended a stalled run (no step for
--watchdog-timeout seconds; trainer/watchdog.py), 143/130 stopped by SIGTERM/SIGINT after the checkpoint
completed, 1 anything else.
"""

from __future__ import annotations

import json
import sys
import traceback

import torch.distributed as dist

from trainer.config import PermanentError, parse_config
from trainer.data import build_dataset
from trainer.distributed import exit_process, init_distributed
from trainer.loop import StopSignals, Trainer, seed_rank, set_deterministic
from trainer.models import build_model, load_init_weights
from trainer.telemetry import base_fields, emit

EXIT_PERMANENT = 2


def main(argv: list[str] | None = None) -> int:
    signals = StopSignals()
    signals.install()  # before the slow parts, so a preemption during setup is not lost
    try:
        config = parse_config(argv)
        # Data and weights are validated before joining the group: a bad path fails fast on every rank, instead of
        # one rank exiting while the others wait in a collective.
        dataset = build_dataset(config)
        model = build_model(config)
        if config.init_weights:
            load_init_weights(model, config.init_weights)
        set_deterministic(config.deterministic)
        ctx = init_distributed(config.backend)
    except (PermanentError, ValueError) as error:
        print(f"trainer: error: {error}", file=sys.stderr)
        emit({"event": "error", "kind": "permanent", "message": str(error)})
        return EXIT_PERMANENT
    seed_rank(config.seed, ctx.rank)
    trainer = Trainer(config, ctx, model, dataset, signals)
    trainer.resume()
    stopped_by = trainer.train()
    trainer.watchdog.stop()
    if stopped_by:
        emit({"event": "preempted", **base_fields(ctx.rank), "step": trainer.progress.step, "signal": stopped_by,
              "checkpoint_step": trainer.checkpoints.last_complete_step if trainer.checkpoints else None})
        return 128 + stopped_by
    digest = trainer.param_digest()
    # Every rank has logged its last line before rank 0 prints "done", so "done" is the job's last stdout line.
    dist.barrier()
    if ctx.is_main:
        emit({"event": "done", "step": trainer.progress.step, "param_digest": digest, **base_fields(ctx.rank),
              "world_size": ctx.world_size, "resumed_from": trainer.resumed_from})
    return 0


def run() -> None:
    try:
        code = main()
    except SystemExit as exit_request:  # argparse: --help (0) and bad flags (2)
        code = exit_request.code if isinstance(exit_request.code, int) else EXIT_PERMANENT
    except BaseException:
        traceback.print_exc()
        sys.stderr.write(json.dumps({"event": "error", "kind": "crash"}) + "\n")
        code = 1
    exit_process(code)


if __name__ == "__main__":
    run()
