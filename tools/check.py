"""`python -m tools.check` (`make check`): the command line of the offline scanners, whose engine is
verify/check.py."""

from __future__ import annotations

import sys

from tools.cli import run
from verify.check import main

if __name__ == "__main__":
    sys.exit(run(main))
