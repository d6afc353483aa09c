"""The training loop: wrap the model, resume, step, checkpoint, stop cleanly on preemption."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from trainer.checkpoint import CheckpointEntry, CheckpointManager, TrainingProgress
from trainer.config import TrainConfig, debug_env
from trainer.data import SampleStream, append_sample_log, global_batch, micro_batch_slice
from trainer.distributed import DistContext, gather_ints
from trainer.models import compute_loss, cosine_schedule, state_digest
from trainer.telemetry import Metrics, ProgressBar, base_fields, emit, gpu_fields
from trainer.watchdog import StepWatchdog

STOP_CHECK_CALIBRATION_STEPS = 5
STOP_CHECK_PERIOD_S = 0.5
STOP_CHECK_MAX_EVERY = 50
NO_CHECKPOINT = -1
"""A rank's newest complete step when it sees none (below every real step, so the agreed minimum is "none")."""


class StopSignals:
    """Records SIGTERM/SIGINT; the loop stops at the next step boundary that all ranks agree on."""

    def __init__(self) -> None:
        self.received = 0

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        # Only a flag: checkpointing needs collectives, which must run on every rank at the same step.
        self.received = max(self.received, int(signum))


def seed_rank(seed: int, rank: int) -> None:
    """Per-rank streams (dropout, augmentation) differ across ranks but repeat across attempts."""
    torch.manual_seed(seed * 1000 + rank)
    random.seed(seed * 1000 + rank)
    try:
        import numpy

        numpy.random.seed((seed * 1000 + rank) % 2**32)
    except ImportError:
        pass


def set_deterministic(enabled: bool) -> None:
    if not enabled:
        return
    # cuBLAS needs a fixed workspace for deterministic GEMMs (CUDA docs, "Reproducibility").
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False


def wrap_model(model: nn.Module, config: TrainConfig, ctx: DistContext) -> nn.Module:
    model.to(ctx.device)
    if config.compile:
        # In-place compile keeps state-dict keys free of the "_orig_mod." prefix, so checkpoints stay portable.
        model.compile()
    if config.fsdp:
        from torch.distributed.fsdp import fully_shard

        for child in getattr(model, "blocks", []):
            fully_shard(child)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)


