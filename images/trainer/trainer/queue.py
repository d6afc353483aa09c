"""Consume one training request from SQS and run a command for it (the KEDA ScaledJob's entry point).

KEDA starts one Job per message in the stack's queue; each Job's pod runs::

    python -m trainer.queue -- torchrun --standalone --nnodes=1 --nproc-per-node=1 -m trainer.train --max-steps=100

1. Receive ONE message (long poll, ``--wait-seconds``), invisible to others for ``--visibility-seconds``.
   Empty queue (another Job took it first: KEDA counts, then starts Jobs): ``{"event": "queue_empty"}``, exit 0.
2. Run the command with the message's overrides appended as trainer flags. While it runs, a heartbeat thread
   extends the message's visibility every ``--visibility-seconds / 3``; a failed heartbeat is logged, not fatal.
   SIGTERM / SIGINT are forwarded to the command (preemption: the trainer checkpoints and stops).
3. Exit 0: delete the message (the work is done). Any other exit: keep it. It becomes visible again once the
   visibility lapses and is retried; after the queue's ``maxReceiveCount`` (3) receives SQS moves it to the
   dead-letter queue. The exit code is the command's (128 + N when it died of signal N).

Message body: a JSON object of overrides, appended as flags (argparse keeps the last occurrence, so the command
must end with ``trainer.train``'s flags): ``max_steps``, ``batch_size``, ``seed`` (integers) and ``lr`` (number).
Other keys are logged as warnings and ignored; an empty or non-JSON body means no overrides; an allowed key with a
value of the wrong type is a bad request: exit 2 without running, the message is kept (it ends in the DLQ).

With ``--checkpoint-root DIR``, each request trains in its own ``DIR/<message id>`` (appended as
``--checkpoint-dir``): a retried message (same id) resumes its own checkpoint, and a new request never resumes a
previous request's finished run.

Exit codes: the command's; 2 bad request, bad flags or boto3 missing; 127 the command could not be started;
128 + N when signal N arrived before the command started (the message is released at once).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

EXIT_BAD_REQUEST = 2
EXIT_COMMAND_NOT_RUN = 127
"""The shell's code for a command that could not be started."""
DEFAULT_VISIBILITY_SECONDS = 900
DEFAULT_WAIT_SECONDS = 20
SQS_MAX_VISIBILITY_SECONDS = 43200
"""SQS caps a visibility timeout (and a message's total invisibility since its receive) at 12 h."""

OVERRIDE_FLAGS: dict[str, tuple[str, tuple[type, ...]]] = {
    "max_steps": ("--max-steps", (int,)),
    "batch_size": ("--batch-size", (int,)),
    "seed": ("--seed", (int,)),
    "lr": ("--lr", (int, float)),
}
"""Message keys a request may override → (trainer flag, accepted JSON types)."""


def emit(record: dict[str, Any]) -> None:
    """One JSON line on stdout, like the trainer's (telemetry.emit imports torch; this process needs none)."""
    sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class BadRequest(ValueError):
    """The message asks for something no retry can fix."""


@dataclass(frozen=True)
class Message:
    message_id: str
    receipt_handle: str
    body: str


