"""Values the stack hands to another program, read at plan time by that program's own grammar: a value the consumer
would refuse (or silently read otherwise) is a config problem with its key path, not a crash-looping pod or a
Prometheus that won't start.

- `workloads.<name>.extraArgs`: the trainer's argparse parser and `TrainConfig` checks (images/trainer/trainer/
  config.py, loaded by file path: no torch), over the whole argv the platform passes.
- `workloads.<name>.benchSizes`: the bench's `parse_size` (images/trainer/trainer/bench.py).
- `gpu.metrics.retention`, `kueue.admissionBudget`: Prometheus' `model.ParseDuration`; `kueue.waitForPodsReadyTimeout`:
  Go's `time.ParseDuration` (conventions/durations.py).
- `workloads.<name>.memory`/`shmSize`/`ephemeralStorage`: Kubernetes' quantity grammar (conventions/quantities.py),
  with a unit required where a bare number would silently mean bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from conventions.durations import (
    GO_UNITS,
    NANOSECONDS_PER_SECOND,
    PROMETHEUS_UNITS,
    parse_go_duration,
    parse_prometheus_duration,
)
from conventions.quantities import parse_quantity, quantity_unit
from conventions.trainer_cli import (
    PLATFORM_OWNED,
    WATCHDOG_DEST,
    checkpoint_dir,
    flag,
    platform_flags,
    trainer_function,
    trainer_module,
)
from stack_config.problems import Problem, did_you_mean
from stack_config.schema import StackConfig, WorkloadConfig

# --------------------------------------------------------------------------------- extraArgs: the trainer's parser

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""argparse's `_negative_number_matcher` (Lib/argparse.py): with no option that looks like one, such an element is
a value, not a flag."""


class _Refused(Exception):
    """argparse's `error(message)`, raised instead of printing usage and exiting."""


def _parser() -> argparse.ArgumentParser:
    parser = trainer_module("config").build_parser()

    def refuse(message: str) -> None:
        raise _Refused(message)

    parser.error = refuse  # type: ignore[method-assign]
    return parser


@dataclass(frozen=True)
class _Unit:
    """One flag of extraArgs as argparse consumes it: its element, and the next one when that is its value."""

    index: int
    elements: tuple[str, ...]
    action: argparse.Action

    @property
    def value_index(self) -> int:
        return self.index + len(self.elements) - 1


def _resolve(parser: argparse.ArgumentParser, name: str) -> tuple[argparse.Action | None, list[str]]:
    """The action argparse runs for option `name` (Lib/argparse.py `_parse_optional`, `_get_option_tuples`): an exact
    option string, else the one `--` option it is a prefix of (`allow_abbrev`); with the candidates when ambiguous."""
    actions = parser._option_string_actions
    if name in actions:
        return actions[name], []
    if not (name.startswith("--") and parser.allow_abbrev):
        return None, []
    candidates = sorted(option for option in actions if option.startswith(name))
    if len(candidates) == 1:
        return actions[candidates[0]], []
    return None, candidates


def _allowed(parser: argparse.ArgumentParser) -> list[str]:
    fields = dataclasses.fields(trainer_module("config").TrainConfig)
    return [flag(spec.name) for spec in fields if spec.name not in PLATFORM_OWNED]


def _refusal(parser: argparse.ArgumentParser, unit: _Unit) -> str | None:
    """argparse's verdict on one flag alone: its value's type, its choices, a switch given a value."""
    try:
        parser.parse_args(list(unit.elements))
    except _Refused as refused:
        return str(refused)
    return None


def _own_key(p: str, dest: str) -> str:
    key = PLATFORM_OWNED[dest]
    if dest == WATCHDOG_DEST:
        return (f"{flag(dest)} is the platform's hang protection: the trainer's default (600 s) ends a rank that "
                "completes no step, so the gang restarts from its last checkpoint (docs/operations.md, \"Hung ranks\"; "
                "the TrainingStepStalled alert expects it); remove it")
    if key is None:
        return f"the platform sets {flag(dest)} itself (its own wiring: the job's checkpoint directory, the metrics " \
               "port Prometheus scrapes); remove it"
    return f"the platform sets {flag(dest)} itself, from {p}.{key}; set {p}.{key} instead"


