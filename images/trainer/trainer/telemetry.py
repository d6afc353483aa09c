"""JSON-lines logs, Prometheus metrics and the TTY-only progress bar."""

from __future__ import annotations

import json
import os
import socket
import sys
import time

import torch


def emit(record: dict) -> None:
    """One JSON object per line on stdout, flushed at once: one write below PIPE_BUF never interleaves with another
    rank's line in a shared pipe (torchrun workers inherit its stdout)."""
    sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def parse_records(text: str) -> list[dict]:
    """The JSON objects in `text` (what `emit` wrote), skipping anything else on the stream (warnings, tracebacks,
    a line cut short by a killed process)."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return records


def base_fields(rank: int) -> dict:
    return {"node": socket.gethostname(), "rank": rank, "pid": os.getpid()}


def gpu_fields(device: torch.device) -> dict:
    """Utilisation (needs NVML via torch) and memory of this rank's GPU; nothing on CPU."""
    if device.type != "cuda":
        return {}
    fields = {"gpu_mem_allocated_mib": round(torch.cuda.memory_allocated(device) / 2**20, 1),
              "gpu_mem_max_allocated_mib": round(torch.cuda.max_memory_allocated(device) / 2**20, 1)}
    try:
        fields["gpu_util_pct"] = torch.cuda.utilization(device)
    except Exception:  # pynvml missing or NVML unavailable in the container: memory is still useful
        pass
    return fields


class Metrics:
    """Prometheus gauges on ``port`` (a private registry, so several trainers in one process never collide)."""

    def __init__(self, port: int | None, rank: int, serve: bool = True) -> None:
        """`serve` false: build the registry without an HTTP server (tests read it with `exposition`)."""
        self.enabled = port is not None
        if not self.enabled:
            return
        from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

        self.registry = CollectorRegistry()
        labels = {"rank": str(rank)}
        self.step_time = Gauge("trainer_step_time_seconds", "Wall time of the last optimizer step",
                               list(labels), registry=self.registry).labels(**labels)
        self.throughput = Gauge("trainer_samples_per_second", "Samples per second of this rank (last step)",
                                list(labels), registry=self.registry).labels(**labels)
        self.step = Gauge("trainer_step", "Optimizer steps completed", list(labels),
                          registry=self.registry).labels(**labels)
        # Set at start and after every step: Prometheus' stall alert (components/alert_rules.py
        # `TrainingStepStalled`) measures the time since it, which a flat step counter can't give for a window
        # that depends on the step time.
        self.last_step_time = Gauge("trainer_last_step_timestamp_seconds",
                                    "Unix time of the last completed optimizer step (or of the start)", list(labels),
                                    registry=self.registry).labels(**labels)
        self.last_step_time.set_to_current_time()
        self.checkpoint_step = Gauge("trainer_last_checkpoint_step", "Step of the newest complete checkpoint",
                                     list(labels), registry=self.registry).labels(**labels)
        self.samples = Counter("trainer_samples", "Samples consumed by this rank", list(labels),
                               registry=self.registry).labels(**labels)
        if serve:
            start_http_server(port, registry=self.registry)

    def exposition(self) -> str:
        """The registry in Prometheus' text format, as /metrics serves it."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode() if self.enabled else ""

    def observe_step(self, step: int, step_time_s: float, samples: int) -> None:
        if not self.enabled:
            return
        self.step_time.set(step_time_s)
        self.throughput.set(samples / step_time_s if step_time_s > 0 else 0.0)
        self.step.set(step)
        self.last_step_time.set_to_current_time()
        self.samples.inc(samples)

    def observe_checkpoint(self, step: int | None) -> None:
        if self.enabled and step is not None:
            self.checkpoint_step.set(step)


class ProgressBar:
    """Drawn on stderr only when both stdout and stderr are TTYs, so it never lands in collected logs."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and sys.stdout.isatty() and sys.stderr.isatty()
        self._last_draw = 0.0

    def update(self, step: int, loss: float) -> None:
        if not self.enabled or (time.monotonic() - self._last_draw < 0.1 and step < self.total):
            return
        self._last_draw = time.monotonic()
        width = 30
        filled = int(width * step / max(1, self.total))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {step}/{self.total} loss {loss:.4f}")
        if step >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()
