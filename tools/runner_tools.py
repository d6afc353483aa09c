"""The command-line tools a deploy runner must have before a job relies on them.

    python -m tools.runner_tools
        → exit 0 when every tool is on PATH; else exit 1 naming each missing one, why it is needed, and where
          docs/deploy.md lists the runner's prerequisites

A self-hosted runner built to docs/deploy.md's list would otherwise fail in the middle of `pulumi up`: the kubeconfig
the Kubernetes provider uses authenticates with the AWS CLI (`aws eks get-token`, components/eks_cluster.py
`kubeconfig`), after the cluster itself was created, and deploy.yml/image.yml log in to ECR with it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Sequence

REQUIRED: dict[str, str] = {
    "aws": "AWS CLI v2: the Kubernetes provider's kubeconfig runs `aws eks get-token`, and the ECR login and "
           "signature steps call it",
}
"""Tools every deploy/preview/reap/image job needs on its runner, with why."""
WHERE = "docs/deploy.md, \"Where the deployer stands\", step 1"


def missing(tools: Sequence[str], which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """The tools of `tools` not found on PATH."""
    return [tool for tool in tools if which(tool) is None]


def main(argv: list[str] | None = None, which: Callable[[str], str | None] = shutil.which) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.runner_tools", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    absent = missing(list(REQUIRED), which)
    for tool in absent:
        print(f"error: this runner has no `{tool}` on PATH ({REQUIRED[tool]}); install it on the runner ({WHERE})",
              file=sys.stderr)
    return 1 if absent else 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
