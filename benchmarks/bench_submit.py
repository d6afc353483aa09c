"""`tools.submit` of one team job against a bare import of the Pulumi SDKs, side by side.

    .venv/bin/python benchmarks/bench_submit.py [--rounds 3] [--stack dev]

The stack was planned once before (`make plan`: its Helm renders are in the plan cache, verify/plan_cache.py), as
on a team's machine; each round then times the bare import and one submit of a PyTorchJob running our trainer
(the stack as it stands planned as an apply would, the stack with the job planned and checked whole). Prints the
medians and the ratio (goal <= 3) with the machine's load.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml
from _common import BARE_IMPORT, PYTHON, load_average, median, ratio_line, timed

ENTRY = {"bench-submit": {"kind": "pytorchjob", "nodeGroup": "g6", "gpuResource": "shared", "gpusPerNode": 1,
                          "cpu": "900m", "memory": "3Gi", "shmSize": "1Gi", "maxSteps": 50}}
TRAINER = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "a" * 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stack", default="dev")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-submit-") as scratch:
        cache = str(Path(scratch) / "cache")
        job = Path(scratch) / "job.yaml"
        job.write_text(yaml.safe_dump(ENTRY))
        timed([PYTHON, "-m", "tools.plan", "--stack", args.stack, "--quiet", "--out", str(Path(scratch) / "plan")],
              GTP_PLAN_CACHE=cache)
        submit = [PYTHON, "-m", "tools.submit", "--stack", args.stack, "--workload", str(job), "--trainer-image",
                  TRAINER]
        bare, submits = [], []
        for _ in range(args.rounds):
            bare.append(timed(BARE_IMPORT)[0])
            submits.append(timed(submit, GTP_PLAN_CACHE=cache)[0])
    print(f"bare SDK import: median {median(bare):.2f} s")
    print(ratio_line(f"submit to {args.stack}", submits, bare, "<= 3"))
    print(load_average())


if __name__ == "__main__":
    main()