def _check_extra_args(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """`extraArgs` as the trainer reads them (images/trainer/trainer/config.py `parse_config`: `build_parser()`, then
    `TrainConfig(**vars(namespace))`), appended to the flags the platform passes (components/training_pod.py
    `trainer_args`; the same on Swarm, workload_kinds/swarm.py). `entrypoint: bench` passes none of them
    (`bench_args`), and a team's own `image` takes `command` instead (stack_config/applicability.py)."""
    if workload.image is not None or workload.entrypoint != "train" or not workload.extra_args:
        return
    args = list(workload.extra_args)
    parser = _parser()
    units: list[_Unit] = []
    index = 0
    while index < len(args):
        element = args[index]
        path = f"{p}.extraArgs[{index}]"
        index += 1
        if not element.startswith("-") or element == "-" or _NEGATIVE_NUMBER.match(element) or " " in element:
            allowed = _allowed(parser)
            yield Problem(path, f"{element!r} is not a flag of the trainer (python -m trainer.train takes no "
                                f"positional arguments); allowed: {', '.join(allowed)}")
            continue
        name, equals, _ = element.partition("=") if element.startswith("--") else (element, "", "")
        action, candidates = _resolve(parser, name)
        if action is None:
            allowed = _allowed(parser)
            ambiguous = f" (it abbreviates {', '.join(candidates)}; argparse refuses that)" if candidates else ""
            yield Problem(path, f"{element!r} is not a flag of the trainer{ambiguous}"
                                f"{did_you_mean(name, allowed)}; allowed: {', '.join(allowed)}")
            continue
        if isinstance(action, argparse._HelpAction):
            yield Problem(path, f"{element!r}: the trainer prints its usage and exits, so the job would train "
                                "nothing; remove it (`python -m trainer.train --help` lists the flags)")
            continue
        elements = [element]
        if action.nargs is None and not equals and index < len(args) and (
                not args[index].startswith("-") or _NEGATIVE_NUMBER.match(args[index])):
            elements.append(args[index])
            index += 1
        units.append(_Unit(index - len(elements), tuple(elements), action))
    good: dict[str, _Unit] = {}
    for unit in units:
        path = f"{p}.extraArgs[{unit.index}]"
        text = " ".join(unit.elements)
        dest = unit.action.dest
        if dest in PLATFORM_OWNED:
            yield Problem(path, f"{text!r}: {_own_key(p, dest)}")
            continue
        refusal = _refusal(parser, unit)
        if refusal is not None:
            if unit.action.nargs == 0:
                refusal = f"{flag(dest)} is a switch and takes no value; write {flag(dest)!r} alone"
            yield Problem(f"{p}.extraArgs[{unit.value_index}]", f"{text!r}: the trainer refuses it ({refusal})")
            continue
        if dest in good:
            first = good[dest]
            yield Problem(f"{p}.extraArgs[{first.index}]",
                          f"{' '.join(first.elements)!r}: {flag(dest)} is given again at {path}, and the trainer "
                          "uses only the last; remove one")
        good[dest] = unit
    argv = platform_flags(model=workload.model, max_steps=workload.max_steps, batch_size=workload.batch_size,
                          checkpoint_dir=checkpoint_dir(config.storage.mount_path, workload.name),
                          checkpoint_every=workload.checkpoint_every, metrics_port=None)
    argv += [element for unit in sorted(good.values(), key=lambda unit: unit.index) for element in unit.elements]
    try:
        trainer_module("config").TrainConfig(**vars(parser.parse_args(argv)))
    except _Refused as refused:  # every flag passed alone; nothing left to refuse in combination but this
        yield Problem(f"{p}.extraArgs", f"the trainer refuses the flags together ({refused})")
    except ValueError as error:
        ours = {flag(unit.action.dest): unit for unit in good.values()}
        for line in str(error).splitlines()[1:]:
            line = line.strip().removeprefix("- ")
            mentioned = [name for name in re.findall(r"--[a-z][a-z0-9-]*", line) if name in ours]
            path = f"{p}.extraArgs[{ours[mentioned[0]].index}]" if mentioned else f"{p}.extraArgs"
            given = f"{' '.join(ours[mentioned[0]].elements)!r}: " if mentioned else ""
            yield Problem(path, f"{given}the trainer's own checks refuse it (trainer/config.py TrainConfig, with the "
                                f"platform's {' '.join(argv[:5])}): {line}")


# ------------------------------------------------------------------------------- benchSizes: the bench's parser

SMALLEST_ALLREDUCE_BYTES = 4
"""trainer/bench.py `allreduce_sweep` sends max(1, size // 4) float32 elements: anything smaller measures 4 bytes."""


def _check_bench_sizes(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """`benchSizes` as `python -m trainer.bench --sizes` reads it: split on ',' and each through `parse_size`
    (images/trainer/trainer/bench.py), which raises ValueError (the bench exits 2) or, for `inf`, OverflowError (it
    crashes)."""
    sizes = workload.bench_sizes
    parse_size = trainer_function("bench", "parse_size")
    for item in sizes.split(","):
        try:
            size = parse_size(item)
        except (ValueError, OverflowError):
            yield Problem(f"{p}.benchSizes", f"{sizes!r} is not a comma-separated size list like '1M,16M,128M' as the "
                          f"bench reads it (trainer/bench.py parse_size): {item!r} is not a size; allowed: a number of "
                          "bytes, optionally with K, M or G (powers of 1024, any case, an optional trailing B), e.g. "
                          "'4K', '1M' or '1G'")
            return
        if size < SMALLEST_ALLREDUCE_BYTES:
            yield Problem(f"{p}.benchSizes", f"{sizes!r}: {item!r} is {size} bytes, less than the one float32 "
                          f"({SMALLEST_ALLREDUCE_BYTES} bytes) the bench's smallest all-reduce sends (trainer/bench.py "
                          f"allreduce_sweep), so it would measure {SMALLEST_ALLREDUCE_BYTES} bytes; use at least "
                          f"'{SMALLEST_ALLREDUCE_BYTES}'")
            return


# ---------------------------------------------------------------------------------------------------- durations

PROMETHEUS_DEFAULT_RETENTION = "15d"
"""cmd/prometheus/main.go:136 at v3.6.0 `defaultRetentionString`."""


def _check_retention(config: StackConfig) -> Iterator[Problem]:
    """`gpu.metrics.retention` is Prometheus' `--storage.tsdb.retention.time` (the chart's `server.retention`,
    templates/deploy.yaml:195-197 at 27.39.0), a model.Duration flag (cmd/prometheus/main.go:447-448 at v3.6.0)."""
    retention = config.gpu.metrics.retention
    try:
        nanoseconds = parse_prometheus_duration(retention)
    except ValueError as error:
        yield Problem("gpu.metrics.retention", f"{retention!r} is not a Prometheus duration; write e.g. '15d', '2w' or "
                      f"'12h' (units {PROMETHEUS_UNITS}: whole numbers, largest unit first, each at most once; at most "
                      f"292y). Prometheus: {error}")
        return
    if nanoseconds == 0:
        # main.go:717-720: no retention time and no retentionSize means the default; with a retentionSize (the
        # platform sets one on EKS, components/gpu_metrics.py) a zero time means no time limit at all.
        yield Problem("gpu.metrics.retention", f"{retention!r} is zero, which Prometheus replaces: it keeps "
                      f"{PROMETHEUS_DEFAULT_RETENTION} without a retentionSize, and without any time limit with one "
                      "(the platform sets one on EKS), while the platform sizes Prometheus' volume from this value "
                      "(cmd/prometheus/main.go:717-720 at v3.6.0); write the retention you want, e.g. '15d'")


def _check_kueue_durations(config: StackConfig) -> Iterator[Problem]:
    """`kueue.waitForPodsReadyTimeout` is Kueue's `waitForPodsReady.timeout`, a metav1.Duration (Go's
    time.ParseDuration; components/kueue.py `manager_config`), also the stack's start-up bound in whole seconds
    (stack_config.derived.duration_seconds). `kueue.admissionBudget` is the `for:` and range of Prometheus'
    KueueGangPendingTooLong rule (components/alert_rules.py), a Prometheus duration."""
    timeout = config.kueue.wait_for_pods_ready_timeout
    path = "kueue.waitForPodsReadyTimeout"
    try:
        nanoseconds = parse_go_duration(timeout)
    except ValueError as error:
        yield Problem(path, f"{timeout!r} is not a duration Kueue reads (a Go duration: a number, fractions allowed, "
                            f"before each unit of {GO_UNITS}); write e.g. '10m', '1h' or '1h30m'. Go: {error}")
    else:
        if nanoseconds <= 0:
            yield Problem(path, f"{timeout!r} must be more than zero: admitted jobs get this long for their pods to "
                                "become ready; write e.g. '10m'")
        elif nanoseconds % NANOSECONDS_PER_SECOND:
            yield Problem(path, f"{timeout!r} is not a whole number of seconds ({nanoseconds} ns): the platform also "
                                "uses it in seconds, as a multi-node PyTorchJob's rendezvous timeout; write e.g. "
                                f"'{math.ceil(nanoseconds / NANOSECONDS_PER_SECOND)}s'")
    budget = config.kueue.admission_budget
    path = "kueue.admissionBudget"
    try:
        nanoseconds = parse_prometheus_duration(budget)
    except ValueError as error:
        yield Problem(path, f"{budget!r} is not a duration Prometheus reads (a Prometheus duration: units "
                            f"{PROMETHEUS_UNITS}, whole numbers, largest unit first, each at most once); write e.g. "
                            f"'30m', '2h' or '1d'. Prometheus: {error}")
    else:
        if nanoseconds == 0:
            yield Problem(path, f"{budget!r} must be more than zero: it is how long a gang may wait before "
                                "KueueGangPendingTooLong fires, and the window in which it counts admissions; write "
                                "e.g. '30m'")


# ---------------------------------------------------------------------------------------------------- quantities

BYTE_QUANTITIES = (("memory", "memory"), ("shm_size", "shmSize"), ("ephemeral_storage", "ephemeralStorage"))
"""Workload fields whose Kubernetes quantity is bytes."""
_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10),
          ("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def with_unit(amount: Any) -> str:
    """An amount of bytes written with a unit: the shortest exact form, else rounded up to Ki."""
    exact = [f"{amount // size}{unit}" for unit, size in _UNITS if amount % size == 0 and amount >= size]
    return min(exact, key=len) if exact else f"{math.ceil(amount / 1024)}Ki"


def _check_units(config: StackConfig, workload: WorkloadConfig, p: str) -> Iterator[Problem]:
    """A size without a unit (`262144`, `8e9`) is bytes to Kubernetes (quantity.go:54, the "" decimalSI suffix):
    almost always a mistake for `256Mi`-like values, so the platform asks for a unit. Unparseable quantities are
    `_check_quantities`' (stack_config/rules.py). cpu without a unit is cores, as meant."""
    for field, key in BYTE_QUANTITIES:
        value = getattr(workload, field)
        try:
            amount, unit = parse_quantity(value), quantity_unit(value)
        except ValueError:
            continue
        if amount > 0 and (unit == "" or (unit[0] in "eE" and len(unit) > 1)):
            count = f"{amount.numerator}" if amount.denominator == 1 else f"{float(amount):g}"
            yield Problem(f"{p}.{key}", f"{value!r} has no unit, so Kubernetes reads it as {count} bytes "
                                        f"({float(amount) / 2**30:.3g} GiB); write it with a unit: "
                                        f"{with_unit(amount)!r} for that amount, or e.g. '256Mi' or '16Gi'")


def _each_workload(check: Callable[[StackConfig, WorkloadConfig, str], Iterable[Problem]]
                   ) -> Callable[[StackConfig], Iterator[Problem]]:
    def rule(config: StackConfig) -> Iterator[Problem]:
        for name, workload in config.workloads.items():
            yield from check(config, workload, f"workloads.{name}")
    rule.__name__ = check.__name__
    return rule


CONSUMER_RULES: tuple[tuple[Callable[[StackConfig], Iterable[Problem]], tuple[str, ...]], ...] = (
    (_each_workload(_check_extra_args), ("workloads", "storage")),
    (_each_workload(_check_bench_sizes), ("workloads",)),
    (_each_workload(_check_units), ("workloads",)),
    (_check_retention, ("gpu",)),
    (_check_kueue_durations, ("kueue",)),
)
"""The rules of this module with the top-level sections they read (stack_config/rules.py runs them)."""
