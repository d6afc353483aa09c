"""Values the stack hands to a consumer are read by that consumer's own grammar at plan time
(stack_config/consumers.py): the trainer's argparse parser and TrainConfig, its bench size parser, Prometheus' and
Go's duration parsers, and Kubernetes' quantity grammar. The `slow` tests hold the ports to the real programs."""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.test_config import BASE, EXISTING, parse, problems_of, with_


def _one(raw: dict[str, Any], path: str) -> str:
    """The one problem at `path` (its text after the path)."""
    found = [p for p in problems_of(raw) if p.startswith(f"{path}: ")]
    assert len(found) == 1, (path, problems_of(raw))
    return found[0].removeprefix(f"{path}: ")


def _args(*args: str, base: dict[str, Any] = BASE, **fields: Any) -> dict[str, Any]:
    raw = with_(base, "workloads.train.extraArgs", list(args))
    for key, value in fields.items():
        raw = with_(raw, f"workloads.train.{key}", value)
    return raw


# ------------------------------------------------------------------ extraArgs: the trainer's own parser and checks


def test_extra_args_the_trainer_takes_pass() -> None:
    config = parse(_args("--fsdp", "--lr", "3e-4", "--warmup-steps=10", "--grad-accum-steps=2", "--log-every", "5"))
    assert config.workloads["train"].extra_args[0] == "--fsdp"
    parse(_args("--async-checkpoint", "--compile", base=EXISTING))


def test_an_unknown_flag_is_refused_at_its_element() -> None:
    message = _one(_args("--fsdp", "--frobnicate"), "workloads.train.extraArgs[1]")
    assert message.startswith("'--frobnicate' is not a flag of the trainer"), message
    assert "--grad-accum-steps" in message and "--lr" in message  # what is allowed


def test_a_positional_argument_is_refused() -> None:
    assert _one(_args("fsdp"), "workloads.train.extraArgs[0]").startswith("'fsdp' is not a flag of the trainer")


def test_a_value_the_trainer_cannot_read_is_refused_with_the_value() -> None:
    message = _one(_args("--lr=abc"), "workloads.train.extraArgs[0]")
    assert "'abc'" in message and "--lr" in message and "float" in message, message
    # a value in its own element: that element is the offending one
    message = _one(_args("--fsdp", "--lr", "abc"), "workloads.train.extraArgs[2]")
    assert "'abc'" in message and "--lr" in message, message
    message = _one(_args("--backend=mpi"), "workloads.train.extraArgs[0]")
    assert "'mpi'" in message and "'nccl'" in message, message  # the choices
    message = _one(_args("--fsdp=yes"), "workloads.train.extraArgs[0]")
    assert "--fsdp" in message and "takes no value" in message, message


def test_a_flag_without_its_value_is_refused() -> None:
    message = _one(_args("--fsdp", "--lr"), "workloads.train.extraArgs[1]")
    assert "--lr" in message and "expected one argument" in message, message


def test_a_value_the_trainer_config_refuses_is_refused() -> None:
    message = _one(_args("--lr=-1"), "workloads.train.extraArgs[0]")
    assert "--lr must be > 0, got -1.0" in message, message
    message = _one(_args("--gpt-heads=3"), "workloads.train.extraArgs[0]")
    assert "--gpt-dim (64) must be a positive multiple of --gpt-heads (3)" in message, message


def test_an_interaction_with_the_platforms_own_flags_is_caught() -> None:
    # --warmup-steps must be below --max-steps, which the platform passes from maxSteps (default 1000)
    message = _one(_args("--warmup-steps=1000"), "workloads.train.extraArgs[0]")
    assert "--warmup-steps must be in [0, --max-steps), got 1000" in message, message
    parse(_args("--warmup-steps=1000", maxSteps=5000))
    # --data-dir is MNIST, the cnn model only; the platform passes --model from `model` (default gpt)
    message = _one(_args("--data-dir=/data/mnist"), "workloads.train.extraArgs[0]")
    assert "--data-dir holds MNIST" in message, message
    parse(_args("--data-dir=/data/mnist", model="cnn"))


