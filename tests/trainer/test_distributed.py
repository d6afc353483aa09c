"""The trainer under real launchers: torchrun (gloo, 2 CPU ranks) and the PyTorchJob env contract."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from trainer_harness import (
    BASE_FLAGS,
    PYTHON,
    LiveProcess,
    Result,
    complete_steps,
    free_port,
    parse_records,
    run,
    torchrun_command,
    trainer_env,
)

pytestmark = pytest.mark.torchrun


def test_loss_decreases_on_synthetic_data(tmp_path):
    result = run(torchrun_command(2, ["--model", "gpt", "--max-steps", "40", "--batch-size", "8", "--lr", "0.01",
                                      "--log-every", "1"]), trainer_env(), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [record["loss"] for record in result.events("step", rank=0)]
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses
    done = result.done()
    assert done["step"] == 40 and len(done["param_digest"]) == 64
    step = result.events("step", rank=1)[0]
    assert {"node", "rank", "step", "loss", "step_time_ms", "samples_per_s"} <= set(step)


def test_kill_9_of_one_rank_restarts_and_resumes_bit_identical(tmp_path, baseline_digest):
    checkpoint_dir = tmp_path / "ck"
    live = LiveProcess(torchrun_command(2, [*BASE_FLAGS, "--checkpoint-dir", str(checkpoint_dir)], max_restarts=1),
                       trainer_env(TRAINER_DEBUG_STEP_SLEEP_S="0.1"), tmp_path)
    victim = live.wait_for(lambda record: record.get("event") == "step" and record["rank"] == 1
                           and record["step"] >= 10)
    os.kill(victim["pid"], signal.SIGKILL)
    result = live.finish()
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = result.events("resumed", rank=0)
    assert resumed and 4 <= resumed[0]["step"] <= 12, resumed
    assert result.done()["param_digest"] == baseline_digest


def test_sigterm_to_torchrun_checkpoints_and_resumes_exactly(tmp_path, baseline_digest):
    checkpoint_dir = tmp_path / "ck"
    flags = [*BASE_FLAGS, "--checkpoint-dir", str(checkpoint_dir)]
    live = LiveProcess(torchrun_command(2, flags), trainer_env(TRAINER_DEBUG_STEP_SLEEP_S="0.1"), tmp_path)
    live.wait_for(lambda record: record.get("event") == "step" and record["step"] >= 6)
    live.process.send_signal(signal.SIGTERM)  # to the agent only, as the kubelet does to PID 1
    stopped = live.finish()
    # torchrun itself exits 1 on SIGTERM (SignalException); the workers' own 143 is asserted in the PyTorchJob test.
    assert stopped.returncode == 1, stopped.stderr[-3000:]
    preempted = stopped.events("preempted")
    assert {record["rank"] for record in preempted} == {0, 1}
    step = preempted[0]["step"]
    assert all(record["step"] == step and record["signal"] == 15 for record in preempted)
    assert step in complete_steps(checkpoint_dir) and step < 24
    resumed = run(torchrun_command(2, flags), trainer_env(), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.events("resumed", rank=0)[0]["step"] == step
    assert resumed.done()["param_digest"] == baseline_digest


def _pytorchjob_processes(tmp_path: Path, flags: list[str], **extra_env: str) -> list[subprocess.Popen]:
    port = free_port()
    processes = []
    for rank in range(2):
        env = trainer_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                          **extra_env)
        processes.append(subprocess.Popen([PYTHON, "-m", "trainer.train", *flags], env=env, cwd=tmp_path,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return processes


def _collect(processes: list[subprocess.Popen], timeout: float = 120) -> list[Result]:
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=timeout)
        results.append(Result(process.returncode, stdout, stderr, parse_records(stdout)))
    return results


def test_pytorchjob_env_contract_matches_torchrun(tmp_path, baseline_digest):
    """Two plain processes with MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK and no LOCAL_RANK, as Kubeflow starts them."""
    results = _collect(_pytorchjob_processes(tmp_path, [*BASE_FLAGS, "--checkpoint-dir", str(tmp_path / "ck")]))
    assert [result.returncode for result in results] == [0, 0], results[0].stderr[-2000:] + results[1].stderr[-2000:]
    assert results[0].records[-1]["event"] == "done"
    assert results[0].done()["param_digest"] == baseline_digest
    assert results[0].done()["world_size"] == 2
    assert not results[1].events("done")


def test_sigterm_to_pytorchjob_workers_exits_143_after_checkpoint(tmp_path, baseline_digest):
    checkpoint_dir = tmp_path / "ck"
    flags = [*BASE_FLAGS, "--checkpoint-dir", str(checkpoint_dir)]
    processes = _pytorchjob_processes(tmp_path, flags, TRAINER_DEBUG_STEP_SLEEP_S="0.1")
    # Wait until training runs (first checkpoint complete), then preempt both pods.
    for _ in range(600):
        if complete_steps(checkpoint_dir):
            break
        subprocess.run(["sleep", "0.1"], check=False)
    for process in processes:
        process.send_signal(signal.SIGTERM)
    results = _collect(processes)
    assert [result.returncode for result in results] == [143, 143], results[0].stderr[-2000:]
    step = results[0].events("preempted")[0]["step"]
    assert results[1].events("preempted")[0]["step"] == step
    assert max(complete_steps(checkpoint_dir)) == step
    resumed = run(torchrun_command(2, flags), trainer_env(), tmp_path)
    assert resumed.done()["param_digest"] == baseline_digest


def test_crash_before_marker_resumes_from_previous_complete_checkpoint(tmp_path, baseline_digest):
    checkpoint_dir = tmp_path / "ck"
    flags = [*BASE_FLAGS, "--checkpoint-dir", str(checkpoint_dir)]
    crashed = run(torchrun_command(2, flags), trainer_env(TRAINER_FAULT_INJECT="crash_before_marker:12"), tmp_path)
    assert crashed.returncode != 0
    assert crashed.events("fault_inject")
    assert (checkpoint_dir / "step-12" / ".metadata").exists()  # shards were written ...
    assert not (checkpoint_dir / "step-12" / ".complete").exists()  # ... but the step is not complete
    assert complete_steps(checkpoint_dir) == [4, 8]  # the previous complete checkpoint survived
    resumed = run(torchrun_command(2, flags), trainer_env(), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.events("resumed", rank=0)[0]["step"] == 8
    assert resumed.done()["param_digest"] == baseline_digest
    assert complete_steps(checkpoint_dir) == [16, 20, 24]  # keep-checkpoints 3


def _consumed(sample_log: Path, up_to_step: int | None = None) -> list[int]:
    indices = []
    for line in sample_log.read_text().splitlines():
        entry = json.loads(line)
        if up_to_step is None or entry["step"] <= up_to_step:
            indices.extend(range(entry["start"], entry["start"] + entry["count"]))
    return indices


def test_elastic_world_size_change_skips_and_repeats_no_sample(tmp_path):
    """2 ranks preempted mid-epoch, resumed on 1 rank (elastic 2 -> 1), then on 2 again (1 -> 2)."""
    checkpoint_dir = tmp_path / "ck"
    num_samples = 200  # not a multiple of any global batch: steps straddle the epoch boundary
    flags = ["--model", "cnn", "--batch-size", "6", "--num-samples", str(num_samples), "--checkpoint-every", "3",
             "--log-every", "1", "--checkpoint-dir", str(checkpoint_dir)]
    elastic = ["--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
               "--rdzv-id", "elastic-test",
               # With --nnodes 1:2 the rendezvous waits last_call_timeout (30 s) for a second node; one node is the
               # point here, so do not wait.
               "--rdzv-conf", "last_call_timeout=1"]
    logs = [tmp_path / f"samples-{attempt}.jsonl" for attempt in range(3)]

    live = LiveProcess(torchrun_command(2, [*flags, "--max-steps", "100"], launcher_args=elastic),
                       trainer_env(TRAINER_DEBUG_SAMPLE_LOG=str(logs[0]), TRAINER_DEBUG_STEP_SLEEP_S="0.05"), tmp_path)
    live.wait_for(lambda record: record.get("event") == "step" and record["step"] >= 7)
    live.process.send_signal(signal.SIGTERM)
    first = live.finish()
    stop_step = first.events("preempted", rank=0)[0]["step"]

    # 1 rank: 6 samples a step. Stop at a step that leaves the epoch unfinished.
    second_steps = stop_step + 10
    second = run(torchrun_command(1, [*flags, "--max-steps", str(second_steps)], launcher_args=elastic),
                 trainer_env(TRAINER_DEBUG_SAMPLE_LOG=str(logs[1])), tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.events("resumed")[0]["step"] == stop_step
    third = run(torchrun_command(2, [*flags, "--max-steps", str(second_steps + 12)], launcher_args=elastic),
                trainer_env(TRAINER_DEBUG_SAMPLE_LOG=str(logs[2])), tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.events("resumed", rank=0)[0]["step"] == second_steps

    consumed = _consumed(logs[0], up_to_step=stop_step) + _consumed(logs[1]) + _consumed(logs[2])
    assert len(consumed) == len(set(consumed)), "a sample position was consumed twice"
    assert sorted(consumed) == list(range(len(consumed))), "a sample position was skipped"
    assert len(consumed) > num_samples  # the union covers the whole first epoch and crosses into the second
    assert third.done()["step"] == second_steps + 12


def test_fsdp_two_ranks_resume_is_exact(tmp_path):
    flags = ["--model", "gpt", "--fsdp", "--max-steps", "12", "--batch-size", "4", "--checkpoint-every", "4",
             "--deterministic", "--grad-accum-steps", "2", "--log-every", "4"]
    reference = run(torchrun_command(2, [*flags, "--checkpoint-dir", str(tmp_path / "a")]), trainer_env(), tmp_path)
    assert reference.returncode == 0, reference.stderr[-3000:]
    crashed = run(torchrun_command(2, [*flags, "--checkpoint-dir", str(tmp_path / "b"), "--async-checkpoint"]),
                  trainer_env(TRAINER_FAULT_INJECT="crash_before_marker:8"), tmp_path)
    assert crashed.returncode != 0
    resumed = run(torchrun_command(2, [*flags, "--checkpoint-dir", str(tmp_path / "b"), "--async-checkpoint"]),
                  trainer_env(), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.events("resumed", rank=0)[0]["step"] == 4
    assert resumed.done()["param_digest"] == reference.done()["param_digest"]


def test_async_checkpoint_matches_sync_run(tmp_path, baseline_digest):
    checkpoint_dir = tmp_path / "ck"
    result = run(torchrun_command(2, [*BASE_FLAGS, "--checkpoint-dir", str(checkpoint_dir), "--async-checkpoint"]),
                 trainer_env(), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.done()["param_digest"] == baseline_digest
    assert complete_steps(checkpoint_dir) == [16, 20, 24]
    assert any(not record["blocking"] for record in result.events("checkpoint", rank=0))


def test_bench_under_torchrun_reports_busbw_and_throughput(tmp_path):
    output = tmp_path / "bench.json"
    result = run(torchrun_command(2, ["--sizes", "4K,256K", "--iterations", "5", "--steps", "3", "--model", "cnn",
                                      "--output", str(output)], module="trainer.bench"), trainer_env(), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(output.read_text())
    assert report == result.records[-1]
    assert [entry["size_bytes"] for entry in report["allreduce"]] == [4096, 262144]
    for entry in report["allreduce"]:
        assert entry["busbw_gbps"] == entry["algbw_gbps"]  # 2(n-1)/n == 1 for n == 2 (within rounding)
        assert entry["time_us"] > 0
    assert report["training"]["samples_per_s"] > 0 and report["training"]["step_time_ms"] > 0
    assert "mfu" not in report["training"]  # CPU: no peak to compare against
    # The platform's report reads exactly this file.
    from tools.bench_report import load

    runs = load(str(tmp_path)).runs
    assert len(runs) == 1 and runs[0].world_size == 2 and runs[0].busbw_gbps_by_size == {
        4096: report["allreduce"][0]["busbw_gbps"], 262144: report["allreduce"][1]["busbw_gbps"]}


WATCHDOG_S = 6.0
"""The SIGSTOP test's --watchdog-timeout: steps take ~0.1 s, so 6 s without one is a hang."""
AGENT_SHUTDOWN_S = 30.0
"""torch 2.13 LocalElasticAgent stops the remaining workers with SIGTERM, then SIGKILL after 30 s
(torch/distributed/elastic/agent/server/local_elastic_agent.py:517-527 `_shutdown`); a stopped process ignores the
SIGTERM until then."""
RESTART_STARTUP_S = 30.0
"""A new round's rendezvous, process group and resume on this machine (measured: a few seconds)."""


