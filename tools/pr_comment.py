"""`python -m tools.pr_comment --base origin/main --out plan-diff.md`: the offline plan diff of every stack as the
one PR comment `pr.yml` posts; the work is verify/pr_comment.py."""

from __future__ import annotations

import sys

from tools.cli import run
from verify.pr_comment import main

if __name__ == "__main__":
    sys.exit(run(main))
