"""Destroy a stack, retrying only AWS's transient ordering errors, then audit for orphans.

    python -m tools.destroy STACK [--yes] [--timeout-minutes M] [--retries N] [--cwd DIR] [--cluster-name NAME]
                                  [--region REGION]

Without ``--yes`` it first shows ``pulumi destroy --preview-only`` and asks the person to type the stack name;
anything else aborts with nothing deleted. ``--timeout-minutes`` (default 60) bounds the whole run by the wall
clock: a destroy still running at the limit is stopped, and the report lists what remains — the resources still in
the stack's state (``pulumi stack export``, without ``--show-secrets``: nothing is decrypted) and the orphans.
The audit runs in the stack's region (``gtp:region`` in ``stacks/Pulumi.<stack>.yaml``) unless ``--region``.

After a successful destroy the EKS control-plane log group ``/aws/eks/<cluster>/cluster`` is deleted if it exists:
EKS writes to it while the cluster is being deleted, which re-creates it after Pulumi deleted the stack's own
``LogGroup``, and the next ``pulumi up`` then fails with "already exists". Deleting it here (rather than adopting it
with ``import`` in the program) keeps ``up`` a plain create whether or not a previous cluster existed: ``import``
fails when the group is absent, and the program cannot know which case it is in offline.

`pulumi destroy` deletes in dependency order, but AWS keeps some deletions pending after the API said yes: a
subnet or security group stays "in use" until the ENIs that EKS, the VPC CNI or a load balancer created are gone,
which takes minutes. The next attempt then succeeds. Those errors, and only those, are retried (bounded, with
backoff); anything else (a protected resource, an access error, a program error) fails at once, since retrying it
would only hide the cause. Afterwards :mod:`tools.orphans` lists what still carries the stack's tags.

An unreachable Kubernetes API (a private endpoint seen from outside the stack's deployer network, a cluster already
gone) is not transient either: the run stops at once and the report names it, lists what remains in the state, and
says how to finish: run from the stack's deployer (``cluster.deployer``), or, when the cluster is really gone,
``--delete-unreachable`` (``PULUMI_K8S_DELETE_UNREACHABLE=true``: the Kubernetes provider drops in-cluster objects of
an unreachable cluster from the state; pulumi-kubernetes ``kubeProvider.Delete``). Helm releases are the exception:
the provider refuses to delete a release of an unreachable cluster whatever the setting
(``can't delete Helm Release with unreachable cluster``), so the report lists them for ``pulumi state delete``.

Before anything is deleted, benchmark results are kept (:func:`keep_bench_results`): the objects under
``<stack>/bench/`` of the stack's artifacts bucket (stack output ``artifactsBucket``) are downloaded to
``--keep-results DIR/<stack>/`` (default ``build/bench-results``) and, with ``--results-archive s3://bucket/prefix``,
copied to a bucket no stack owns. If that fails, nothing is destroyed (``--discard-results`` destroys anyway).

Then the artifacts bucket is checked (:func:`artifacts_bucket_preflight`): a bucket that is not empty and not
``force_destroy`` in the stack's state (persistent stacks keep their data) would fail ``pulumi destroy`` halfway
with ``BucketNotEmpty``; the run stops before it and prints the bucket and the commands that empty it.

Exit status: 0 when the destroy succeeded and nothing is left; 1 otherwise (the reason is printed).
Needs the ``pulumi`` CLI logged in to the stack's backend (``PULUMI_BACKEND_URL`` or ``pulumi login``) and AWS
credentials for the audit.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.orphans import Orphan, format_orphans, stack_region

# What AWS says while a deletion waits on something that is itself still being deleted (ENIs draining from a
# subnet/security group, a load balancer releasing its ENIs). Each pattern is matched against one line.
TRANSIENT_ERROR_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"DependencyViolation"),
    re.compile(r"has dependencies and cannot be deleted"),
    re.compile(r"InvalidParameterValue.*\bin use\b"),
    re.compile(r"InvalidNetworkInterface\.InUse"),
    re.compile(r"[Nn]etwork interface .* is currently in use"),
)

# What pulumi-kubernetes says when it cannot reach the cluster's API (provider/pkg/provider/provider.go: Configure
# marks the cluster unreachable; Read, Delete and the Helm release's Delete then fail with these messages).
UNREACHABLE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"configured Kubernetes cluster is unreachable"),
    re.compile(r"can't delete Helm Release with unreachable cluster"),
    re.compile(r"failed to read resource state due to unreachable cluster"),
)
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
DELETE_UNREACHABLE_ENV = "PULUMI_K8S_DELETE_UNREACHABLE"

DEFAULT_RETRIES = 3
DEFAULT_TIMEOUT_MINUTES = 60.0
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
    remaining: list[str] = field(default_factory=list)
    """Resources still in the stack's state after the run (``type  name``)."""
    cleaned: list[str] = field(default_factory=list)
    """What the run deleted after the destroy (the control-plane log group)."""
    unreachable: str | None = None
    """The Kubernetes provider's "cluster is unreachable" line, when the destroy met one."""
    kept: list[str] = field(default_factory=list)
    """Where the stack's benchmark results were kept before the destroy."""
    to_do: list[str] = field(default_factory=list)
    """What the person must do before the destroy can run (the commands that empty a bucket), below the error."""

    @property
    def ok(self) -> bool:
        return self.destroyed and self.error is None and not self.orphans and not self.remaining

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def transient_error(output: str) -> str | None:
    """The first output line that is a known transient AWS error, or None when the failure is not one."""
    for line in output.splitlines():
        if any(pattern.search(line) for pattern in TRANSIENT_ERROR_PATTERNS):
            return line.strip()
    return None


