"""Planning time against a bare import of the Pulumi SDKs: cold plan-all, warm plan of an unchanged stack.

    .venv/bin/python benchmarks/bench_plan.py [--rounds 3] [--stack dev]

Each round runs, side by side in fresh processes:
- `python -c "import pulumi, pulumi_aws, pulumi_kubernetes, pulumi_docker"`: the floor any Pulumi program pays;
- cold `python -m tools.plan --all --quiet` with an empty plan cache (verify/plan_cache.py; the parsed-manifest
  cache under build/cache and Python's bytecode stay warm, as on any machine that planned once): program under
  mocks, Helm renders, simulation, every validator, for every committed stack;
- warm `python -m tools.plan --stack <stack> --quiet` and warm plan-all with nothing changed: restored from the cache.
Prints the medians, each as a ratio to the bare import, with the goals of issue 33, the machine's load, and the
per-stack phases of the last cold plan-all.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import BARE_IMPORT, PYTHON, load_average, median, ratio_line, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stack", default="dev", help="the stack of the warm single-stack plan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as scratch:
        out = str(Path(scratch) / "plan")
        plan_all = [PYTHON, "-m", "tools.plan", "--all", "--quiet", "--out", out]
        plan_one = [PYTHON, "-m", "tools.plan", "--stack", args.stack, "--quiet", "--out", out]
        timed(plan_all, GTP_PLAN_CACHE="off")  # bytecode and file caches warm once
        bare, cold, warm_one, warm_all, log = [], [], [], [], ""
        for index in range(args.rounds):
            cache = str(Path(scratch) / f"cache-{index}")
            bare.append(timed(BARE_IMPORT)[0])
            elapsed, log = timed(plan_all, GTP_PLAN_CACHE=cache)
            cold.append(elapsed)
            warm_one.append(timed(plan_one, GTP_PLAN_CACHE=cache)[0])
            warm_all.append(timed(plan_all, GTP_PLAN_CACHE=cache)[0])
    print(f"bare SDK import: median {median(bare):.2f} s ({', '.join(f'{t:.2f}' for t in bare)})")
    print(ratio_line("cold plan-all (empty plan cache)", cold, bare, "<= 6"))
    print(ratio_line(f"warm plan of unchanged {args.stack}", warm_one, bare, "<= 1.5"))
    print(ratio_line("warm plan-all, nothing changed", warm_all, bare, "<= 1.5 per stack"))
    print(load_average())
    print("last cold plan-all, per phase:")
    print("\n".join(f"  {line}" for line in log.splitlines() if line.startswith("plan:")))


if __name__ == "__main__":
    sys.exit(main())