@pytest.mark.slow
def test_sigstop_of_one_rank_watchdog_exits_and_the_gang_resumes_bit_identical(tmp_path, baseline_digest):
    """A stopped rank hangs its peer in the next collective; the peer's watchdog exits it after --watchdog-timeout,
    torchrun restarts both from the newest complete checkpoint, and the run ends where an uninterrupted one does."""
    checkpoint_dir = tmp_path / "ck"
    flags = [*BASE_FLAGS, "--checkpoint-dir", str(checkpoint_dir), "--watchdog-timeout", f"{WATCHDOG_S:g}"]
    live = LiveProcess(torchrun_command(2, flags, max_restarts=1), trainer_env(TRAINER_DEBUG_STEP_SLEEP_S="0.1"),
                       tmp_path)
    victim = live.wait_for(lambda record: record.get("event") == "step" and record["rank"] == 1
                           and record["step"] >= 10)
    stopped_at = time.monotonic()
    os.kill(victim["pid"], signal.SIGSTOP)
    try:
        fired = live.wait_for(lambda record: record.get("event") == "watchdog", timeout=4 * WATCHDOG_S)
        fired_at = time.monotonic()
        resumed = live.wait_for(lambda record: record.get("event") == "resumed" and record["rank"] == 0,
                                timeout=AGENT_SHUTDOWN_S + RESTART_STARTUP_S + 30)
        resumed_at = time.monotonic()
        result = live.finish(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim["pid"], signal.SIGKILL)
    finished_at = time.monotonic()
    detect, restart, total = fired_at - stopped_at, resumed_at - fired_at, finished_at - stopped_at
    print(f"\nSIGSTOP test (watchdog {WATCHDOG_S:g} s): watchdog fired after {detect:.1f} s, gang resumed "
          f"{restart:.1f} s later (restart time), finished {total:.1f} s after the stop")
    assert fired["rank"] == 0 and fired["stalled_s"] >= WATCHDOG_S
    assert "a hung collective or a stalled rank; exiting so the launcher restarts the gang" in fired["message"]
    assert "Sending process" in result.stderr  # torchrun's agent stopped the group (api.py `_close`)
    assert detect <= 2 * WATCHDOG_S
    assert restart <= AGENT_SHUTDOWN_S + RESTART_STARTUP_S
    assert detect + restart <= 2 * WATCHDOG_S + AGENT_SHUTDOWN_S + RESTART_STARTUP_S
    assert result.returncode == 0, result.stderr[-3000:]
    assert 4 <= resumed["step"] <= victim["step"] and resumed["step"] % 4 == 0  # a --checkpoint-every 4 save
    assert result.done()["param_digest"] == baseline_digest