def unreachable_error(output: str) -> str | None:
    """The first line saying the Kubernetes API is unreachable, or None."""
    for line in output.splitlines():
        if any(pattern.search(line) for pattern in UNREACHABLE_PATTERNS):
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
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    remaining: Callable[[str], list[str]] | None = None,
    cleanup: Callable[[str], list[str]] | None = None,
    keep: Callable[[str], list[str]] | None = None,
    preflight: Callable[[str], list[str]] | None = None,
) -> DestroyOutcome:
    """Destroy ``stack`` with up to ``retries`` extra attempts on transient errors, then run ``audit``.

    ``deadline`` (a ``clock()`` value) stops retrying once passed; the runner is expected to stop at it too.
    ``cleanup`` runs after a successful destroy and returns what it deleted; ``remaining`` lists what is left in the
    stack's state (after a failed or timed-out destroy). ``keep`` runs first and saves what must outlive the stack
    (benchmark results); when it fails nothing is destroyed. ``preflight`` runs next and returns what would make the
    destroy fail (its first line the reason, the rest what to do); when it returns anything, nothing is destroyed.
    """
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    sleep = sleep or time.sleep
    outcome = DestroyOutcome(stack)
    if keep is not None:
        try:
            outcome.kept = list(keep(stack))
        except Exception as exc:
            outcome.error = (f"bench results could not be kept ({type(exc).__name__}: {exc}); nothing destroyed "
                             "(--discard-results destroys anyway)")
            return outcome
    if preflight is not None:
        try:
            blocker = list(preflight(stack))
        except Exception as exc:
            blocker = [f"the destroy's preflight failed ({type(exc).__name__}: {exc}); nothing destroyed"]
        if blocker:
            outcome.error, outcome.to_do = blocker[0], blocker[1:]
            return outcome
    while True:
        outcome.attempts += 1
        result = runner(stack)
        outcome.unreachable = unreachable_error(result.output) or outcome.unreachable
        if result.returncode == TIMED_OUT or (deadline is not None and clock() >= deadline and result.returncode):
            outcome.error = "wall-clock limit reached; pulumi destroy stopped"
            break
        if result.returncode == 0:
            outcome.destroyed = True
            break
        if outcome.unreachable is not None:
            # Retrying can't help: the API stays unreachable from this machine until someone changes where it runs.
            outcome.error = "the cluster's Kubernetes API is unreachable from here; pulumi destroy stopped"
            break
        transient = transient_error(result.output)
        if transient is None:
            outcome.error = f"pulumi destroy failed (exit {result.returncode}) with a non-transient error"
            break
        if outcome.attempts > retries:
            outcome.error = f"pulumi destroy still failing after {outcome.attempts} attempts: {transient}"
            break
        delay = backoff_seconds(outcome.attempts, backoff_base)
        if deadline is not None and clock() + delay >= deadline:
            outcome.error = f"wall-clock limit reached after {outcome.attempts} attempt(s): {transient}"
            break
        log(f"[{stack}] transient AWS error, retrying in {delay:.0f}s ({outcome.attempts}/{retries}): {transient}")
        sleep(delay)

    if outcome.destroyed and cleanup is not None:
        try:
            outcome.cleaned = list(cleanup(stack))
        except Exception as exc:
            outcome.error = f"cleanup failed: {type(exc).__name__}: {exc}"
    if not outcome.destroyed and remaining is not None:
        try:
            outcome.remaining = list(remaining(stack))
        except Exception as exc:
            outcome.remaining = [f"(cannot read the stack's state: {type(exc).__name__}: {exc})"]
    try:
        outcome.orphans = list(audit(stack))
    except Exception as exc:
        audit_error = f"orphan audit failed: {type(exc).__name__}: {exc}"
        outcome.error = f"{outcome.error}; {audit_error}" if outcome.error else audit_error
    return outcome