@pytest.mark.parametrize(("args", "index", "key"), [
    (["--max-steps=5"], 0, "workloads.train.maxSteps"),
    (["--fsdp", "--batch-size", "4"], 1, "workloads.train.batchSize"),
    (["--model=cnn"], 0, "workloads.train.model"),
    (["--checkpoint-every=7"], 0, "workloads.train.checkpointEvery"),
    (["--max-s=5"], 0, "workloads.train.maxSteps"),  # argparse takes a unique prefix: the same flag
])
def test_a_flag_the_platform_sets_is_refused_naming_the_key_to_set(args: list[str], index: int, key: str) -> None:
    message = _one(_args(*args), f"workloads.train.extraArgs[{index}]")
    assert "the platform sets" in message and f"set {key} instead" in message, message


@pytest.mark.parametrize("args", [["--checkpoint-dir=/tmp/x"], ["--metrics-port", "9000"]])
def test_the_platforms_own_wiring_is_refused(args: list[str]) -> None:
    message = _one(_args(*args), "workloads.train.extraArgs[0]")
    assert "the platform sets" in message and "remove it" in message, message


@pytest.mark.parametrize("value", ["0", "1200", "60"])
def test_the_watchdog_is_the_platforms_hang_protection(value: str) -> None:
    message = _one(_args(f"--watchdog-timeout={value}"), "workloads.train.extraArgs[0]")
    assert "--watchdog-timeout" in message and "hang protection" in message and "remove it" in message, message


def test_help_is_refused() -> None:
    assert "prints its usage and exits" in _one(_args("--help"), "workloads.train.extraArgs[0]")


def test_a_flag_given_twice_is_refused() -> None:
    message = _one(_args("--lr=0.1", "--fsdp", "--lr=0.2"), "workloads.train.extraArgs[0]")
    assert "given again at workloads.train.extraArgs[2]" in message, message


def _swarm() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.edge-swarm.yaml").read_text())
    raw = {key.split(":", 1)[1]: value for key, value in document["config"].items() if key.startswith("gtp:")}
    raw["registryPassword"] = "not-a-real-secret"
    return raw


def test_swarm_workloads_pass_extra_args_to_the_trainer_too() -> None:
    raw = _swarm()
    parse(raw)
    raw["workloads"]["swarm-finetune"]["extraArgs"] = ["--fsdp", "--max-steps=3"]
    message = _one(raw, "workloads.swarm-finetune.extraArgs[1]")
    assert "set workloads.swarm-finetune.maxSteps instead" in message, message


def test_the_platform_owned_flags_are_those_the_components_pass() -> None:
    from components.training_pod import trainer_args
    from conventions.trainer_cli import PLATFORM_OWNED, flag

    passed = trainer_args(model="gpt", max_steps=1, batch_size=1, checkpoint_dir="/c", checkpoint_every=1)
    assert {arg.split("=", 1)[0] for arg in passed} <= {flag(dest) for dest in PLATFORM_OWNED}


# ------------------------------------------------------------------------------- benchSizes: trainer/sizes.py


def _bench(sizes: str) -> dict[str, Any]:
    return with_(with_(BASE, "workloads.train.entrypoint", "bench"), "workloads.train.benchSizes", sizes)


@pytest.mark.parametrize("sizes", ["1M,16M,128M,1G", "4K", "1MB,4k", "0.5M,512", " 1M, 2M"])
def test_bench_sizes_the_trainer_reads_pass(sizes: str) -> None:
    parse(_bench(sizes))


@pytest.mark.parametrize(("sizes", "bad"), [("1MiB,2M", "1MiB"), ("1M,,2M", ""), ("1M 16M", "1M 16M"),
                                            ("infK", "infK"), ("1T", "1T")])
def test_bench_sizes_the_trainer_refuses_are_refused(sizes: str, bad: str) -> None:
    message = _one(_bench(sizes), "workloads.train.benchSizes")
    assert message.startswith(f"{sizes!r} is not a comma-separated size list"), message
    assert f"{bad!r}" in message and "K, M or G" in message, message


