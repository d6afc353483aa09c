"""Ranks that see different checkpoint directories agree on one step before loading (Trainer._agreed_checkpoint).

Per-pod scratch (``storage.kind: none``) gives every pod its own directory, and a shared file system may lag on one
node; dcp.load is a collective, so a rank loading a step its peer does not have would hang it or mix states. Each
rank here is a plain PyTorchJob-style process (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) with its own
``--checkpoint-dir``, and the directories hold real complete checkpoints copied from one uninterrupted run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from trainer_harness import (
    BASE_FLAGS,
    PYTHON,
    Result,
    complete_steps,
    free_port,
    parse_records,
    run,
    torchrun_command,
    trainer_env,
)

pytestmark = pytest.mark.torchrun


RUN_TIMEOUT_S = 180
"""A 24-step CPU run takes seconds; a rank stuck in a collective its peer never joins would wait far longer (the
process group's 600 s timeout), so running past this is the hang this file guards against."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, str]:
    """An uninterrupted 2-rank run keeping every checkpoint: its directory and its final param_digest."""
    directory = tmp_path_factory.mktemp("reference")
    checkpoint_dir = directory / "ck"
    result = run(torchrun_command(2, [*BASE_FLAGS, "--keep-checkpoints", "10", "--checkpoint-dir",
                                      str(checkpoint_dir)]), trainer_env(), directory)
    assert result.returncode == 0, result.stderr[-3000:]
    assert complete_steps(checkpoint_dir) == [4, 8, 12, 16, 20, 24]
    return checkpoint_dir, result.done()["param_digest"]


def _view(source: Path, target: Path, steps: list[int]) -> Path:
    """``target`` holding full copies of ``source``'s complete step dirs ``steps`` (shards, metadata, marker)."""
    target.mkdir(parents=True)
    for step in steps:
        shutil.copytree(source / f"step-{step}", target / f"step-{step}")
    return target


def _run_ranks(tmp_path: Path, checkpoint_dirs: list[Path]) -> list[Result]:
    """One plain process per rank, each with its own --checkpoint-dir; all killed if any outlives the timeout."""
    port = free_port()
    processes = []
    for rank, checkpoint_dir in enumerate(checkpoint_dirs):
        env = trainer_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(len(checkpoint_dirs)),
                          RANK=str(rank))
        processes.append(subprocess.Popen([PYTHON, "-m", "trainer.train", *BASE_FLAGS, "--keep-checkpoints", "10",
                                           "--checkpoint-dir", str(checkpoint_dir)], env=env, cwd=tmp_path,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
            results.append(Result(process.returncode, stdout, stderr, parse_records(stdout)))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return results


# steps rank 0 sees, steps rank 1 sees; the candidate (oldest of the ranks' newest), which ranks have it complete,
# and the step both must load (None: both start fresh).
CASES = {
    # Per-pod scratch: rank 0's pod kept its checkpoint (a container restart), rank 1's pod is new.
    "rank1-sees-none": ([16], [], None, [False, False], None),
    # A lagging shared view: rank 1 does not see step 16 yet; step 8 is complete in both views.
    "rank1-lags": ([8, 16], [8], 8, [True, True], 8),
    # Rank 0 already pruned step 8, rank 1 sees only 8: no step is complete in both views.
    "no-common-step": ([16], [8], 8, [False, True], None),
}


@pytest.mark.parametrize("case", CASES)
def test_ranks_with_different_checkpoint_views_agree_on_one_step(tmp_path, reference, case):
    source, reference_digest = reference
    rank0_steps, rank1_steps, candidate, has_candidate, expected = CASES[case]
    views = [_view(source, tmp_path / "rank0", rank0_steps), _view(source, tmp_path / "rank1", rank1_steps)]

    results = _run_ranks(tmp_path, views)

    assert [result.returncode for result in results] == [0, 0], \
        results[0].stderr[-2000:] + results[1].stderr[-2000:]
    differ = results[0].events("checkpoint_views_differ")
    assert len(differ) == 1, results[0].stdout[-3000:]
    assert not results[1].events("checkpoint_views_differ")  # one event for the job, from rank 0
    event = differ[0]
    assert event["newest_complete_step_by_rank"] == [max(rank0_steps, default=None), max(rank1_steps, default=None)]
    assert event["candidate_step"] == candidate
    assert event["has_candidate_by_rank"] == has_candidate
    assert event["chosen_step"] == expected
    assert event["action"] == ("fresh_start" if expected is None else "resume")
    for rank, result in enumerate(results):
        resumed = result.events("resumed", rank=rank)
        assert [record["step"] for record in resumed] == ([] if expected is None else [expected])
    done = results[0].done()
    assert done["resumed_from"] == expected and done["step"] == 24
    # Both ranks ran one state: a fresh start, or step 8 continued, ends bit-identical to the uninterrupted run.
    assert done["param_digest"] == reference_digest


def test_same_view_on_every_rank_resumes_newest_without_a_disagreement_event(tmp_path, reference):
    """Two views with the same complete steps (what a shared directory gives): the newest is loaded, nothing logged."""
    source, reference_digest = reference
    views = [_view(source, tmp_path / f"rank{rank}", [8, 16]) for rank in range(2)]
    results = _run_ranks(tmp_path, views)
    assert [result.returncode for result in results] == [0, 0], results[0].stderr[-2000:]
    assert not results[0].events("checkpoint_views_differ")
    assert [record["step"] for record in results[0].events("resumed")] == [16]
    assert [record["step"] for record in results[1].events("resumed")] == [16]
    assert results[0].done()["param_digest"] == reference_digest
