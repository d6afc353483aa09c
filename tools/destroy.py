"""Destroy a stack, retrying only AWS's transient ordering errors, then audit for orphans.

    python -m tools.destroy STACK [--retries N] [--cwd DIR] [--cluster-name NAME] [--region REGION]

`pulumi destroy` deletes in dependency order, but AWS keeps some deletions pending after the API said yes: a
subnet or security group stays "in use" until the ENIs that EKS, the VPC CNI or a load balancer created are gone,
which takes minutes. The next attempt then succeeds. Those errors, and only those, are retried (bounded, with
backoff); anything else (a protected resource, an access error, a program error) fails at once, since retrying it
would only hide the cause. Afterwards :mod:`tools.orphans` lists what still carries the stack's tags.

Exit status: 0 when the destroy succeeded and nothing is left; 1 otherwise (the reason is printed).
Needs the ``pulumi`` CLI logged in to the stack's backend (``PULUMI_BACKEND_URL`` or ``pulumi login``) and AWS
credentials for the audit.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from tools.orphans import Orphan, format_orphans

# What AWS says while a deletion waits on something that is itself still being deleted (ENIs draining from a
# subnet/security group, a load balancer releasing its ENIs). Each pattern is matched against one line.
TRANSIENT_ERROR_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"DependencyViolation"),
    re.compile(r"has dependencies and cannot be deleted"),
    re.compile(r"InvalidParameterValue.*\bin use\b"),
    re.compile(r"InvalidNetworkInterface\.InUse"),
    re.compile(r"[Nn]etwork interface .* is currently in use"),
)

DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 300.0


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    output: str
    """stdout and stderr together, as the person running it saw them."""


Runner = Callable[[str], CommandResult]
"""Runs `pulumi destroy` for a stack name."""
Audit = Callable[[str], Sequence[Orphan]]
"""Lists the orphans of a stack name; raises when it cannot look."""


@dataclass
class DestroyOutcome:
    stack: str
    destroyed: bool = False
    attempts: int = 0
    orphans: list[Orphan] = field(default_factory=list)
    error: str | None = None
    """Why the destroy or the audit failed, as one line for a report."""

    @property
    def ok(self) -> bool:
        return self.destroyed and self.error is None and not self.orphans

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def transient_error(output: str) -> str | None:
    """The first output line that is a known transient AWS error, or None when the failure is not one."""
    for line in output.splitlines():
        if any(pattern.search(line) for pattern in TRANSIENT_ERROR_PATTERNS):
            return line.strip()
    return None


def backoff_seconds(retry_number: int, base: float = DEFAULT_BACKOFF_SECONDS) -> float:
    """Exponential: base, 2·base, 4·base, … capped at MAX_BACKOFF_SECONDS. ``retry_number`` starts at 1."""
    return min(base * 2 ** (retry_number - 1), MAX_BACKOFF_SECONDS)


def destroy_stack(
    stack: str,
    *,
    runner: Runner,
    audit: Audit,
    retries: int = DEFAULT_RETRIES,
    backoff_base: float = DEFAULT_BACKOFF_SECONDS,
    sleep: Callable[[float], None] | None = None,
    log: Callable[[str], None] = print,
) -> DestroyOutcome:
    """Destroy ``stack`` with up to ``retries`` extra attempts on transient errors, then run ``audit``."""
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    sleep = sleep or time.sleep
    outcome = DestroyOutcome(stack)
    while True:
        outcome.attempts += 1
        result = runner(stack)
        if result.returncode == 0:
            outcome.destroyed = True
            break
        transient = transient_error(result.output)
        if transient is None:
            outcome.error = f"pulumi destroy failed (exit {result.returncode}) with a non-transient error"
            break
        if outcome.attempts > retries:
            outcome.error = f"pulumi destroy still failing after {outcome.attempts} attempts: {transient}"
            break
        delay = backoff_seconds(outcome.attempts, backoff_base)
        log(f"[{stack}] transient AWS error, retrying in {delay:.0f}s ({outcome.attempts}/{retries}): {transient}")
        sleep(delay)

    try:
        outcome.orphans = list(audit(stack))
    except Exception as exc:  # noqa: BLE001 - any audit failure must fail the run, with its message
        audit_error = f"orphan audit failed: {type(exc).__name__}: {exc}"
        outcome.error = f"{outcome.error}; {audit_error}" if outcome.error else audit_error
    return outcome


def report(outcome: DestroyOutcome) -> str:
    """What a person reads at the end of a destroy."""
    lines = []
    if outcome.destroyed:
        lines.append(f"[{outcome.stack}] destroyed after {outcome.attempts} attempt(s)")
    if outcome.error:
        lines.append(f"[{outcome.stack}] ERROR: {outcome.error}")
    if outcome.orphans:
        lines.append(f"[{outcome.stack}] resources still exist (delete them or fix their tags):")
    lines.append(format_orphans(outcome.orphans))
    return "\n".join(lines)


# --- real runner and audit ---------------------------------------------------------------------------------------


def pulumi_destroy_command(stack: str) -> list[str]:
    return ["pulumi", "destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", stack]


def subprocess_runner(cwd: str | None = None, env: Mapping[str, str] | None = None) -> Runner:
    """Runs the Pulumi CLI, echoing its output live (a destroy takes minutes) and keeping it for classification."""

    def run(stack: str) -> CommandResult:
        process = subprocess.Popen(
            pulumi_destroy_command(stack),
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        captured = []
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            captured.append(line)
        return CommandResult(process.wait(), "".join(captured))

    return run


def boto3_audit(cluster_name: str | None = None, region: str | None = None) -> Audit:
    def run(stack: str) -> Sequence[Orphan]:
        import boto3

        from tools.orphans import audit

        return audit(boto3.Session(region_name=region), stack, cluster_name=cluster_name)

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.destroy", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--retries", type=int, default=DEFAULT_RETRIES,
                        help=f"extra attempts on transient AWS errors (default {DEFAULT_RETRIES})")
    parser.add_argument("--cwd", default=None, help="Pulumi project directory (default: current directory)")
    parser.add_argument("--cluster-name", default=None, help="EKS cluster name for the audit (default gtp-<stack>)")
    parser.add_argument("--region", default=None, help="AWS region for the audit (default: environment)")
    args = parser.parse_args(argv)
    if args.retries < 0:
        parser.error("--retries must be >= 0")
    outcome = destroy_stack(
        args.stack,
        runner=subprocess_runner(args.cwd),
        audit=boto3_audit(args.cluster_name, args.region),
        retries=args.retries,
    )
    print(report(outcome))
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