class Trainer:
    """Owns the wrapped model, optimizer, schedule, data stream and checkpoints for one attempt."""

    def __init__(self, config: TrainConfig, ctx: DistContext, model: nn.Module, dataset, signals: StopSignals) -> None:
        self.config = config
        self.ctx = ctx
        self.dataset = dataset
        self.signals = signals
        self.stream = SampleStream(len(dataset), config.seed)
        self.global_batch = global_batch(ctx.world_size, config.batch_size, config.grad_accum_steps)
        self.model = wrap_model(model, config, ctx)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, cosine_schedule(config.warmup_steps, config.max_steps))
        self.progress = TrainingProgress()
        self.resumed_from: int | None = None
        self.checkpoints = (CheckpointManager(config.checkpoint_dir, ctx.rank, ctx.world_size,
                                              config.keep_checkpoints, config.async_checkpoint)
                            if config.checkpoint_dir else None)
        self.metrics = Metrics(None if config.metrics_port is None else config.metrics_port + ctx.local_rank, ctx.rank)
        self.sample_log = debug_env("TRAINER_DEBUG_SAMPLE_LOG")
        self.step_sleep_s = float(debug_env("TRAINER_DEBUG_STEP_SLEEP_S") or 0)
        self.checkpoint_blocked_s = 0.0
        self.watchdog = StepWatchdog(config.watchdog_timeout, ctx.rank)

    def resume(self) -> None:
        if self.checkpoints is None:
            return
        entry = self._agreed_checkpoint()
        if entry is None:
            return
        self.progress = self.checkpoints.load(entry, self.model, self.optimizer, self.scheduler)
        self.resumed_from = entry.step
        self.metrics.observe_checkpoint(entry.step)
        emit({"event": "resumed", **base_fields(self.ctx.rank), "step": self.progress.step,
              "global_sample_index": self.progress.global_sample_index, "checkpoint": str(entry.path),
              "world_size": self.ctx.world_size})

    def _agreed_checkpoint(self) -> CheckpointEntry | None:
        """The checkpoint every rank loads (the same one on all), or None: every rank starts fresh.

        Ranks need not see the same directory: per-pod scratch (``storage.kind: none``), or a shared file system
        whose view lags on one node (NFS attribute caching). dcp.load is a collective, so ranks that picked
        different steps, or one that found none, would hang until the collective timeout or mix states. So: gather
        each rank's newest complete step (-1 for none); the oldest of them is the newest step all ranks may have;
        it is loaded only if every rank has it complete in its own view, else all start fresh (a loss of work, never
        a bad state or a hang). Any disagreement is logged once, by rank 0, as ``checkpoint_views_differ``.
        """
        complete = self.checkpoints.complete_entries()
        newest_by_rank = gather_ints(max(complete, default=NO_CHECKPOINT))
        step = min(newest_by_rank)
        if len(set(newest_by_rank)) == 1:
            return complete.get(step)  # one view everywhere: no checkpoint, or the same newest step on every rank
        # Every rank decides from the same gathered list, so every rank takes (or skips) this collective.
        has_step_by_rank = (gather_ints(int(step in complete)) if step != NO_CHECKPOINT
                            else [0] * self.ctx.world_size)
        chosen = complete[step] if all(has_step_by_rank) else None
        if self.ctx.is_main:
            emit({"event": "checkpoint_views_differ", **base_fields(self.ctx.rank),
                  "checkpoint_dir": str(self.checkpoints.directory),
                  "newest_complete_step_by_rank": [None if seen == NO_CHECKPOINT else seen for seen in newest_by_rank],
                  "candidate_step": None if step == NO_CHECKPOINT else step,
                  "has_candidate_by_rank": [bool(has) for has in has_step_by_rank],
                  "chosen_step": None if chosen is None else chosen.step,
                  "action": "resume" if chosen is not None else "fresh_start"})
        return chosen

    def _autocast(self):
        # bf16 autocast only on GPU: CPU autocast would change numerics (and bit-exactness) for no speed gain.
        if self.ctx.device.type != "cuda":
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=torch.bfloat16)

    def _no_grad_sync(self, last_micro_step: bool):
        if last_micro_step:
            return contextlib.nullcontext()
        if self.config.fsdp:
            self.model.set_requires_gradient_sync(False)
            return contextlib.nullcontext()
        return self.model.no_sync()

    def train_step(self) -> torch.Tensor:
        config, ctx = self.config, self.ctx
        total_loss = torch.zeros((), device=ctx.device)
        for micro_step in range(config.grad_accum_steps):
            last = micro_step == config.grad_accum_steps - 1
            if config.fsdp and last:
                self.model.set_requires_gradient_sync(True)
            piece = micro_batch_slice(self.progress.global_sample_index, micro_step, ctx.rank, ctx.world_size,
                                      config.batch_size)
            if self.sample_log:
                append_sample_log(self.sample_log, ctx.rank, self.progress.step + 1, piece.start, piece.count)
            inputs, targets = self.dataset.batch(self.stream.dataset_indices(piece.start, piece.count))
            inputs = inputs.to(ctx.device, non_blocking=True)
            targets = targets.to(ctx.device, non_blocking=True)
            with self._no_grad_sync(last):
                with self._autocast():
                    loss = compute_loss(self.model(inputs), targets) / config.grad_accum_steps
                loss.backward()
            total_loss += loss.detach()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.progress.step += 1
        self.progress.global_sample_index += self.global_batch
        return total_loss

    def _save(self, blocking: bool) -> None:
        if self.checkpoints is None:
            return
        with self.watchdog.paused():  # a slow save is not a hang (trainer/watchdog.py)
            self._save_now(blocking)

    def _save_now(self, blocking: bool) -> None:
        started = time.perf_counter()
        staging_s = 0.0
        if self.checkpoints.last_started_step == self.progress.step:
            if blocking:
                self.checkpoints.wait()
        else:
            self.checkpoints.save(self.model, self.optimizer, self.scheduler, self.progress, blocking=blocking)
            staging_s = self.checkpoints.last_staging_s
        blocked_s = time.perf_counter() - started
        self.checkpoint_blocked_s += blocked_s
        # staging_ms: the part of blocked_ms spent copying the state into the reused staging buffers (an async
        # save's floor); the rest is waiting for the previous save, the barrier and handing off to the writer.
        emit({"event": "checkpoint", **base_fields(self.ctx.rank), "step": self.progress.step,
              "blocking": blocking or not self.config.async_checkpoint, "blocked_ms": round(blocked_s * 1000, 3),
              "staging_ms": round(staging_s * 1000, 3),
              "staging_share": round(staging_s / blocked_s, 3) if blocked_s > 0 else 0.0,
              "blocked_ms_total": round(self.checkpoint_blocked_s * 1000, 3)})
        self.metrics.observe_checkpoint(self.checkpoints.last_complete_step)

    def train(self) -> int:
        """Run to ``max_steps``; returns the signal number that stopped the run, or 0."""
        config, ctx = self.config, self.ctx
        bar = ProgressBar(config.max_steps, enabled=ctx.is_main)
        stop_flag = torch.zeros(1, dtype=torch.int32)
        # Every rank must stop after the same step (a rank stopping alone would hang the others' collectives), so
        # the stop decision is an all-reduce, launched async at the step start and overlapped with the step. On gloo
        # it still cost ~5% of a 10 ms CPU step, so after a calibration window it runs only every
        # ``stop_check_every`` steps, chosen so that a SIGTERM is acted on within about STOP_CHECK_PERIOD_S.
        stop_check_every = 1
        calibration_start = (self.progress.step, time.perf_counter())
        self.watchdog.start()
        while self.progress.step < config.max_steps:
            started = time.perf_counter()
            check_stop = self.progress.step % stop_check_every == 0
            if check_stop:
                stop_flag.fill_(self.signals.received)
                stop_work = dist.all_reduce(stop_flag, op=dist.ReduceOp.MAX, async_op=True)
            loss = self.train_step()
            if self.step_sleep_s:
                time.sleep(self.step_sleep_s)
            if check_stop:
                stop_work.wait()
            if self.progress.step - calibration_start[0] == STOP_CHECK_CALIBRATION_STEPS:
                stop_check_every = self._agree_stop_check_every(
                    (time.perf_counter() - calibration_start[1]) / STOP_CHECK_CALIBRATION_STEPS)
            step_time = time.perf_counter() - started
            step = self.progress.step
            self.watchdog.beat(step)
            samples = config.batch_size * config.grad_accum_steps
            self.metrics.observe_step(step, step_time, samples)
            if step % config.log_every == 0 or step == config.max_steps:
                loss_value = loss.item()
                emit({"event": "step", **base_fields(ctx.rank), "time": round(time.time(), 6), "step": step,
                      "loss": round(loss_value, 6), "lr": self.scheduler.get_last_lr()[0],
                      "step_time_ms": round(step_time * 1000, 3),
                      "samples_per_s": round(samples / step_time, 2),
                      "global_samples_per_s": round(self.global_batch / step_time, 2),
                      "epoch": self.progress.global_sample_index // len(self.dataset),
                      "global_sample_index": self.progress.global_sample_index, **gpu_fields(ctx.device)})
                bar.update(step, loss_value)
            if check_stop and int(stop_flag.item()):
                self._save(blocking=True)
                self._close_checkpoints()
                return int(stop_flag.item())
            if config.checkpoint_every and step % config.checkpoint_every == 0 and step < config.max_steps:
                self._save(blocking=False)
        self._save(blocking=True)
        self._close_checkpoints()
        return 0

    def _close_checkpoints(self) -> None:
        """After the last (blocking) save: free the async saves' staging buffers."""
        if self.checkpoints is not None:
            self.checkpoints.close()

    def _agree_stop_check_every(self, mean_step_s: float) -> int:
        """One interval for all ranks (from the slowest rank's step time), or they would check at different steps."""
        slowest = torch.tensor([mean_step_s], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return max(1, min(STOP_CHECK_MAX_EVERY, int(STOP_CHECK_PERIOD_S / max(slowest.item(), 1e-6))))

    def param_digest(self) -> str | None:
        """Digest of the full, unsharded model state (gathered on every rank for FSDP; rank 0 returns it)."""
        state = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return state_digest(state) if self.ctx.is_main else None
