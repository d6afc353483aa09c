"""DCP checkpoints that lose nothing.

Layout: ``DIR/step-N/`` holds the DCP shards (``__R_0.distcp``) and ``.metadata``; ``DIR/step-N/.complete``
(JSON) is written last, atomically (tmp + fsync + ``os.replace``), by rank 0 once every rank's shards are written.
Only a step dir with that marker counts: a crash at any moment leaves either the previous complete checkpoint or
the new one, never a half-written one that resume would pick. Old checkpoints are pruned only after the newer
marker exists.

Saved state: model and optimizer (resharded by DCP on a new world size), LR scheduler, step, the global sample
index (data position) and every rank's RNG states (torch, numpy, python ``random``).
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import shutil
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainer.config import debug_env

MARKER_NAME = ".complete"
STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class CheckpointEntry:
    step: int
    path: Path
    complete: bool


def scan(directory: str | os.PathLike) -> list[CheckpointEntry]:
    """Every ``step-N`` dir under ``directory``, oldest first; ``complete`` when its marker exists."""
    root = Path(directory)
    if not root.is_dir():
        return []
    entries = []
    for child in root.iterdir():
        match = STEP_DIR.match(child.name)
        if match and child.is_dir():
            entries.append(CheckpointEntry(int(match.group(1)), child, (child / MARKER_NAME).is_file()))
    return sorted(entries, key=lambda entry: entry.step)


def latest_complete(entries: list[CheckpointEntry]) -> CheckpointEntry | None:
    complete = [entry for entry in entries if entry.complete]
    return complete[-1] if complete else None


def plan_prune(entries: list[CheckpointEntry], keep: int) -> list[CheckpointEntry]:
    """What to delete once the newest marker exists: complete ones beyond the newest ``keep``, and incomplete
    leftovers older than the newest complete one (a crashed save). Incomplete dirs newer than it are left alone:
    a save may still be writing there."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1 so the newest complete checkpoint survives, got {keep}")
    newest = latest_complete(entries)
    if newest is None:
        return []
    complete = [entry for entry in entries if entry.complete]
    doomed = complete[:-keep]
    doomed += [entry for entry in entries if not entry.complete and entry.step < newest.step]
    return sorted(doomed, key=lambda entry: entry.step)