def report(outcome: DestroyOutcome) -> str:
    """What a person reads at the end of a destroy."""
    lines = []
    if outcome.destroyed:
        lines.append(f"[{outcome.stack}] destroyed after {outcome.attempts} attempt(s)")
    for item in outcome.cleaned:
        lines.append(f"[{outcome.stack}] deleted {item}")
    if outcome.error:
        lines.append(f"[{outcome.stack}] ERROR: {outcome.error}")
    lines.extend(outcome.to_do)
    for item in outcome.kept:
        lines.append(f"[{outcome.stack}] kept {item}")
    if outcome.remaining:
        lines.append(f"[{outcome.stack}] {len(outcome.remaining)} resource(s) remain in the stack's state:")
        lines.extend(f"    {item}" for item in outcome.remaining)
    if outcome.unreachable is not None and not outcome.destroyed:
        releases = [item for item in outcome.remaining if item.startswith(HELM_RELEASE_TYPE + " ")]
        lines.append(f"[{outcome.stack}] the Kubernetes provider said: {outcome.unreachable}")
        lines.append(f"[{outcome.stack}] to finish: run the destroy where the API is reachable (the stack's "
                     "cluster.deployer runner or network); if the cluster itself is gone, rerun with "
                     f"--delete-unreachable ({DELETE_UNREACHABLE_ENV}=true drops its in-cluster objects from the "
                     "state)" + (f", and first `pulumi state delete --stack {outcome.stack} <urn>` the "
                                 f"{len(releases)} Helm release(s) above, which the provider never drops itself"
                                 if releases else ""))
    if outcome.orphans:
        lines.append(f"[{outcome.stack}] resources still exist (delete them or fix their tags):")
    lines.append(format_orphans(outcome.orphans))
    return "\n".join(lines)


# --- real runner and audit ---------------------------------------------------------------------------------------


TIMED_OUT = 124
"""The runner's exit status when it stopped the CLI at the deadline."""


def pulumi_destroy_command(stack: str) -> list[str]:
    return ["pulumi", "destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", stack]


def pulumi_preview_command(stack: str) -> list[str]:
    return ["pulumi", "destroy", "--preview-only", "--non-interactive", "--stack", stack]