def test_a_bench_size_below_one_float_is_refused() -> None:
    message = _one(_bench("1M,2"), "workloads.train.benchSizes")
    assert "'2'" in message and "4 bytes" in message, message


def test_the_plan_reads_sizes_with_the_bench_s_own_function() -> None:
    """The very function `trainer.bench` runs, compiled from its source without torch (the image is unchanged)."""
    from conventions.trainer_cli import trainer_function

    parse_size = trainer_function("bench", "parse_size")
    assert parse_size.__code__.co_filename.endswith("images/trainer/trainer/bench.py")
    assert [parse_size(s) for s in ("512", "1K", "16M", "1GB", "2m")] == [512, 1024, 16 * 2**20, 2**30, 2 * 2**20]
    with pytest.raises(ValueError):
        parse_size("1X")


# ------------------------------------------------------------------------ Prometheus durations (model.ParseDuration)


@pytest.mark.parametrize("value", ["15d", "1y", "2w3d", "12h30m", "1d2h3m4s5ms", "292y", "90m"])
def test_prometheus_retentions_pass(value: str) -> None:
    parse(with_(BASE, "gpu.metrics.retention", value))


@pytest.mark.parametrize("value", ["15 days", "", "1.5d", "2h1d", "1h1h", "-1d", "1D", "293y", "200y10400w", "d",
                                   "15", "99999999999999999999s"])
def test_prometheus_retentions_refused(value: str) -> None:
    message = _one(with_(BASE, "gpu.metrics.retention", value), "gpu.metrics.retention")
    assert message.startswith(f"{value!r} is not a Prometheus duration"), message
    assert "y, w, d, h, m, s, ms" in message, message


@pytest.mark.parametrize("value", ["0", "0d", "0s0ms"])
def test_a_zero_retention_is_refused_as_prometheus_would_replace_it(value: str) -> None:
    message = _one(with_(BASE, "gpu.metrics.retention", value), "gpu.metrics.retention")
    assert "15d" in message and "retentionSize" in message, message


@pytest.mark.parametrize("value", ["30m", "2h", "1h30m", "1d", "1w"])
def test_admission_budgets_prometheus_reads_pass(value: str) -> None:
    parse(with_(BASE, "kueue.admissionBudget", value))


@pytest.mark.parametrize("value", ["1.5h", "30 m", "30M", "-30m", "1m1h"])
def test_admission_budgets_prometheus_refuses_are_refused(value: str) -> None:
    message = _one(with_(BASE, "kueue.admissionBudget", value), "kueue.admissionBudget")
    assert message.startswith(f"{value!r} is not a duration Prometheus reads"), message


def test_a_zero_admission_budget_is_refused() -> None:
    message = _one(with_(BASE, "kueue.admissionBudget", "0"), "kueue.admissionBudget")
    assert "more than zero" in message, message


# -------------------------------------------------------------------------------- Go durations (time.ParseDuration)


@pytest.mark.parametrize("value", ["30m", "1h30m", "1.5h", "2700s", "45m0s", "+1h", "0.75h"])
def test_go_timeouts_pass(value: str) -> None:
    parse(with_(BASE, "kueue.waitForPodsReadyTimeout", value))


@pytest.mark.parametrize("value", ["1d", "30 m", "", "h", "1h30", "2562048h", "1e3s"])
def test_go_timeouts_refused(value: str) -> None:
    message = _one(with_(BASE, "kueue.waitForPodsReadyTimeout", value), "kueue.waitForPodsReadyTimeout")
    assert message.startswith(f"{value!r} is not a duration Kueue reads (a Go duration"), message
    assert "h, m, s, ms, us, ns" in message, message


@pytest.mark.parametrize(("value", "why"), [("0", "more than zero"), ("-30m", "more than zero"),
                                            ("1800500ms", "whole number of seconds")])
def test_go_timeouts_the_platform_cannot_use(value: str, why: str) -> None:
    message = _one(with_(BASE, "kueue.waitForPodsReadyTimeout", value), "kueue.waitForPodsReadyTimeout")
    assert why in message, message


