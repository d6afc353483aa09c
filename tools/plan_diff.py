"""`python -m tools.plan_diff` (`make plan-diff`): the command line of the plan diff, whose engine is
verify/plan_diff.py."""

from __future__ import annotations

import sys

from tools.cli import run
from verify.plan_diff import main

if __name__ == "__main__":
    sys.exit(run(main))