class SqsQueue:
    """The only code that talks to SQS: a thin layer over a boto3 SQS client, for one queue."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def receive(self, *, visibility_seconds: int, wait_seconds: int) -> Message | None:
        # VisibilityTimeout on the receive overrides the queue's default (12 h), so a consumer that dies without
        # deleting releases its message after one heartbeat period, not half a day later.
        response = self.client.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=1,
                                               WaitTimeSeconds=wait_seconds, VisibilityTimeout=visibility_seconds)
        messages = response.get("Messages") or []
        if not messages:
            return None
        raw = messages[0]
        return Message(message_id=raw["MessageId"], receipt_handle=raw["ReceiptHandle"], body=raw.get("Body", ""))

    def extend(self, message: Message, visibility_seconds: int) -> None:
        self.client.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=message.receipt_handle,
                                              VisibilityTimeout=visibility_seconds)

    def delete(self, message: Message) -> None:
        self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message.receipt_handle)


def sqs_client(region: str | None) -> Any:
    """A boto3 SQS client (credentials from the default chain: EKS Pod Identity in the cluster)."""
    try:
        import boto3
    except ImportError as error:
        raise RuntimeError("trainer.queue needs boto3 (the image installs it from requirements.lock; elsewhere "
                           "`pip install boto3`)") from error
    return boto3.client("sqs", region_name=region or None)


def override_flags(body: str) -> list[str]:
    """Trainer flags from a message body. Unknown keys and non-JSON bodies are logged and ignored; an allowed key
    with a value of the wrong type raises BadRequest."""
    if not body.strip():
        return []
    try:
        request = json.loads(body)
    except ValueError as error:
        emit({"event": "queue_body_ignored", "level": "warning", "reason": f"not JSON: {error}"})
        return []
    if not isinstance(request, dict):
        emit({"event": "queue_body_ignored", "level": "warning",
              "reason": f"a JSON {type(request).__name__}, not an object"})
        return []
    flags = []
    for key, value in request.items():
        if key not in OVERRIDE_FLAGS:
            emit({"event": "queue_override_ignored", "level": "warning", "key": key,
                  "allowed": sorted(OVERRIDE_FLAGS)})
            continue
        flag, types = OVERRIDE_FLAGS[key]
        # bool is an int subclass in Python; JSON true is no step count.
        if isinstance(value, bool) or not isinstance(value, types) or (isinstance(value, float)
                                                                        and not math.isfinite(value)):
            expected = " or ".join("integer" if t is int else "number" for t in types)
            raise BadRequest(f"message key {key!r} must be a JSON {expected}, got {json.dumps(value)}")
        flags.append(f"{flag}={value!r}" if isinstance(value, float) else f"{flag}={value}")
    return flags


def exit_code(returncode: int) -> int:
    """Popen's returncode as a shell would report it (killed by signal N → 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def wait(child: subprocess.Popen) -> int:
    """The child's returncode. Never one blocking waitpid: a SIGTERM the kernel delivers to another thread (the
    heartbeat's) would not interrupt it, and Python runs the forwarding handler only between the main thread's
    bytecodes, so the child would never hear of the preemption."""
    while True:
        try:
            return child.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue


class Heartbeat:
    """Extends the message's visibility every `visibility_seconds / 3` until stopped."""

    def __init__(self, queue: SqsQueue, message: Message, visibility_seconds: int) -> None:
        self.queue, self.message, self.visibility_seconds = queue, message, visibility_seconds
        self.interval = visibility_seconds / 3
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqs-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.queue.extend(self.message, self.visibility_seconds)
            except Exception as error:  # the next beat may succeed; the lapse only risks a duplicate run
                emit({"event": "queue_heartbeat_failed", "level": "warning", "message_id": self.message.message_id,
                      "error": f"{type(error).__name__}: {error}"})


