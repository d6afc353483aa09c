"""What the real-engine tests add to CI, per phase, against the 10-minute goal (issue 27).

    python benchmarks/bench_engine.py            # runs `python -m tools.engine test` (make engine-test) and prints
    python benchmarks/bench_engine.py --report   # prints the last run's phases (GTP_ENGINE_ROOT/timings.json)

The base image is cached by content key under GTP_ENGINE_ROOT, so a second run on one machine measures the warm
case; `--cold` points GTP_ENGINE_ROOT at a fresh folder first. Ratios, not assertions: the tests never time out on
a slow machine, this script says how far from the goal a run was.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.engine import engine_root  # noqa: E402

GOAL_S = 600


def report(timings: dict[str, float], total: float) -> str:
    lines = [f"{name:28} {seconds:7.1f} s  {seconds / total:5.0%}" for name, seconds in timings.items()]
    lines.append(f"{'total':28} {total:7.1f} s  = {total / GOAL_S:.2f} x the {GOAL_S // 60}-minute goal")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="print the last run's phases; run nothing")
    parser.add_argument("--cold", action="store_true", help="run on a fresh engine root (no cached base)")
    args = parser.parse_args(argv)
    environ = dict(os.environ)
    if args.cold:
        environ["GTP_ENGINE_ROOT"] = tempfile.mkdtemp(prefix="gtp-engine-cold-", dir=ROOT / "build")
    root = engine_root(environ)
    if not args.report:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tools.engine", "test", "-q"], cwd=ROOT, env=environ,
                              check=False)
        total = time.monotonic() - started
        if done.returncode != 0:
            print(f"bench_engine: the engine tests failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode
    timings_file = root / "timings.json"
    if not timings_file.is_file():
        print(f"bench_engine: no {timings_file}: run `make engine-test` first", file=sys.stderr)
        return 2
    timings = json.loads(timings_file.read_text())
    if args.report:
        total = sum(timings.values())
    print(report(timings, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
