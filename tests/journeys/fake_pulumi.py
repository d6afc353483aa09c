"""A stand-in `pulumi` CLI for the destroy/reap flows: records its arguments, answers from a JSON script.

The test writes $FAKE_PULUMI_DIR/script.json: {"<first two args>": {"stdout": ..., "rc": ..., "sleep": ...}}
and reads $FAKE_PULUMI_DIR/calls.jsonl.
"""

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
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
    try:
        time.sleep(answer.get("sleep", 0))
    except KeyboardInterrupt:
        print("^C received, stopping gracefully")
        return 255
    sys.stdout.write(answer.get("stdout", ""))
    return answer.get("rc", 0)


if __name__ == "__main__":
    sys.exit(main())
