"""`python -m tools.cluster_test build|start|stop|run [stacks...]`.

- build: build (or find in $GTP_GO_CACHE) every binary, printing each build's time;
- start / stop: a bare test cluster under build/cluster-test/manual (for poking at it: admin.kubeconfig);
- run STACK...: per stack a fresh cluster: start, apply build/plan/<stack>/cluster.yaml (run `make plan` first),
  write build/plan/<stack>/cluster-run.json, stop, check that no process, port or mount is left, delete its state;
- compare STACK...: simulation.json against cluster-run.json per check (tools/cluster_test/compare.py).
Exit status 1 when a run's checks have findings or something was left behind.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from tools.cluster_test import build
from tools.cluster_test.control_plane import ROOT, Cluster

STATE = ROOT / "build" / "cluster-test"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.cluster_test")
    parser.add_argument("command", choices=("build", "start", "stop", "run", "compare"))
    parser.add_argument("names", nargs="*", help="binaries (build) or stacks (run)")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("go", "openssl", "unshare", "mount") if shutil.which(tool) is None]
    if missing:
        print(f"error: cluster-test needs {', '.join(missing)} on PATH (go >= 1.26: the operators' go.mod files say "
              "go 1.26.0; GOTOOLCHAIN=local, nothing is downloaded)", file=sys.stderr)
        return 2
    if args.command in ("start", "run") and os.geteuid() != 0:
        print("error: cluster-test runs as root: the apiserver and the operators run in private mount namespaces "
              "(unshare -m: a hosts file for the operators' Service names, their fixed certificate paths)",
              file=sys.stderr)
        return 2
    if args.command == "build":
        started = time.monotonic()
        build.build(args.names or None, log=lambda line: print(line, flush=True))
        print(f"cluster-test: build: {time.monotonic() - started:.1f} s in all (cache {build.cache_root()})")
        return 0
    if args.command == "start":
        cluster = Cluster(STATE / "manual")
        cluster.start()
        print(f"cluster-test: started; KUBECONFIG={cluster.admin}")
        return 0
    if args.command == "stop":
        left = Cluster(STATE / "manual").stop()
        print("\n".join(left) or "cluster-test: stopped, nothing left")
        return 1 if left else 0
    if args.command == "compare":
        return compare(args.names or ["dev", "prod", "edge"])
    from tools.cluster_test.run import run_stack, write

    status = 0
    for stack in args.names or ["dev", "prod", "edge"]:
        started = time.monotonic()
        cluster = Cluster(STATE / stack)
        cluster.clean()
        try:
            cluster.start()
            report = run_stack(stack, cluster)
        finally:
            left = cluster.stop()
        if left:
            print(f"cluster-test: {stack}: left behind: {'; '.join(left)}", file=sys.stderr)
            return 1
        cluster.clean()
        path = write(report, stack)
        summary = ", ".join(f"{name} {c['passed']}/{c['total']}" for name, c in report["checks"].items())
        print(f"cluster-test: {stack}: {summary} in {time.monotonic() - started:.1f} s -> {path.relative_to(ROOT)}",
              flush=True)
        for name, check in report["checks"].items():
            for finding in check["findings"]:
                print(f"  - {name}: {finding['subject']}: {finding['rule']}", file=sys.stderr)
                status = 1
    return status


def compare(stacks: list[str]) -> int:
    import json

    from tools.cluster_test.compare import (
        coverage,
        day_two_disagreements,
        disagreements,
        image_policy_disagreements,
    )
    from tools.cluster_test.run import PLAN_DIR

    problems = []
    for stack in stacks:
        simulation = json.loads((PLAN_DIR / stack / "simulation.json").read_text())
        real = json.loads((PLAN_DIR / stack / "cluster-run.json").read_text())
        found = disagreements(stack, simulation, real)
        covered = coverage(simulation, real)
        print(f"cluster-test: {stack}: compared {', '.join(covered['compared'])}: "
              f"{len(found)} disagreement(s); simulation only: {', '.join(covered['simulation only'])}; "
              f"not run (simulated): {', '.join(real['not_run']) or 'nothing'}")
        problems += found
        for event, jobs in sorted((real.get("day_two") or {}).items()):
            for who, entry in sorted(jobs.items()):
                timing = (f" after {entry['requeued_after_s']} s, admitted again after "
                          f"{entry.get('admitted_again_after_s')} s" if "requeued_after_s" in entry else "")
                print(f"cluster-test: {stack}: day two, {event}: {who}: {entry['observed']}{timing} (declared: "
                      f"{entry['declared']})")
        problems += day_two_disagreements(stack, real)
        for policy, answer in sorted((real.get("image_policy") or {}).items()):
            print(f"cluster-test: {stack}: image policy {policy}: a pod of an unlisted image: {answer}")
        problems += image_policy_disagreements(stack, real)
    for line in problems:
        print(f"  - {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
