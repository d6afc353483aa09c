"""Pure parts of the trainer: config validation, data position math, checkpoint selection, busbw, digest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainer import bench, checkpoint, data, distributed, models
from trainer.config import PermanentError, TrainConfig, build_parser, parse_config


# ---- config -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_steps": 0}, r"--max-steps must be >= 1, got 0"),
    ({"batch_size": -1}, r"--batch-size must be >= 1"),
    ({"keep_checkpoints": 0}, r"--keep-checkpoints must be >= 1 so the newest complete checkpoint survives"),
    ({"checkpoint_every": 5}, r"--checkpoint-every needs --checkpoint-dir"),
    ({"async_checkpoint": True}, r"--async-checkpoint needs --checkpoint-dir"),
    ({"model": "gpt", "data_dir": "/data"}, r"--data-dir holds MNIST and works only with --model cnn"),
    ({"init_weights": "w.bin"}, r"--init-weights must be a \.pt/\.pth or \.safetensors file"),
    ({"gpt_dim": 10, "gpt_heads": 4}, r"--gpt-dim \(10\) must be a positive multiple of --gpt-heads \(4\)"),
    ({"warmup_steps": 100, "max_steps": 100}, r"--warmup-steps must be in \[0, --max-steps\)"),
    ({"metrics_port": 70000}, r"--metrics-port must be in 1\.\.65535"),
    ({"watchdog_timeout": -1}, r"--watchdog-timeout must be >= 0 \(0 = off\), got -1"),
])
def test_config_rejects_with_actionable_text(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_config_reports_every_problem_at_once():
    with pytest.raises(ValueError, match=r"(?s)--max-steps must be >= 1.*--batch-size must be >= 1"):
        TrainConfig(max_steps=0, batch_size=0)


def test_every_field_has_a_flag_and_a_docstring():
    import dataclasses

    help_text = build_parser().format_help()
    for spec in dataclasses.fields(TrainConfig):
        assert spec.metadata["doc"].strip()
        assert "--" + spec.name.replace("_", "-") in help_text
    for flag in ("--model", "--max-steps", "--batch-size", "--seed", "--deterministic", "--checkpoint-dir",
                 "--checkpoint-every", "--data-dir", "--init-weights", "--fsdp", "--compile", "--async-checkpoint",
                 "--metrics-port", "--lr", "--grad-accum-steps", "--keep-checkpoints", "--backend", "--log-every"):
        assert flag in help_text


def test_parse_config_maps_flags_and_wraps_errors():
    config = parse_config(["--model", "gpt", "--max-steps", "7", "--fsdp", "--metrics-port", "9100"])
    assert (config.model, config.max_steps, config.fsdp, config.metrics_port) == ("gpt", 7, True, 9100)
    with pytest.raises(PermanentError, match="--lr must be > 0"):
        parse_config(["--lr", "0"])


# ---- distributed env ----------------------------------------------------------------------------------------
def test_env_contract_for_each_launcher():
    assert distributed.env_contract({}) == (0, 0, 1)
    torchrun = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}
    assert distributed.env_contract(torchrun) == (3, 1, 4)
    pytorchjob = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"}
    assert distributed.env_contract(pytorchjob) == (1, 0, 2)
    with pytest.raises(ValueError, match=r"RANK=2 must be in \[0, WORLD_SIZE=2\)"):
        distributed.env_contract({"RANK": "2", "WORLD_SIZE": "2"})


def test_backend_auto_picks_gloo_without_cuda():
    assert distributed.resolve_backend("auto") == ("nccl" if torch.cuda.is_available() else "gloo")
    assert distributed.resolve_backend("gloo") == "gloo"


# ---- data position ------------------------------------------------------------------------------------------
def test_micro_batch_slices_tile_the_step_exactly():
    covered = []
    for micro_step in range(3):
        for rank in range(4):
            piece = data.micro_batch_slice(100, micro_step, rank, 4, 5)
            covered.extend(range(piece.start, piece.start + piece.count))
    assert covered == list(range(100, 100 + data.global_batch(4, 5, 3)))


@pytest.mark.parametrize("world_sizes", [[2, 1], [1, 2], [2, 3, 1]])
def test_changing_world_size_neither_skips_nor_repeats(world_sizes):
    dataset_size, batch = 50, 3
    stream = data.SampleStream(dataset_size, seed=1)
    position, seen = 0, []
    for world_size in world_sizes:
        for _ in range(7):
            for rank in range(world_size):
                piece = data.micro_batch_slice(position, 0, rank, world_size, batch)
                seen.extend(stream.dataset_indices(piece.start, piece.count).tolist())
            position += data.global_batch(world_size, batch, 1)
    first_epoch = seen[:dataset_size]
    assert sorted(first_epoch) == list(range(dataset_size))


def test_stream_crosses_epochs_with_a_new_permutation():
    stream = data.SampleStream(10, seed=3)
    both = stream.dataset_indices(5, 10).tolist()
    assert both[:5] == stream.permutation(0)[5:].tolist()
    assert both[5:] == stream.permutation(1)[:5].tolist()
    assert stream.permutation(0).tolist() != stream.permutation(1).tolist()


def test_synthetic_sample_i_does_not_depend_on_dataset_size():
    small, large = data.SyntheticImages(100, seed=4), data.SyntheticImages(3000, seed=4)
    assert torch.equal(small.inputs[57], large.inputs[57]) and small.targets[57] == large.targets[57]
    tokens = data.SyntheticTokens(10, seq_len=8, vocab_size=50, seed=4)
    inputs, targets = tokens.batch(torch.tensor([2]))
    assert torch.equal(inputs[0, 1:], targets[0, :-1])


# ---- checkpoint selection and pruning -----------------------------------------------------------------------
def _make_steps(root: Path, complete: list[int], incomplete: list[int]) -> None:
    for step in complete + incomplete:
        (root / f"step-{step}").mkdir(parents=True)
    for step in complete:
        checkpoint.write_marker(root / f"step-{step}", {"step": step})


def test_latest_complete_ignores_steps_without_marker(tmp_path):
    _make_steps(tmp_path, complete=[5, 10], incomplete=[15])
    (tmp_path / "step-x").mkdir()
    (tmp_path / "notes").mkdir()
    entries = checkpoint.scan(tmp_path)
    assert [(entry.step, entry.complete) for entry in entries] == [(5, True), (10, True), (15, False)]
    assert checkpoint.latest_complete(entries).step == 10
    assert checkpoint.latest_complete([]) is None


def test_prune_keeps_newest_complete_and_in_flight_dirs(tmp_path):
    _make_steps(tmp_path, complete=[2, 4, 8, 10], incomplete=[6, 12])
    doomed = [entry.step for entry in checkpoint.plan_prune(checkpoint.scan(tmp_path), keep=2)]
    # 2 and 4 are beyond keep=2, 6 is a crashed save older than the newest complete, 12 may still be writing.
    assert doomed == [2, 4, 6]
    assert checkpoint.plan_prune(checkpoint.scan(tmp_path), keep=10) == [entry for entry in checkpoint.scan(tmp_path)
                                                                        if entry.step == 6]
    with pytest.raises(ValueError, match="keep must be >= 1"):
        checkpoint.plan_prune([], keep=0)


def test_no_complete_checkpoint_prunes_nothing(tmp_path):
    _make_steps(tmp_path, complete=[], incomplete=[3, 4])
    assert checkpoint.plan_prune(checkpoint.scan(tmp_path), keep=1) == []


def test_marker_is_written_atomically(tmp_path):
    checkpoint.write_marker(tmp_path, {"step": 7})
    assert json.loads((tmp_path / checkpoint.MARKER_NAME).read_text()) == {"step": 7}
    assert not (tmp_path / f"{checkpoint.MARKER_NAME}.tmp").exists()


def test_rng_round_trip():
    blob = checkpoint.capture_rng()
    expected = (torch.rand(3), __import__("random").random())
    checkpoint.restore_rng(blob)
    assert torch.equal(torch.rand(3), expected[0]) and __import__("random").random() == expected[1]


# ---- models and digest --------------------------------------------------------------------------------------
def test_digest_is_order_independent_and_bit_sensitive():
    state = {"b": torch.ones(2), "a": torch.zeros(3, dtype=torch.bfloat16)}
    same = {"a": torch.zeros(3, dtype=torch.bfloat16), "b": torch.ones(2)}
    assert models.state_digest(state) == models.state_digest(same)
    flipped = {"a": same["a"], "b": torch.nextafter(torch.ones(2), torch.full((2,), 2.0))}
    assert models.state_digest(state) != models.state_digest(flipped)


def test_models_produce_expected_shapes():
    cnn = models.build_model(TrainConfig(model="cnn"))
    assert cnn(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    gpt = models.build_model(TrainConfig(model="gpt", seq_len=16, vocab_size=100))
    assert gpt(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 100)
    # Same seed, same weights: every rank builds the identical model (FSDP2 shards each rank's own copy).
    assert models.state_digest(models.build_model(TrainConfig(model="gpt")).state_dict()) == models.state_digest(
        models.build_model(TrainConfig(model="gpt")).state_dict())


def test_init_weights_rejects_mismatched_state(tmp_path):
    path = tmp_path / "wrong.pt"
    torch.save({"conv1.weight": torch.zeros(1)}, path)
    with pytest.raises(PermanentError, match=r"does not fit the model: missing=\[.*wrong_shape=\['conv1.weight'\]"):
        models.load_init_weights(models.build_model(TrainConfig()), str(path))
    with pytest.raises(PermanentError, match="no such file"):
        models.load_init_weights(models.build_model(TrainConfig()), str(tmp_path / "absent.pt"))


def test_cosine_schedule_warms_up_and_decays():
    multiplier = models.cosine_schedule(warmup_steps=2, max_steps=12)
    assert multiplier(0) == 0.5 and multiplier(1) == 1.0 and multiplier(2) == 1.0
    assert multiplier(12) == pytest.approx(0.1)


# ---- bench --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("world_size", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_follows_nccl_tests_formula(world_size, factor):
    algbw, busbw = bench.bus_bandwidth(size_bytes=2_000_000_000, seconds=1.0, world_size=world_size)
    assert algbw == pytest.approx(2.0)
    assert busbw == pytest.approx(2.0 * factor)


def test_size_parsing_and_peak_table():
    assert [bench.parse_size(size) for size in ("4K", "1M", "2G", "512", "1MB")] == [4096, 2**20, 2 * 2**30, 512, 2**20]
    assert bench.peak_tflops("NVIDIA H200") == 989.0
    assert bench.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert bench.peak_tflops("NVIDIA L40S") == 362.0
    assert bench.peak_tflops("NVIDIA A10G") == 70.0
    assert bench.peak_tflops("cpu") is None


def test_parse_records_reads_what_emit_writes_and_skips_the_rest(capsys):
    from trainer.telemetry import emit, parse_records

    emit({"event": "step", "step": 1})
    print("a warning line")
    print('{"event": "cut short')
    emit({"event": "done", "step": 2})
    assert parse_records(capsys.readouterr().out) == [{"event": "step", "step": 1}, {"event": "done", "step": 2}]


def test_metrics_expose_the_last_step_time_for_the_stall_alert():
    """components/alert_rules.py `TrainingStepStalled` measures time since `trainer_last_step_timestamp_seconds`:
    set at start (a rank that never steps is caught too) and at every step."""
    import time as time_module

    from prometheus_client.parser import text_string_to_metric_families

    from trainer.telemetry import Metrics

    def value(metrics: Metrics) -> float:
        families = text_string_to_metric_families(metrics.exposition())
        return next(s.value for f in families for s in f.samples if s.name == "trainer_last_step_timestamp_seconds")

    before = time_module.time()
    metrics = Metrics(0, rank=3, serve=False)
    started = value(metrics)
    assert before - 1 <= started <= time_module.time() + 1
    time_module.sleep(0.05)
    metrics.observe_step(1, 0.01, 8)
    assert value(metrics) > started
    assert 'trainer_step{rank="3"} 1.0' in metrics.exposition()


def test_watchdog_fires_once_after_the_timeout_with_a_clear_line(capsys):
    from trainer.telemetry import parse_records
    from trainer.watchdog import EXIT_WATCHDOG, StepWatchdog

    now = [100.0]
    exits: list[int] = []
    dog = StepWatchdog(10.0, rank=1, clock=lambda: now[0], on_expire=exits.append)
    now[0] = 500.0
    assert not dog.check()  # not armed before the first step (start-up has its own timeouts)
    dog.beat(7)
    now[0] += 9.9
    assert not dog.check()
    with dog.paused():  # a checkpoint save: no deadline inside
        now[0] += 60
        assert not dog.check()
    now[0] += 9.9
    assert not dog.check()  # re-armed from the save's end
    now[0] += 0.2
    assert dog.check() and exits == [EXIT_WATCHDOG] == [3]
    assert not dog.check() and exits == [3]  # once
    line = parse_records(capsys.readouterr().out)[-1]
    assert line["event"] == "watchdog" and line["rank"] == 1 and line["step"] == 7
    assert line["message"].startswith("no training step completed for 10.1 s (--watchdog-timeout 10): a hung "
                                      "collective or a stalled rank; exiting so the launcher restarts the gang")

