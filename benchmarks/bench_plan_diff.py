"""`make plan-diff` of a one-line stack change against a bare import of the Pulumi SDKs, base cached.

    .venv/bin/python benchmarks/bench_plan_diff.py [--rounds 3] [--stack dev]

In a clone of the working tree (committed as one commit), the first diff plans BASE (HEAD) once; each round then
changes one line of the stack file (a node group's maxSize, a new value each round, so the head is planned every
time while BASE is read from the plan cache, verify/plan_cache.py) and times `python -m tools.plan_diff --stack
<stack> --base HEAD` beside a bare import. Prints the medians and the ratio (goal <= 3 per stack) with the load.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from _common import BARE_IMPORT, PYTHON, ROOT, load_average, median, ratio_line, timed

sys.path.insert(0, str(ROOT))
from tests.conftest import clone_working_tree

MAX_SIZE = re.compile(r"^(\s+maxSize:\s*)(\d+)", re.MULTILINE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stack", default="dev")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-plan-diff-") as scratch:
        clone, cache = Path(scratch) / "repo", str(Path(scratch) / "cache")
        clone_working_tree(clone)
        stack_file = clone / "stacks" / f"Pulumi.{args.stack}.yaml"
        original = stack_file.read_text()
        if not MAX_SIZE.search(original):
            raise SystemExit(f"{stack_file.name} has no `maxSize:` line to change")
        diff = [PYTHON, "-m", "tools.plan_diff", "--stack", args.stack, "--base", "HEAD"]
        first, _ = timed(diff, cwd=clone, GTP_PLAN_CACHE=cache)  # plans BASE once (and an unchanged head)
        bare, diffs, log = [], [], ""
        for index in range(args.rounds):
            # One line: the first maxSize grows by a different amount each round, so the head is new each time.
            grown = MAX_SIZE.sub(lambda m, index=index: f"{m.group(1)}{int(m.group(2)) + index + 1}", original,
                                 count=1)
            stack_file.write_text(grown)
            bare.append(timed(BARE_IMPORT)[0])
            elapsed, log = timed(diff, cwd=clone, GTP_PLAN_CACHE=cache)
            diffs.append(elapsed)
    print(f"bare SDK import: median {median(bare):.2f} s; first diff (BASE planned, then cached): {first:.2f} s")
    print(ratio_line(f"plan-diff of a one-line change to {args.stack}", diffs, bare, "<= 3"))
    print(load_average())
    print("last diff's progress:")
    print("\n".join(f"  {line}" for line in log.splitlines() if line.startswith(("plan-diff:", "error:"))))


if __name__ == "__main__":
    main()
