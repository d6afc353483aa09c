"""Wall time of `make plan-all` (every committed stack, one process) against a bare import of the Pulumi SDKs.

    .venv/bin/python benchmarks/bench_plan.py [--rounds 5]

Each round runs, side by side in fresh processes: `python -c "import pulumi, pulumi_aws, pulumi_kubernetes,
pulumi_docker"` (the floor any Pulumi program pays) and `python -m tools.plan --all --quiet` (program under mocks,
rendering, every validator). Prints the medians, their ratio, and per-stack phases of the last plan run.
Goal: plan-all under 3 s on 2 cores.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _common import median

ROOT = Path(__file__).resolve().parent.parent
BARE_IMPORT = [sys.executable, "-c", "import pulumi, pulumi_aws, pulumi_kubernetes, pulumi_docker"]
PLAN_ALL = [sys.executable, "-m", "tools.plan", "--all", "--quiet", "--out", str(ROOT / "build" / "bench-plan")]


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return elapsed, result.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    timed(PLAN_ALL)  # warm the bytecode and file caches once
    bare, plans, log = [], [], ""
    for _ in range(args.rounds):
        bare.append(timed(BARE_IMPORT)[0])
        elapsed, log = timed(PLAN_ALL)
        plans.append(elapsed)
    print(f"bare SDK import: median {median(bare):.2f} s  ({', '.join(f'{t:.2f}' for t in bare)})")
    print(f"plan-all:        median {median(plans):.2f} s  ({', '.join(f'{t:.2f}' for t in plans)})")
    print(f"ratio plan-all / bare import: {median(plans) / median(bare):.1f}")
    print("last plan-all, per phase:")
    print("\n".join(f"  {line}" for line in log.splitlines() if line.startswith("plan:")))


if __name__ == "__main__":
    main()