def test_the_startup_bound_is_the_checked_value() -> None:
    from stack_config.derived import duration_seconds

    assert duration_seconds("1.5h") == 5400 and duration_seconds("1h30m") == 5400 and duration_seconds("90s") == 90


# -------------------------------------------------------------------------------------- Kubernetes quantities


@pytest.mark.parametrize(("key", "value"), [("memory", "8Gi"), ("memory", "7.5Gi"), ("memory", "8G"),
                                            ("memory", "+8Gi"), ("memory", "8192Mi"), ("shmSize", "1.Gi"),
                                            ("shmSize", ".5Gi"), ("ephemeralStorage", "50Gi"), ("cpu", "2"),
                                            ("cpu", "1500m"), ("cpu", "2e0"), ("cpu", "0.5")])
def test_quantities_kubernetes_reads_pass(key: str, value: str) -> None:
    parse(with_(BASE, f"workloads.train.{key}", value))


@pytest.mark.parametrize(("key", "value"), [("memory", "8gi"), ("memory", "8GB"), ("memory", "1e3Mi"),
                                            ("shmSize", "1..5Gi"), ("ephemeralStorage", "1Zi"), ("cpu", "2 cores"),
                                            ("cpu", "1.5.0")])
def test_quantities_kubernetes_refuses_are_refused(key: str, value: str) -> None:
    message = _one(with_(BASE, f"workloads.train.{key}", value), f"workloads.train.{key}")
    assert message.startswith(f"{value!r} is not a"), message


@pytest.mark.parametrize(("key", "value", "suggestion"), [("memory", "262144", "256Ki"),
                                                          ("shmSize", "2147483648", "2Gi"),
                                                          ("ephemeralStorage", "8e9", "8G"),
                                                          ("memory", 4294967296, "4Gi")])
def test_a_size_without_a_unit_is_refused_as_bytes(key: str, value: Any, suggestion: str) -> None:
    message = _one(with_(BASE, f"workloads.train.{key}", value), f"workloads.train.{key}")
    assert "bytes" in message and f"'{suggestion}'" in message, message


def test_quantity_values_match_kubernetes() -> None:
    from fractions import Fraction

    from conventions.quantities import parse_quantity

    assert parse_quantity("1.5Gi") == Fraction(3 * 2**29)
    assert parse_quantity("100m") == Fraction(1, 10) and parse_quantity("1e3") == 1000
    assert parse_quantity("-1k") == -1000 and parse_quantity("0.1n") == Fraction(1, 10**9)  # rounded up to 1n
    assert parse_quantity("Gi") == 0 and parse_quantity("1.") == 1  # Kubernetes' own quirks (quantity.go)
    assert parse_quantity("e3") == 0 and parse_quantity(".e-9") == 0  # no digits: 0, while the int64 path holds
    for refused in ("", "1 Gi", " 1", "1 ", "1gi", "1e", ".e-10", "1.2.3", "1Mii", "1e3Mi", "64GB", ".5i"):
        with pytest.raises(ValueError):
            parse_quantity(refused)


# ------------------------------------------------------------------- the ports held to the real programs (slow)

PROMETHEUS_CORPUS: dict[str, bool] = {
    "0": True, "0s": True, "15d": True, "1y": True, "2w3d": True, "1d2h3m4s5ms": True, "90m": True, "1ms": True,
    "292y": True, "106751d": True, "": False, "15 days": False, "1.5d": False, "2h1d": False, "1h1h": False,
    "-1d": False, "1D": False, "293y": False, "200y10400w": False, "107675d": False, "2584200h": False, "d": False,
    "15": False, "1h ": False, " 1h": False, "1µs": False, "1us": False, "99999999999999999999s": False,
    "+1h": False, "1mm": False, "1s1ms1s": False,
}
"""Durations and whether prometheus/common model.ParseDuration takes them (model/time.go:205-259; the 293y...
cases from its time_test.go TestParseBadDuration)."""