class SignalForwarder:
    """SIGTERM / SIGINT: remembered, and passed on to the child once it runs (the kubelet signals PID 1 only)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self.child: subprocess.Popen | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalForwarder:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, _frame: object) -> None:
        self.received = signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)
            try:
                emit({"event": "queue_signal_forwarded", "signal": signum, "child_pid": self.child.pid})
            except RuntimeError:  # interrupted the main thread's own write to stdout ("reentrant call")
                pass

    def adopt(self, child: subprocess.Popen) -> None:
        self.child = child
        if self.received is not None:  # arrived while the child was being started
            self._handle(self.received, None)


def checkpoint_flags(checkpoint_root: str | None, message_id: str) -> list[str]:
    """`--checkpoint-dir` of one request: its own folder under the root, named by the SQS message id (stable
    across retries of the same message)."""
    if checkpoint_root is None:
        return []
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in message_id)
    return [f"--checkpoint-dir={checkpoint_root.rstrip('/')}/{safe}"]


def consume(queue: SqsQueue, command: Sequence[str], *, visibility_seconds: int = DEFAULT_VISIBILITY_SECONDS,
            wait_seconds: int = DEFAULT_WAIT_SECONDS, checkpoint_root: str | None = None,
            popen: Callable[[list[str]], subprocess.Popen] = subprocess.Popen) -> int:
    """Receive one message, run `command` + its overrides, delete the message iff the command exits 0."""
    with SignalForwarder() as signals:
        message = queue.receive(visibility_seconds=visibility_seconds, wait_seconds=wait_seconds)
        if message is None:
            emit({"event": "queue_empty"})
            return 0
        emit({"event": "queue_received", "message_id": message.message_id})
        if signals.received is not None:
            # Stopped during the long poll: hand the message back at once instead of sitting on it.
            try:
                queue.extend(message, 0)
                emit({"event": "queue_released", "message_id": message.message_id, "signal": signals.received})
            except Exception as error:  # it comes back after the visibility timeout anyway
                emit({"event": "queue_release_failed", "level": "warning", "message_id": message.message_id,
                      "error": f"{type(error).__name__}: {error}"})
            return 128 + signals.received
        try:
            argv = [*command, *checkpoint_flags(checkpoint_root, message.message_id), *override_flags(message.body)]
        except BadRequest as error:
            print(f"trainer.queue: error: {error}", file=sys.stderr)
            emit({"event": "error", "kind": "bad_request", "message_id": message.message_id, "message": str(error)})
            return EXIT_BAD_REQUEST
        emit({"event": "queue_run", "message_id": message.message_id, "argv": argv})
        with Heartbeat(queue, message, visibility_seconds):
            try:
                child = popen(argv)
            except OSError as error:  # e.g. the command is not in the image: kept, retried, dead-lettered
                print(f"trainer.queue: error: cannot run {argv[0]!r}: {error}", file=sys.stderr)
                emit({"event": "error", "kind": "command", "message_id": message.message_id, "message": str(error)})
                return EXIT_COMMAND_NOT_RUN
            signals.adopt(child)
            code = exit_code(wait(child))
        if code != 0:
            emit({"event": "queue_kept", "message_id": message.message_id, "exit_code": code,
                  "retry_after_s": visibility_seconds})
            return code
        try:
            queue.delete(message)
        except Exception as error:
            # The work is done; only a duplicate run (resuming from the final checkpoint) is at stake.
            emit({"event": "queue_delete_failed", "level": "error", "message_id": message.message_id,
                  "error": f"{type(error).__name__}: {error}"})
        else:
            emit({"event": "queue_deleted", "message_id": message.message_id})
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.queue",
        usage="python -m trainer.queue [--queue-url URL] [--region R] [--visibility-seconds N] [--wait-seconds N] "
              "-- COMMAND...",
        description="Receive one SQS message, run COMMAND with the message's overrides (JSON keys max_steps, "
                    "batch_size, seed, lr) appended as trainer flags, delete the message when COMMAND exits 0.",
        epilog="Exit codes: COMMAND's (128+N if killed by signal N); 0 when the queue is empty; 2 bad request or "
               "flags; 127 COMMAND could not be started.")
    parser.add_argument("--queue-url", default=os.environ.get("GTP_QUEUE_URL"),
                        help="SQS queue URL. Default: $GTP_QUEUE_URL.")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
                        help="AWS region. Default: $AWS_REGION, else $AWS_DEFAULT_REGION.")
    parser.add_argument("--visibility-seconds", type=int, default=DEFAULT_VISIBILITY_SECONDS, metavar="N",
                        help="How long the message stays invisible after a receive or heartbeat; the heartbeat "
                             f"runs every N/3 s. Default: {DEFAULT_VISIBILITY_SECONDS}.")
    parser.add_argument("--checkpoint-root", default=None, metavar="DIR",
                        help="Train each request in DIR/<message id> (appended as --checkpoint-dir).")
    parser.add_argument("--wait-seconds", type=int, default=DEFAULT_WAIT_SECONDS, metavar="N",
                        help=f"Long-poll wait for a message (0..20). Default: {DEFAULT_WAIT_SECONDS}.")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Options before `--`, the command after it."""
    parser = build_parser()
    argv = list(argv)
    if "--" not in argv:
        if any(arg in ("-h", "--help") for arg in argv):
            parser.parse_args(argv)  # prints help, exits 0
        parser.error("missing `-- COMMAND...` (the command to run for the message)")
    split = argv.index("--")
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    problems = []
    if not command:
        problems.append("the command after `--` is empty")
    if not args.queue_url:
        problems.append("no queue: pass --queue-url or set GTP_QUEUE_URL")
    if not 1 <= args.visibility_seconds <= SQS_MAX_VISIBILITY_SECONDS:
        problems.append(f"--visibility-seconds must be in 1..{SQS_MAX_VISIBILITY_SECONDS}, "
                        f"got {args.visibility_seconds}")
    if not 0 <= args.wait_seconds <= 20:
        problems.append(f"--wait-seconds must be in 0..20 (SQS long-poll limit), got {args.wait_seconds}")
    if problems:
        parser.error("; ".join(problems))
    return args, command


def main(argv: Sequence[str] | None = None, *, client: Any = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    if client is None:
        try:
            client = sqs_client(args.region)
        except RuntimeError as error:
            print(f"trainer.queue: error: {error}", file=sys.stderr)
            emit({"event": "error", "kind": "permanent", "message": str(error)})
            return EXIT_BAD_REQUEST
    return consume(SqsQueue(client, args.queue_url), command, visibility_seconds=args.visibility_seconds,
                   wait_seconds=args.wait_seconds, checkpoint_root=args.checkpoint_root)


if __name__ == "__main__":
    sys.exit(main())