def subprocess_runner(cwd: str | None = None, env: Mapping[str, str] | None = None,
                      deadline: float | None = None) -> Runner:
    """Runs the Pulumi CLI, echoing its output live (a destroy takes minutes) and keeping it for classification.

    At ``deadline`` (a ``time.monotonic()`` value) the CLI gets SIGINT — Pulumi's own graceful stop, which finishes
    the operations in flight and saves the state — then, a minute later, is killed; the result is ``TIMED_OUT``.
    """
    from tools.cli import require

    require("pulumi")  # one line saying what to install, before any attempt

    def run(stack: str) -> CommandResult:
        process = subprocess.Popen(
            pulumi_destroy_command(stack),
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        captured: list[str] = []
        assert process.stdout is not None
        stdout = process.stdout

        def pump() -> None:
            for line in stdout:
                sys.stdout.write(line)
                captured.append(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            code = TIMED_OUT
        reader.join(timeout=5)
        return CommandResult(code, "".join(captured))

    return run


def state_resources(cwd: str | None = None, env: Mapping[str, str] | None = None) -> Callable[[str], list[str]]:
    """What is left in a stack's state, from ``pulumi stack export`` (never ``--show-secrets``)."""

    def run(stack: str) -> list[str]:
        result = subprocess.run(["pulumi", "stack", "export", "--stack", stack], cwd=cwd, capture_output=True,
                                text=True, check=True, env={**os.environ, **(env or {})}, timeout=300)
        resources = (json.loads(result.stdout).get("deployment") or {}).get("resources") or []
        return [f"{r['type']}  {r['urn'].rsplit('::', 1)[-1]}" for r in resources
                if r.get("custom") and not r["type"].startswith("pulumi:providers:")]

    return run


def delete_control_plane_log_group(cluster_name: str | None = None, region: str | None = None
                                   ) -> Callable[[str], list[str]]:
    """Deletes ``/aws/eks/<cluster>/cluster`` if EKS re-created it during the destroy (see the module docstring)."""

    def run(stack: str) -> list[str]:
        import boto3

        from tools.orphans import control_plane_log_group, default_cluster_name

        name = control_plane_log_group(cluster_name or default_cluster_name(stack))
        logs = boto3.Session(region_name=region).client("logs")
        groups = logs.describe_log_groups(logGroupNamePrefix=name).get("logGroups", [])
        if not any(group["logGroupName"] == name for group in groups):
            return []
        logs.delete_log_group(logGroupName=name)
        return [f"log group {name} (re-created by EKS during the cluster's deletion)"]

    return run


DEFAULT_RESULTS_DIR = "build/bench-results"
ARCHIVE_ENV = "GTP_RESULTS_ARCHIVE"


def artifacts_bucket(cwd: str | None = None, env: Mapping[str, str] | None = None) -> Callable[[str], str | None]:
    """The stack's artifacts bucket from its outputs (``pulumi stack output --json``, secrets stay masked); None when
    the stack has none (an existing cluster, a Swarm) or no outputs yet."""

    def run(stack: str) -> str | None:
        result = subprocess.run(["pulumi", "stack", "output", "--json", "--stack", stack], cwd=cwd, capture_output=True,
                                text=True, check=False, env={**os.environ, **(env or {})}, timeout=300)
        if result.returncode:
            raise RuntimeError(f"pulumi stack output failed: {result.stderr.strip()[-300:]}")
        bucket = json.loads(result.stdout or "{}").get("artifactsBucket")
        return bucket if isinstance(bucket, str) and bucket else None

    return run


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` → (bucket, ``prefix/`` or ``""``)."""
    if not url.startswith("s3://") or not url[5:].split("/", 1)[0]:
        raise ValueError(f"{url!r} is not an s3://bucket[/prefix] URL")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, (prefix.strip("/") + "/") if prefix.strip("/") else ""


def keep_bench_results(bucket_of: Callable[[str], str | None], destination: str, archive: str | None = None,
                       region: str | None = None) -> Callable[[str], list[str]]:
    """Saves ``s3://<artifacts bucket>/<stack>/bench/`` before the stack (and its bucket, force-deleted on ephemeral
    stacks) is destroyed: downloaded under ``destination/<stack>/`` (what ``make bench-report SOURCE=...`` reads, and
    what CI uploads as an artifact) and, with ``archive`` (``s3://bucket/prefix``), copied to a bucket no stack owns.
    Raises when it cannot, so the caller destroys nothing."""
    archive_bucket, archive_prefix = split_s3_url(archive) if archive else (None, "")

    def run(stack: str) -> list[str]:
        import boto3

        bucket = bucket_of(stack)
        if bucket is None:
            return []
        s3 = boto3.Session(region_name=region).client("s3")
        prefix = f"{stack}/bench/"
        keys = [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for item in page.get("Contents", []) if not item["Key"].endswith("/")]
        if not keys:
            return []
        folder = Path(destination) / stack
        for key in keys:
            relative = key[len(prefix):]
            target = folder / relative
            if not target.resolve().is_relative_to(folder.resolve()):
                raise ValueError(f"refusing to write {key!r} outside {folder}")
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, key, str(target))
            if archive_bucket:
                s3.copy_object(Bucket=archive_bucket, Key=f"{archive_prefix}{stack}/{relative}",
                               CopySource={"Bucket": bucket, "Key": key})
        kept = [f"{len(keys)} bench result(s) of s3://{bucket}/{prefix} in {folder}"]
        if archive_bucket:
            kept.append(f"{len(keys)} bench result(s) in s3://{archive_bucket}/{archive_prefix}{stack}/")
        return kept

    return run


def bucket_force_destroy(cwd: str | None = None, env: Mapping[str, str] | None = None
                         ) -> Callable[[str, str], bool | None]:
    """Whether the stack's state has bucket ``name`` with ``forceDestroy`` (``pulumi stack export``, never
    ``--show-secrets``); None when the state has no such bucket (the destroy won't delete it)."""

    def run(stack: str, name: str) -> bool | None:
        result = subprocess.run(["pulumi", "stack", "export", "--stack", stack], cwd=cwd, capture_output=True,
                                text=True, check=True, env={**os.environ, **(env or {})}, timeout=300)
        for resource in (json.loads(result.stdout).get("deployment") or {}).get("resources") or []:
            if resource.get("type") != S3_BUCKET_TYPE:
                continue
            outputs, inputs = resource.get("outputs") or {}, resource.get("inputs") or {}
            if name in (outputs.get("bucket"), outputs.get("id"), resource.get("id")):
                return bool(outputs.get("forceDestroy", inputs.get("forceDestroy", False)))
        return None

    return run


S3_BUCKET_TYPE = "aws:s3/bucket:Bucket"
"""pulumi-aws 7's `aws.s3.Bucket` (components/training_identity.py)."""


def bucket_not_empty(stack: str, bucket: str, *, num_current: int, num_older: int, more: bool) -> list[str]:
    """Why the destroy stops on a bucket that is neither empty nor force_destroy, and the commands that empty it.

    The bucket is versioned (components/training_identity.py): a plain DELETE, which is what `aws s3 rm` sends, only
    adds a delete marker (S3 user guide, "Deleting object versions from a versioning-enabled bucket": "When
    versioning is enabled, a simple DELETE cannot permanently delete an object"), and DeleteBucket refuses a bucket
    that still holds versions (BucketNotEmpty), so the versions and markers must go too."""
    counted = f"{num_current} object(s), {num_older} older version(s) or delete marker(s){' and more' if more else ''}"
    return [
        f"the artifacts bucket {bucket} is not empty ({counted}) and not force_destroy ({stack} is a persistent "
        "stack: its bucket keeps its data): pulumi destroy would fail on it with BucketNotEmpty; nothing destroyed",
        f"[{stack}] keep what you need from it (`aws s3 sync s3://{bucket} DIR`), then empty it:",
        f"    aws s3 rm s3://{bucket} --recursive",
        f"[{stack}] and, as it is versioned, delete every older version and delete marker: the S3 console's Empty "
        f"action on {bucket}, or `aws s3api delete-objects --bucket {bucket} --delete ...` for each page of "
        f"`aws s3api list-object-versions --bucket {bucket}`; then run the destroy again",
    ]


def artifacts_bucket_preflight(bucket_of: Callable[[str], str | None],
                               force_destroy_of: Callable[[str, str], bool | None],
                               region: str | None = None) -> Callable[[str], list[str]]:
    """Stops a destroy that would fail on the stack's artifacts bucket: one that holds any object version or delete
    marker (boto3 ``ListObjectVersions``) and is not ``force_destroy`` in the state. The state is read only when the
    bucket is not empty."""

    def run(stack: str) -> list[str]:
        import boto3
        from botocore.exceptions import ClientError

        bucket = bucket_of(stack)
        if bucket is None:
            return []
        s3 = boto3.Session(region_name=region).client("s3")
        try:
            page = s3.list_object_versions(Bucket=bucket, MaxKeys=1000)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "NoSuchBucket":
                return []  # already gone: nothing for the destroy to fail on
            raise
        versions, markers = page.get("Versions") or [], page.get("DeleteMarkers") or []
        if (not versions and not markers) or force_destroy_of(stack, bucket) is not False:
            return []
        current = sum(1 for version in versions if version.get("IsLatest"))
        return bucket_not_empty(stack, bucket, num_current=current, num_older=len(versions) - current + len(markers),
                                more=bool(page.get("IsTruncated")))

    return run


def confirm(stack: str, *, cwd: str | None, ask: Callable[[str], str] | None = None) -> bool:
    """Show the destroy preview and ask for the stack's name; True only when it is typed back exactly."""
    from tools.cli import require

    require("pulumi")
    preview = subprocess.run(pulumi_preview_command(stack), cwd=cwd, check=False)
    if preview.returncode != 0:
        print(f"error: the destroy preview of {stack} failed (exit {preview.returncode}); nothing deleted",
              file=sys.stderr)
        return False
    try:
        answer = (ask or input)(f"Destroy every resource of stack {stack!r} above? Type the stack name to confirm: ")
    except EOFError:
        answer = ""
    return answer.strip() == stack


def boto3_audit(cluster_name: str | None = None, region: str | None = None) -> Audit:
    def run(stack: str) -> Sequence[Orphan]:
        import boto3

        from tools.orphans import audit

        return audit(boto3.Session(region_name=region), stack, cluster_name=cluster_name)

    return run


def add_results_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-results", default=DEFAULT_RESULTS_DIR, metavar="DIR",
                        help="download the stack's bench results to DIR/<stack>/ first "
                             f"(default {DEFAULT_RESULTS_DIR})")
    parser.add_argument("--results-archive", default=os.environ.get(ARCHIVE_ENV) or None, metavar="S3_URL",
                        help=f"also copy them to s3://bucket/prefix, a bucket no stack owns (default ${ARCHIVE_ENV})")
    parser.add_argument("--discard-results", action="store_true",
                        help="destroy without keeping the bench results (they are deleted with the stack's bucket)")


