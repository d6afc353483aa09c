"""A stand-in `pulumi` CLI for the destroy/reap flows: records its arguments, answers from a JSON script.

The test writes $FAKE_PULUMI_DIR/script.json: {"<first two args>": {"stdout": ..., "rc": ..., "sleep": ...,
"progress": ..., "when_env": {"NAME=value": <another answer>}}} and reads $FAKE_PULUMI_DIR/calls.jsonl (each call's
arguments; with "record_env": [NAME, ...] in the script, also those variables' values as {"env": {...}}).
"progress" is printed (and flushed) before the sleep, as Pulumi prints each failing resource while it goes on.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    # Like the real CLI (Go's signal.Notify installs its handler even when SIGINT was ignored at start, e.g. under a
    # background job or nohup): a graceful stop on SIGINT whatever the parent's disposition.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    folder = Path(os.environ["FAKE_PULUMI_DIR"])
    args = sys.argv[1:]
    with (folder / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps(args) + "\n")
    script = json.loads((folder / "script.json").read_text())
    stack = args[args.index("--stack") + 1] if "--stack" in args else ""
    key = " ".join(a for a in args[:2] if not a.startswith("-"))
    answer = script.get(f"{key} {stack}".strip()) or script.get(key) or {"rc": 0}
    if "--preview-only" in args:
        answer = script.get("preview", {"stdout": "Previewing destroy\n - 3 to delete", "rc": 0})
    for condition, alternative in answer.get("when_env", {}).items():
        name, _, value = condition.partition("=")
        if os.environ.get(name) == value:
            answer = alternative
    if script.get("record_env"):
        with (folder / "calls.jsonl").open("a") as calls:
            calls.write(json.dumps({"env": {name: os.environ.get(name) for name in script["record_env"]}}) + "\n")
    sys.stdout.write(answer.get("progress", ""))
    sys.stdout.flush()
    try:
        time.sleep(answer.get("sleep", 0))
    except KeyboardInterrupt:
        print("^C received, stopping gracefully")
        return 255
    sys.stdout.write(answer.get("stdout", ""))
    return answer.get("rc", 0)


if __name__ == "__main__":
    sys.exit(main())
