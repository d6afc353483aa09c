"""`python -m tools.plan` (`make plan`, `make plan-all`): the command line of the offline plan, whose engine is
verify/plan.py (tools/cli.py: a user's mistake is one line, never a traceback)."""

from __future__ import annotations

import gc
import os
import sys

from tools.cli import run
from verify.plan import main

if __name__ == "__main__":
    # A plan is a short batch that creates millions of objects while importing the provider SDKs: the cyclic
    # garbage collector's passes cost ~1.5 s of a plan-all and free almost nothing (peak RSS 190 MB either way),
    # and tearing the interpreter down costs another ~1.3 s. So: no GC passes, and exit without the teardown
    # once everything is written and flushed (benchmarks/bench_plan.py measures both).
    gc.disable()
    code = run(main)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
