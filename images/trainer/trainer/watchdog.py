"""A hang watchdog: a stalled step becomes a clean process exit, so the launcher restarts the gang.

A rank that stops (SIGSTOP, a wedged driver, a peer lost mid-collective) leaves every other rank blocked in its next
collective until the process group's timeout — 10 minutes here (trainer.distributed.init_distributed), 30 by default
(torch/distributed/constants.py `default_pg_timeout`) — and burns the whole gang meanwhile. The watchdog is a
daemon thread the loop feeds once per completed step; when no step completes for `timeout_s` it writes one JSON line
(`{"event": "watchdog", ...}`) and Python's stack of every thread to stderr, then leaves with EXIT_WATCHDOG through
`os._exit` (a graceful shutdown could block on the very collective that hangs).

What happens next is the launcher's: torchrun's elastic agent polls its workers (torch 2.13
torch/distributed/elastic/agent/server/local_elastic_agent.py `_monitor_workers`: a worker that exited non-zero
makes the group FAILED), and with restarts left stops the rest — SIGTERM, then SIGKILL after 30 s
(local_elastic_agent.py:517-527 `_shutdown(death_sig=SIGTERM, timeout=30)`, multiprocessing/api.py:1023-1075
`SubprocessContext._close`), which also ends a stopped process — and starts a new round; every rank resumes from the
newest complete checkpoint. A PyTorchJob without torchrun restarts the pod (restartPolicy OnFailure).

Checkpoint saves are not steps: the loop pauses the watchdog around them (a slow save is not a hang; a hung one shows
in the checkpoint-age alert). The watchdog arms at the first completed step: start-up (rendezvous, process group,
resume) is bounded by the rendezvous and process-group timeouts instead.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from trainer.telemetry import base_fields, emit

EXIT_WATCHDOG = 3
"""Exit code of a process the watchdog ended (any non-zero code makes torchrun restart the gang)."""


def _exit(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class StepWatchdog:
    """Exits the process when no step completes for `timeout_s` seconds (0: off)."""

    def __init__(self, timeout_s: float, rank: int, *, clock: Callable[[], float] = time.monotonic,
                 on_expire: Callable[[int], None] = _exit, poll_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.rank = rank
        self._clock = clock
        self._on_expire = on_expire
        self._poll_s = poll_s if poll_s is not None else min(1.0, max(timeout_s / 10, 0.05))
        self._lock = threading.Lock()
        self._last_beat: float | None = None  # None: not armed (before the first step, or paused)
        self._step = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired = False

    @property
    def enabled(self) -> bool:
        return self.timeout_s > 0

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="trainer-watchdog", daemon=True)
            self._thread.start()

    def beat(self, step: int) -> None:
        """A step completed: (re)arm the deadline."""
        with self._lock:
            self._last_beat = self._clock()
            self._step = step

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No deadline inside (a checkpoint save); re-armed from its end."""
        with self._lock:
            armed = self._last_beat is not None
            self._last_beat = None
        try:
            yield
        finally:
            if armed:
                with self._lock:
                    self._last_beat = self._clock()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def check(self) -> bool:
        """One look at the deadline (the thread's loop body); True when it fired."""
        with self._lock:
            last, step = self._last_beat, self._step
        if last is None or self.fired:
            return False
        stalled = self._clock() - last
        if stalled < self.timeout_s:
            return False
        self.fired = True
        emit({"event": "watchdog", **base_fields(self.rank), "step": step, "stalled_s": round(stalled, 3),
              "timeout_s": self.timeout_s,
              "message": f"no training step completed for {stalled:.1f} s (--watchdog-timeout {self.timeout_s:g}): "
                         "a hung collective or a stalled rank; exiting so the launcher restarts the gang from the "
                         "last complete checkpoint"})
        with contextlib.suppress(Exception):  # the stacks say where it hung; never let them block the exit
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        self._on_expire(EXIT_WATCHDOG)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            if self.check():
                return