def write_marker(step_dir: Path, payload: dict) -> None:
    """Atomic: readers see no marker or a whole one, even across a power cut (fsync file, replace, fsync dir)."""
    temporary = step_dir / f"{MARKER_NAME}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, step_dir / MARKER_NAME)
    directory_fd = os.open(step_dir, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def capture_rng() -> bytes:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    if "numpy" in sys.modules:
        state["numpy"] = sys.modules["numpy"].random.get_state()
    # One opaque blob per rank: DCP would otherwise flatten it and de-duplicate keys across ranks.
    return pickle.dumps(state)


def restore_rng(blob: bytes) -> None:
    state = pickle.loads(blob)
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
    if "numpy" in state and "numpy" in sys.modules:
        sys.modules["numpy"].random.set_state(state["numpy"])


@dataclass
class TrainingProgress:
    """What the loop needs besides weights: restored on resume, saved in every checkpoint."""

    step: int = 0
    """Optimizer steps completed."""
    global_sample_index: int = 0
    """Samples the whole job has consumed from the sample stream (the data position)."""


class ReusedStager(DefaultStager):
    """One stager for every async save of a run, so the staging copies land in the same host buffers each time.

    dcp.async_save builds a throwaway DefaultStager per call when given none (torch 2.13
    torch/distributed/checkpoint/state_dict_saver.py `async_save`: ``owned_async_stager``), so every save stages
    into a fresh host copy of the whole state, pageable, with blocking copies. DefaultStager's StateDictStager caches
    one staged storage per live storage (_state_dict_stager.py ``_stage_untyped_storage``: a cached storage is
    refilled with ``copy_``), and parameters and optimizer moments keep their storages across steps, so from the
    second save on staging is the copy alone. On a GPU the buffers are pinned (pinning is what costs; pinned
    device-to-host copies are the fast ones) and the copies non-blocking, with one synchronize at the end. On a CPU
    host the gain is small: glibc hands a freed block of the same size back, and the memcpy is most of an async
    save's block (benchmarks/bench_checkpoint.py prints that share). The price: one host copy of the rank's state
    stays allocated between saves, where each save needed one anyway. Staging stays synchronous
    (``use_async_staging=False``): training mutates the live tensors right after async_save returns. The caller
    owns it (async_save closes only stagers it made): CheckpointManager.close releases the buffers.
    ``last_staging_s``: how long the latest stage() took, the copy's share of the time a save blocks."""

    def __init__(self) -> None:
        on_gpu = torch.cuda.is_available()
        super().__init__(StagingOptions(use_pinned_memory=on_gpu, use_shared_memory=False, use_async_staging=False,
                                        use_non_blocking_copy=on_gpu))
        self.last_staging_s = 0.0

    def stage(self, state_dict, **kwargs):
        started = time.perf_counter()
        try:
            return super().stage(state_dict, **kwargs)
        finally:
            self.last_staging_s = time.perf_counter() - started


class CheckpointManager:
    """Saves and restores DCP checkpoints; periodic saves may be async (one in flight at most)."""

    def __init__(self, directory: str, rank: int, world_size: int, keep: int, use_async: bool) -> None:
        self.directory = Path(directory)
        self.rank = rank
        self.world_size = world_size
        self.keep = keep
        self.use_async = use_async
        self.last_complete_step: int | None = None
        self.last_started_step: int | None = None
        """Step of the newest save begun (complete or in flight): a second save of the same step is skipped."""
        self._in_flight: Future | None = None
        self._finalized = threading.Event()
        self._finalize_error: BaseException | None = None
        self._stager = ReusedStager() if use_async else None
        self.last_staging_s = 0.0
        """Seconds the latest save spent copying the state into the staging buffers (0 for a blocking save)."""
        if rank == 0:
            self.directory.mkdir(parents=True, exist_ok=True)
        # A dedicated gloo group: async_save runs its collectives on a background thread, and sharing the default
        # group with the training loop's collectives would interleave them.
        self.group = dist.new_group(backend="gloo")
        dist.barrier(group=self.group)

    # ---- save ---------------------------------------------------------------------------------------------
    def _state_dict(self, model, optimizer, scheduler, progress: TrainingProgress) -> dict:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        return {
            "model": model_state,
            "optimizer": optimizer_state,
            "trainer": {"step": progress.step, "global_sample_index": progress.global_sample_index,
                        "world_size": self.world_size, "scheduler": pickle.dumps(scheduler.state_dict())},
            f"rng_rank{self.rank}": capture_rng(),
        }

    def save(self, model, optimizer, scheduler, progress: TrainingProgress, blocking: bool) -> float:
        """Save ``progress.step``; returns seconds the caller was blocked. ``blocking=False`` uses async_save."""
        started = time.perf_counter()
        self.wait()
        step_dir = self.directory / f"step-{progress.step}"
        if self.rank == 0 and step_dir.exists():
            # Leftover of a save that crashed before its marker (or an older attempt): start clean so no stale
            # shard of another world size sits next to the new metadata.
            shutil.rmtree(step_dir)
        dist.barrier(group=self.group)
        state = self._state_dict(model, optimizer, scheduler, progress)
        marker = {"step": progress.step, "global_sample_index": progress.global_sample_index,
                  "world_size": self.world_size, "format": "torch.distributed.checkpoint"}
        self._finalized.clear()
        self._finalize_error = None
        self.last_started_step = progress.step
        self.last_staging_s = 0.0
        if blocking or self._stager is None:
            dcp.save(state, checkpoint_id=str(step_dir), process_group=self.group)
            # dcp.save returns on rank 0 only after gathering every rank's write result, and the barrier makes
            # the other ranks wait for the marker too, so nobody races ahead to prune or exit.
            dist.barrier(group=self.group)
            self._finalize(step_dir, marker)
            dist.barrier(group=self.group)
        else:
            # async_save stages a CPU copy before returning, so training may mutate the live tensors right away.
            # The previous upload is done (self.wait() above), so its staging buffers are free to be refilled.
            future = dcp.async_save(state, checkpoint_id=str(step_dir), process_group=self.group,
                                    async_stager=self._stager)
            self.last_staging_s = self._stager.last_staging_s
            future.add_done_callback(lambda done: self._on_async_done(done, step_dir, marker))
            self._in_flight = future
        return time.perf_counter() - started

    def _on_async_done(self, future: Future, step_dir: Path, marker: dict) -> None:
        try:
            future.result()
            # Every rank's future completes only after the coordinator gathered all write results and wrote the
            # metadata, so rank 0 reaching here means every shard is on disk.
            self._finalize(step_dir, marker)
        except BaseException as error:  # surfaced by wait() on the main thread
            self._finalize_error = error
        finally:
            self._finalized.set()

    def _finalize(self, step_dir: Path, marker: dict) -> None:
        if self.rank == 0:
            if debug_env("TRAINER_FAULT_INJECT") == f"crash_before_marker:{marker['step']}":
                print(json.dumps({"event": "fault_inject", "what": "crash_before_marker", "step": marker["step"]}),
                      flush=True)
                os._exit(1)
            write_marker(step_dir, {**marker, "time": time.time()})
            for entry in plan_prune(scan(self.directory), self.keep):
                shutil.rmtree(entry.path, ignore_errors=True)
        self.last_complete_step = marker["step"]

    def wait(self) -> None:
        """Block until the in-flight async save (if any) is complete, marker included."""
        if self._in_flight is None:
            return
        future, self._in_flight = self._in_flight, None
        future.result()
        self._finalized.wait()
        if self._finalize_error is not None:
            raise RuntimeError(f"async checkpoint failed: {self._finalize_error}") from self._finalize_error

    def close(self) -> None:
        """Wait for the save in flight, then free the staging buffers (pinned memory on a GPU)."""
        try:
            self.wait()
        finally:
            if self._stager is not None:
                self._stager.close()
                self._stager = None

    # ---- load ---------------------------------------------------------------------------------------------
    def complete_entries(self) -> dict[int, CheckpointEntry]:
        """This rank's view: the complete checkpoints by step. Ranks may see different sets (per-pod scratch, a
        lagging shared file system), so the loop agrees on one step before loading (Trainer.resume)."""
        return {entry.step: entry for entry in scan(self.directory) if entry.complete}

    def load(self, entry: CheckpointEntry, model, optimizer, scheduler) -> TrainingProgress:
        """Restore model, optimizer, scheduler, progress and (same rank present in the checkpoint) RNG state."""
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state,
                 "trainer": {"step": 0, "global_sample_index": 0, "world_size": 0, "scheduler": b""}}
        rng_key = f"rng_rank{self.rank}"
        saved_keys = dcp.FileSystemReader(str(entry.path)).read_metadata().state_dict_metadata
        # After a world-size change a new rank has no saved RNG; it keeps its seeded one.
        has_rng = rng_key in saved_keys
        if has_rng:
            state[rng_key] = b""
        dcp.load(state, checkpoint_id=str(entry.path), process_group=self.group)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
        scheduler.load_state_dict(pickle.loads(state["trainer"]["scheduler"]))
        if has_rng:
            restore_rng(state[rng_key])
        self.last_complete_step = entry.step
        self.last_started_step = entry.step
        return TrainingProgress(step=int(state["trainer"]["step"]),
                                global_sample_index=int(state["trainer"]["global_sample_index"]))
