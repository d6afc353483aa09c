"""`python -m trainer.queue`: one SQS message per run, deleted only when the command succeeds (moto's SQS).

The consumer runs in this process (moto patches botocore here); the commands are small `sys.executable -c`
children, not torchrun, so each test takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from trainer import queue as trainer_queue

pytestmark = pytest.mark.torchrun


REGION = "us-west-2"


@pytest.fixture
def sqs(monkeypatch):
    """A moto SQS client and a fresh queue (the platform's queue has a 12 h default visibility)."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GTP_QUEUE_URL", raising=False)
    with mock_aws():
        client = boto3.client("sqs", region_name=REGION)
        url = client.create_queue(QueueName="requests", Attributes={"VisibilityTimeout": "43200"})["QueueUrl"]
        yield client, url


def send(client, url: str, body: object) -> str:
    return client.send_message(QueueUrl=url, MessageBody=body if isinstance(body, str) else json.dumps(body))[
        "MessageId"]


def count(client, url: str) -> tuple[int, int]:
    """(visible, in flight) messages."""
    attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def argv_recorder(path: Path, exit_code: int = 0) -> list[str]:
    """A command that writes its own argv (JSON) to `path` and exits `exit_code`."""
    return child(f"import json, sys; open({str(path)!r}, 'w').write(json.dumps(sys.argv[1:])); "
                 f"sys.exit({exit_code})") + ["--model=cnn", "--max-steps=100"]


def consume(client, url: str, command: list[str], *options: str) -> int:
    return trainer_queue.main(["--queue-url", url, "--wait-seconds", "1", *options, "--", *command], client=client)


def events(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def test_success_deletes_the_message(sqs, tmp_path, capsys):
    client, url = sqs
    message_id = send(client, url, {})
    assert consume(client, url, argv_recorder(tmp_path / "argv")) == 0
    assert json.loads((tmp_path / "argv").read_text()) == ["--model=cnn", "--max-steps=100"]
    assert count(client, url) == (0, 0)
    assert {"event": "queue_deleted", "message_id": message_id} in events(capsys)


def test_failure_keeps_the_message_until_its_visibility_lapses(sqs, tmp_path, capsys):
    client, url = sqs
    message_id = send(client, url, {"max_steps": 5})
    assert consume(client, url, argv_recorder(tmp_path / "argv", exit_code=1), "--visibility-seconds", "3") == 1
    assert (tmp_path / "argv").exists()
    kept = [e for e in events(capsys) if e["event"] == "queue_kept"]
    assert kept == [{"event": "queue_kept", "message_id": message_id, "exit_code": 1, "retry_after_s": 3}]
    # Still in flight (not deleted, not yet visible) ...
    assert count(client, url) == (0, 1)
    assert client.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages") is None
    # ... and received again once the 3 s visibility lapses (the queue's default 12 h does not apply).
    again = client.receive_message(QueueUrl=url, WaitTimeSeconds=6, AttributeNames=["ApproximateReceiveCount"])
    assert [(m["MessageId"], m["Attributes"]["ApproximateReceiveCount"]) for m in again["Messages"]] == [
        (message_id, "2")]


def test_each_request_trains_in_its_own_checkpoint_folder(sqs, tmp_path):
    client, url = sqs
    first, second = send(client, url, {}), send(client, url, {})
    seen = []
    for index in range(2):
        assert consume(client, url, argv_recorder(tmp_path / f"argv{index}"), "--checkpoint-root", "/mnt/ck/job") == 0
        seen.append(json.loads((tmp_path / f"argv{index}").read_text())[-1])
    assert sorted(seen) == sorted([f"--checkpoint-dir=/mnt/ck/job/{first}", f"--checkpoint-dir=/mnt/ck/job/{second}"])


def test_empty_queue_exits_0_without_running_the_command(sqs, tmp_path, capsys):
    client, url = sqs
    started = time.monotonic()
    assert consume(client, url, argv_recorder(tmp_path / "argv")) == 0
    assert time.monotonic() - started < 10
    assert not (tmp_path / "argv").exists()
    assert events(capsys) == [{"event": "queue_empty"}]


def test_overrides_reach_the_command_and_unknown_keys_are_ignored(sqs, tmp_path, capsys):
    client, url = sqs
    send(client, url, {"max_steps": 7, "batch_size": 16, "seed": 3, "lr": 0.0003, "fsdp": True,
                       "checkpoint_dir": "/etc"})
    assert consume(client, url, argv_recorder(tmp_path / "argv")) == 0
    # Appended after the command's own flags: trainer.train's argparse keeps the last occurrence.
    assert json.loads((tmp_path / "argv").read_text()) == [
        "--model=cnn", "--max-steps=100", "--max-steps=7", "--batch-size=16", "--seed=3", "--lr=0.0003"]
    warnings = [e for e in events(capsys) if e["event"] == "queue_override_ignored"]
    assert [(w["key"], w["level"]) for w in warnings] == [("fsdp", "warning"), ("checkpoint_dir", "warning")]
    assert count(client, url) == (0, 0)


def test_non_json_body_runs_without_overrides(sqs, tmp_path, capsys):
    client, url = sqs
    send(client, url, "train please")
    assert consume(client, url, argv_recorder(tmp_path / "argv")) == 0
    assert json.loads((tmp_path / "argv").read_text()) == ["--model=cnn", "--max-steps=100"]
    ignored = [e for e in events(capsys) if e["event"] == "queue_body_ignored"]
    assert len(ignored) == 1 and ignored[0]["reason"].startswith("not JSON")


@pytest.mark.parametrize("body", [{"max_steps": "100"}, {"max_steps": True}, {"lr": "fast"}, {"seed": 1.5}])
def test_override_of_the_wrong_type_is_a_bad_request_and_the_message_is_kept(sqs, tmp_path, capsys, body):
    client, url = sqs
    send(client, url, body)
    assert consume(client, url, argv_recorder(tmp_path / "argv")) == 2
    assert not (tmp_path / "argv").exists()
    assert count(client, url) == (0, 1)  # kept: retried, then dead-lettered after maxReceiveCount
    key = next(iter(body))
    assert f"message key {key!r} must be a JSON" in capsys.readouterr().err


def test_sigterm_is_forwarded_and_the_message_kept(sqs, tmp_path, capfd):
    client, url = sqs
    send(client, url, {})
    ready = tmp_path / "ready"
    # Like the trainer: on SIGTERM, "checkpoint" and exit 143. The line is one write(2), like telemetry.emit's: a
    # print() under PYTHONUNBUFFERED=1 writes the text and the newline apart, and the consumer's own line, written
    # to the same fd at the same moment, can land between them.
    script = ("import os, pathlib, signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *_: (os.write(1, b'child got SIGTERM\\n'), sys.exit(143)))\n"
              f"pathlib.Path({str(ready)!r}).write_text('ready')\n"
              "time.sleep(30)\n"
              "sys.exit(0)\n")

    def preempt() -> None:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # the kubelet signals PID 1: the consumer

    previous = signal.getsignal(signal.SIGTERM)
    killer = threading.Thread(target=preempt, daemon=True)
    killer.start()
    started = time.monotonic()
    assert consume(client, url, child(script)) == 143
    killer.join(timeout=5)
    assert time.monotonic() - started < 20, "the child was not stopped by the forwarded SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is previous  # handlers restored
    output = capfd.readouterr().out  # the child writes to the inherited fd 1
    assert "child got SIGTERM" in output
    recorded = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(e["event"] == "queue_signal_forwarded" and e["signal"] == signal.SIGTERM for e in recorded), output
    assert count(client, url) == (0, 1)


def test_heartbeat_keeps_the_message_invisible_while_the_command_runs(sqs, tmp_path, capsys):
    client, url = sqs
    message_id = send(client, url, {})
    seen: list[str] = []
    stop = threading.Event()

    ready = tmp_path / "ready"

    def other_consumer() -> None:  # another Job, polling the same queue while the command runs
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        while not stop.is_set():
            seen.extend(m["MessageId"] for m in client.receive_message(
                QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=30).get("Messages") or [])
            time.sleep(0.1)

    poller = threading.Thread(target=other_consumer, daemon=True)
    poller.start()
    try:
        # Visibility 2 s, the command runs 5 s: without a heartbeat the other consumer gets the message at ~2 s.
        command = child(f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('ready'); time.sleep(5)")
        code = consume(client, url, command, "--visibility-seconds", "2")
    finally:
        stop.set()
        poller.join(timeout=5)
    assert code == 0 and ready.exists()
    assert seen == []
    assert {"event": "queue_deleted", "message_id": message_id} in events(capsys)
    assert count(client, url) == (0, 0)


def test_failed_heartbeat_is_logged_not_fatal(tmp_path, capsys):
    class FlakyQueue(trainer_queue.SqsQueue):
        def __init__(self) -> None:
            super().__init__(client=None, queue_url="https://sqs/q")
            self.deleted: list[str] = []

        def receive(self, *, visibility_seconds, wait_seconds):
            return trainer_queue.Message("m-1", "r-1", "")

        def extend(self, message, visibility_seconds):
            raise ConnectionError("endpoint unreachable")

        def delete(self, message):
            self.deleted.append(message.message_id)

    flaky = FlakyQueue()
    assert trainer_queue.consume(flaky, child("import time; time.sleep(1.5)"), visibility_seconds=1,
                                 wait_seconds=0) == 0
    assert flaky.deleted == ["m-1"]
    failures = [e for e in events(capsys) if e["event"] == "queue_heartbeat_failed"]
    assert failures and failures[0]["error"] == "ConnectionError: endpoint unreachable"


def test_killed_command_reports_128_plus_signal(sqs, capsys):
    client, url = sqs
    send(client, url, {})
    assert consume(client, url, child("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")) == 137
    assert count(client, url) == (0, 1)


def test_command_that_cannot_start_keeps_the_message(sqs, tmp_path, capsys):
    client, url = sqs
    send(client, url, {})
    assert consume(client, url, [str(tmp_path / "no-such-launcher")]) == 127
    assert "cannot run" in capsys.readouterr().err
    assert count(client, url) == (0, 1)


@pytest.mark.parametrize(("argv", "message"), [
    (["--queue-url", "https://sqs/q"], "missing `-- COMMAND...`"),
    (["--queue-url", "https://sqs/q", "--"], "the command after `--` is empty"),
    (["--", "true"], "no queue: pass --queue-url or set GTP_QUEUE_URL"),
    (["--queue-url", "https://sqs/q", "--visibility-seconds", "0", "--", "true"],
     "--visibility-seconds must be in 1..43200, got 0"),
    (["--queue-url", "https://sqs/q", "--wait-seconds", "21", "--", "true"], "--wait-seconds must be in 0..20"),
])
def test_bad_flags_exit_2_with_clear_text(monkeypatch, capsys, argv, message):
    monkeypatch.delenv("GTP_QUEUE_URL", raising=False)
    with pytest.raises(SystemExit) as exited:
        trainer_queue.main(argv, client=object())
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_queue_url_defaults_to_the_pod_env(sqs, monkeypatch, tmp_path):
    client, url = sqs
    monkeypatch.setenv("GTP_QUEUE_URL", url)
    send(client, url, {})
    assert trainer_queue.main(["--wait-seconds", "1", "--", *argv_recorder(tmp_path / "argv")], client=client) == 0
    assert count(client, url) == (0, 0)


def test_missing_boto3_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "boto3", None)  # `import boto3` raises ImportError
    assert trainer_queue.main(["--queue-url", "https://sqs/q", "--", "true"]) == 2
    assert "trainer.queue needs boto3" in capsys.readouterr().err