GO_CORPUS: dict[str, bool] = {
    "0": True, "-0": True, "+0": True, "10m": True, "1h30m": True, "1.5h": True, ".5s": True, "5.s": True,
    "-30m": True, "+1h": True, "1h1h": True, "1m1h": True, "1µs": True, "1μs": True, "1us": True, "2562047h": True,
    "9223372036s": True, "9223372036854775807ns": True, "": False, "1d": False, "30 m": False, "h": False,
    ".s": False, "1h30": False, "2562048h": False, "9223372036854775808ns": False, "1e3s": False, "1.5.5s": False,
    "-": False, "1H": False, "0.": False, "9223372036854775808ns9223372036854775808ns": True,  # uint64 wraps to 0
}
"""Durations and whether Go's time.ParseDuration takes them (src/time/format.go:1631-1728)."""


def _agree(port: Any, answers: dict[str, bool]) -> dict[str, tuple[bool, bool]]:
    disagree = {}
    for text, accepted in answers.items():
        try:
            port(text)
            ours = True
        except ValueError:
            ours = False
        if ours != accepted:
            disagree[text] = (ours, accepted)
    return disagree


def test_the_duration_ports_answer_the_corpus_as_the_upstream_code_reads() -> None:
    from conventions.durations import parse_go_duration, parse_prometheus_duration

    assert _agree(parse_prometheus_duration, PROMETHEUS_CORPUS) == {}
    assert _agree(parse_go_duration, GO_CORPUS) == {}


@pytest.mark.slow
def test_the_prometheus_port_agrees_with_promtool(tmp_path: Path) -> None:
    from conventions.durations import parse_prometheus_duration

    promtool = shutil.which("promtool")
    if promtool is None:
        warnings.warn("promtool is absent (`make prometheus-local` installs it): the Prometheus duration port was "
                      "checked against the corpus alone, not the real parser", stacklevel=1)
        assert _agree(parse_prometheus_duration, PROMETHEUS_CORPUS) == {}
        return
    real = {}
    for index, text in enumerate(PROMETHEUS_CORPUS):
        rules = tmp_path / f"rules-{index}.yml"
        rules.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [
            {"alert": "A", "expr": "vector(1)", "for": text}]}]}))
        result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True,
                                timeout=60, check=False)
        real[text] = result.returncode == 0
    assert _agree(parse_prometheus_duration, real) == {}, real
    assert real == PROMETHEUS_CORPUS


GO_PROGRAM = """package main

import (
\t"bufio"
\t"fmt"
\t"os"
\t"time"
)

func main() {
\tscanner := bufio.NewScanner(os.Stdin)
\tfor scanner.Scan() {
\t\t_, err := time.ParseDuration(scanner.Text())
\t\tfmt.Println(err == nil)
\t}
}
"""


@pytest.mark.slow
def test_the_go_port_agrees_with_go(tmp_path: Path) -> None:
    from conventions.durations import parse_go_duration

    go = shutil.which("go") or "/usr/local/go/bin/go"
    assert Path(go).exists(), "Go is missing: the Go duration port can't be held to time.ParseDuration"
    (tmp_path / "main.go").write_text(GO_PROGRAM)
    corpus = list(GO_CORPUS)
    assert not any("\n" in text for text in corpus)
    result = subprocess.run([go, "run", "main.go"], input="\n".join(corpus) + "\n", capture_output=True, text=True,
                            cwd=tmp_path, timeout=300, check=True,
                            env={**os.environ, "GO111MODULE": "off"})
    real = dict(zip(corpus, (line == "true" for line in result.stdout.splitlines()), strict=True))
    assert _agree(parse_go_duration, real) == {}, real
    assert real == GO_CORPUS


def test_no_stack_file_changes_meaning() -> None:
    """Every committed stack still parses (the stricter grammars refuse nothing they hold)."""
    from stages.config import parse_stack_config
    from verify.plan import known_stacks, stack_config

    for stack in known_stacks(ROOT):
        project, config, secrets = stack_config(ROOT, stack)
        raw = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("gtp:")}
        parse_stack_config(raw, project=project, stack=stack, secret_keys=[s.split(":", 1)[1] for s in secrets])