def results_keeper(args: argparse.Namespace, region: str | None, env: Mapping[str, str] | None = None,
                   bucket_of: Callable[[str], str | None] | None = None) -> Callable[[str], list[str]] | None:
    if args.discard_results:
        return None
    return keep_bench_results(bucket_of or artifacts_bucket(args.cwd, env), args.keep_results, args.results_archive,
                              region)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.destroy", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--retries", type=int, default=DEFAULT_RETRIES,
                        help=f"extra attempts on transient AWS errors (default {DEFAULT_RETRIES})")
    parser.add_argument("--cwd", default=None, help="Pulumi project directory (default: current directory)")
    parser.add_argument("--cluster-name", default=None, help="EKS cluster name for the audit (default gtp-<stack>)")
    parser.add_argument("--region", default=None,
                        help="AWS region for the audit (default: the stack's gtp:region, else the environment)")
    parser.add_argument("--yes", action="store_true", help="skip the preview and the confirmation (CI, the reaper)")
    parser.add_argument("--timeout-minutes", type=float, default=DEFAULT_TIMEOUT_MINUTES,
                        help=f"wall-clock limit for the whole run (default {DEFAULT_TIMEOUT_MINUTES:.0f})")
    add_results_arguments(parser)
    parser.add_argument("--delete-unreachable", action="store_true",
                        help=f"the cluster is gone: let the Kubernetes provider drop its objects from the state "
                             f"({DELETE_UNREACHABLE_ENV}=true)")
    args = parser.parse_args(argv)
    if args.retries < 0:
        parser.error("--retries must be >= 0")
    if args.timeout_minutes <= 0:
        parser.error("--timeout-minutes must be > 0")
    if not args.yes and not confirm(args.stack, cwd=args.cwd):
        print(f"[{args.stack}] not confirmed: nothing deleted")
        return 1
    deadline = time.monotonic() + args.timeout_minutes * 60
    region = args.region or stack_region(args.stack, args.cwd)
    env = {DELETE_UNREACHABLE_ENV: "true"} if args.delete_unreachable else None
    bucket_of = functools.cache(artifacts_bucket(args.cwd))  # one `pulumi stack output` for both
    outcome = destroy_stack(
        args.stack,
        runner=subprocess_runner(args.cwd, env, deadline=deadline),
        keep=results_keeper(args, region, bucket_of=bucket_of),
        preflight=artifacts_bucket_preflight(bucket_of, bucket_force_destroy(args.cwd), region),
        audit=boto3_audit(args.cluster_name, region),
        retries=args.retries,
        deadline=deadline,
        remaining=state_resources(args.cwd),
        cleanup=delete_control_plane_log_group(args.cluster_name, region),
    )
    print(report(outcome))
    return outcome.exit_code


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
