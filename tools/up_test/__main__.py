"""`python -m tools.up_test [STACK...]` (what `make up-test` runs): see tools/up_test/run.py."""

from __future__ import annotations

import argparse
import os
import sys

from tools.up_test.run import main
from tools.up_test.stacks import STACKS


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.up_test",
                                     description="A real `pulumi up` of each test stack on a fresh test cluster.")
    parser.add_argument("stacks", nargs="*", metavar="STACK",
                        help=f"test stacks (default: all: {', '.join(sorted(STACKS))})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.stacks) - set(STACKS))
    if unknown:
        print(f"error: no test stack {', '.join(unknown)}; known: {', '.join(sorted(STACKS))}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("error: up-test runs as root: its test cluster's apiserver runs in a private mount namespace "
              "(tools/cluster_test)", file=sys.stderr)
        return 2
    return main(args.stacks, log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(cli))
