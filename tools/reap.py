"""Reaper: destroy ephemeral stacks whose TTL has passed.

    python -m tools.reap [--dry-run] [--now 2026-12-02T13:00:00Z] [--backend-url URL] [--cwd DIR]

Rules (:func:`decide`, pure; each stack gets exactly one decision):

- a production stack (``prod``, ``production``, ``prod-*``) → ``keep``, whatever its config says;
- a ``bench-*`` stack whose ``gtp:lifecycle`` can't be read (its file isn't on main, the backend's config has
  none) → its TTL tags in the state (``gtp:lifecycle``/``gtp:expires-at`` on its AWS resources), else ``problem``:
  never kept forever in silence;
- no ``gtp:lifecycle`` or ``ephemeral: false``  → ``keep``: persistent stacks are never touched;
- ephemeral but not named ``bench-*``           → ``keep``: both marks are required, so one mistyped flag on
  another stack cannot get it destroyed;
- any resource in the state with ``protect``    → ``keep``: Pulumi would refuse, and it is someone's intent;
- ephemeral with ``protect: true``              → ``problem``: Pulumi refuses to delete protected resources;
- ephemeral without ``ttlHours``/``createdAt``  → ``problem``: never destroyed, fix its config;
- ephemeral, ``createdAt + ttlHours > now``     → ``keep``;
- ephemeral, expired, no resources left         → ``keep`` (already destroyed);
- ephemeral, expired                            → ``destroy`` through :func:`tools.destroy.destroy_stack`
  (retries, orphan audit).

Each stack's benchmark results are kept before its destroy (``--keep-results DIR``, ``--results-archive s3://...``;
see :func:`tools.destroy.keep_bench_results`): the bucket that holds them is force-deleted with the stack.
A failed destroy is reported and the other stacks are still processed. Exit status: 0 when every destroy
succeeded and no stack has a problem; 1 otherwise. ``--dry-run`` prints the decisions and destroys nothing.

The adapter (:class:`CliWorkspace`, :func:`read_stack_states`) drives the ``pulumi`` CLI and never decrypts a
secret: the TTL is read with ``pulumi config --json`` *without* ``--show-secrets`` (the CLI then uses a blinding
decrypter: secret values come back as ``[secret]``, see pulumi/pulumi ``pkg/cmd/pulumi/config.go``), and protection
with ``pulumi stack export`` (also without ``--show-secrets``). So one stack whose secrets this runner cannot
decrypt is still decided on its own lifecycle instead of failing the nightly run. The orphan audit of each stack
runs in the stack's own region (``gtp:region``). Run it where the CLI is installed and logged in to the backend
(``--backend-url`` or ``PULUMI_BACKEND_URL``), from the project directory (``Pulumi.yaml``), with AWS credentials
for the orphan audit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from tools.destroy import (
    DEFAULT_TIMEOUT_MINUTES,
    DestroyOutcome,
    add_results_arguments,
    boto3_audit,
    delete_control_plane_log_group,
    destroy_stack,
    report,
    results_keeper,
    state_resources,
    subprocess_runner,
)

LIFECYCLE_KEY = "gtp:lifecycle"

Action = Literal["keep", "destroy", "problem"]


@dataclass(frozen=True)
class StackState:
    """What the reaper knows about one stack."""

    name: str
    lifecycle: Mapping[str, Any] | None
    """The parsed ``gtp:lifecycle`` object, or None when the stack has none."""
    resource_count: int | None = None
    """Resources in the stack's state (None: unknown)."""
    protected: bool = False
    """Some resource in the stack's state has ``protect: true``."""
    region: str | None = None
    """The stack's AWS region (``gtp:region``), where its orphans are audited."""


@dataclass(frozen=True)
class Decision:
    stack: str
    action: Action
    reason: str


def parse_timestamp(value: str) -> datetime:
    """ISO-8601; a value without offset is read as UTC. Raises ValueError with the offending text."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError) as exc:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


REAPABLE_PREFIX = "bench-"
PRODUCTION_NAMES = ("prod", "production")


def is_production(name: str) -> bool:
    return name in PRODUCTION_NAMES or name.startswith(tuple(f"{n}-" for n in PRODUCTION_NAMES))


def decide_one(state: StackState, now: datetime) -> Decision:
    lifecycle = state.lifecycle
    if is_production(state.name):
        return Decision(state.name, "keep", "production stack, never reaped")
    if lifecycle is None and state.name.startswith(REAPABLE_PREFIX):
        # A bench stack is ephemeral by construction (tools.bench_stack): no readable lifecycle is a fault (its
        # file never reached main, or the backend lost its config), not a persistent stack.
        return Decision(state.name, "problem",
                        f"a {REAPABLE_PREFIX}* stack with no readable {LIFECYCLE_KEY} (no stack file here, none in the "
                        f"backend's config, no {TTL_TAG} tag in its state); decide by hand, or restore its stack file")
    if lifecycle is None:
        return Decision(state.name, "keep", f"no {LIFECYCLE_KEY} config: persistent, never reaped")
    if not lifecycle.get("ephemeral", False):
        return Decision(state.name, "keep", "persistent (ephemeral: false), never reaped")
    if not state.name.startswith(REAPABLE_PREFIX):
        return Decision(state.name, "keep", f"ephemeral but not named {REAPABLE_PREFIX}*, never reaped")
    if state.protected:
        return Decision(state.name, "keep", "has protected resources in its state, never reaped")
    if lifecycle.get("protect"):
        return Decision(
            state.name, "problem",
            f"ephemeral but protect: true; set {LIFECYCLE_KEY}.protect to false so it can be destroyed",
        )
    if lifecycle.get("expiresAt") is not None:  # from the state's TTL tags
        try:
            expires_at = parse_timestamp(str(lifecycle["expiresAt"]))
        except ValueError as exc:
            return Decision(state.name, "problem", f"invalid {TTL_TAG} tag in its state: {exc}")
        return _expiry(state, now, expires_at, " (from its state's TTL tags)")
    ttl_hours = lifecycle.get("ttlHours")
    created_at = lifecycle.get("createdAt")
    missing = [key for key, value in (("ttlHours", ttl_hours), ("createdAt", created_at)) if value is None]
    if missing:
        return Decision(
            state.name, "problem",
            f"ephemeral without {' and '.join(missing)}; never destroyed automatically, "
            f"set {LIFECYCLE_KEY}.{missing[0]}",
        )
    try:
        if isinstance(ttl_hours, bool) or not isinstance(ttl_hours, (int, float)) or ttl_hours <= 0:
            raise ValueError(f"ttlHours must be a positive number, got {ttl_hours!r}")
        expires_at = parse_timestamp(str(created_at)) + timedelta(hours=float(ttl_hours))
    except ValueError as exc:
        return Decision(state.name, "problem", f"invalid {LIFECYCLE_KEY}: {exc}")
    return _expiry(state, now, expires_at)


def _expiry(state: StackState, now: datetime, expires_at: datetime, source: str = "") -> Decision:
    if now < expires_at:
        remaining_hours = (expires_at - now).total_seconds() / 3600
        return Decision(
            state.name, "keep", f"expires at {_format_time(expires_at)} (in {remaining_hours:.1f} h){source}"
        )
    if state.resource_count == 0:
        return Decision(state.name, "keep", f"expired at {_format_time(expires_at)}, already has no resources")
    return Decision(state.name, "destroy", f"expired at {_format_time(expires_at)}{source}")


def decide(states: Iterable[StackState], now: datetime) -> list[Decision]:
    """One decision per stack, in stack-name order."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return [decide_one(state, now) for state in sorted(states, key=lambda s: s.name)]


def reap(
    decisions: Sequence[Decision],
    *,
    destroy: Callable[[str], DestroyOutcome],
    dry_run: bool = False,
    log: Callable[[str], None] = print,
) -> int:
    """Carry out the decisions; returns the exit status."""
    failed: list[str] = []
    for decision in decisions:
        prefix = "would destroy" if dry_run and decision.action == "destroy" else decision.action
        log(f"{decision.stack}: {prefix}: {decision.reason}")
        if decision.action == "problem":
            failed.append(f"{decision.stack} (problem: {decision.reason})")
        elif decision.action == "destroy" and not dry_run:
            try:
                outcome = destroy(decision.stack)
            except Exception as exc:
                log(f"{decision.stack}: ERROR: destroy raised {type(exc).__name__}: {exc}")
                failed.append(f"{decision.stack} (destroy raised {type(exc).__name__})")
                continue
            log(report(outcome))
            if not outcome.ok:
                failed.append(f"{decision.stack} ({outcome.error or 'orphaned resources remain'})")
    counts = {action: sum(d.action == action for d in decisions) for action in ("keep", "destroy", "problem")}
    log(
        f"{len(decisions)} stack(s): {counts['destroy']} to destroy, {counts['keep']} kept, "
        f"{counts['problem']} with problems{' (dry run: nothing destroyed)' if dry_run else ''}"
    )
    if failed:
        log("FAILED: " + "; ".join(failed))
        return 1
    return 0


# --- Automation API adapter --------------------------------------------------------------------------------------


class Workspace(Protocol):
    """The part of ``pulumi.automation.LocalWorkspace`` the reaper uses."""

    def list_stacks(self) -> Sequence[Any]: ...

    def get_all_config(self, stack_name: str) -> Mapping[str, Any]: ...

    def refresh_config(self, stack_name: str) -> None: ...


def lifecycle_from_config(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``gtp:lifecycle`` from ``get_all_config()`` (ConfigValue with a JSON string, or an already-parsed value)."""
    entry = config.get(LIFECYCLE_KEY)
    if entry is None:
        return None
    value = getattr(entry, "value", entry)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{LIFECYCLE_KEY} is not valid JSON: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ValueError(f"{LIFECYCLE_KEY} must be an object, got {type(value).__name__}")
    return value


TTL_TAG = "gtp:expires-at"
"""The tag every AWS resource of an ephemeral stack carries (StackConfig.resource_tags), read back from its state."""


def lifecycle_from_state(resources: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """An ephemeral lifecycle (`ephemeral`, `expiresAt`) from the TTL tags in a stack's exported state, or None."""
    for resource in resources:
        for section in ("outputs", "inputs"):
            tags = (resource.get(section) or {}).get("tags")
            if isinstance(tags, Mapping) and tags.get("gtp:lifecycle") == "ephemeral" and tags.get(TTL_TAG):
                return {"ephemeral": True, "protect": False, "expiresAt": tags[TTL_TAG]}
    return None


def read_stack_states(workspace: Workspace, log: Callable[[str], None] = print,
                      protected: Callable[[str], bool] | None = None,
                      state_lifecycle: Callable[[str], Mapping[str, Any] | None] | None = None) -> list[StackState]:
    """Every stack of the project with its lifecycle.

    A stack created elsewhere (a bench run in CI) may have no ``stacks/Pulumi.<stack>.yaml`` here; then its config is
    pulled from the backend's last deployment (``pulumi config refresh``), which only writes that missing file.
    A config that cannot be read or parsed becomes a lifecycle of ``{"ephemeral": True}`` with nothing else, so the
    stack is reported as a problem instead of being skipped silently or destroyed.
    """
    states = []
    for summary in workspace.list_stacks():
        name = summary.name
        try:
            config = workspace.get_all_config(name)
            if LIFECYCLE_KEY not in config:
                workspace.refresh_config(name)
                config = workspace.get_all_config(name)
            lifecycle = lifecycle_from_config(config)
            if lifecycle is None and name.startswith(REAPABLE_PREFIX) and state_lifecycle is not None:
                lifecycle = state_lifecycle(name)
                if lifecycle is not None:
                    log(f"{name}: no {LIFECYCLE_KEY} config; using the TTL tags in its state")
            region_entry = config.get(REGION_KEY)
            region = getattr(region_entry, "value", region_entry)
        except Exception as exc:
            log(f"{name}: cannot read {LIFECYCLE_KEY}: {type(exc).__name__}: {exc}")
            lifecycle = {"ephemeral": True, "protect": False, "ttlHours": None, "createdAt": None}
            region = None
        try:
            is_protected = bool(protected(name)) if protected else False
        except Exception as exc:
            log(f"{name}: cannot read its state ({type(exc).__name__}: {exc}); treated as protected")
            is_protected = True
        states.append(StackState(name, lifecycle, getattr(summary, "resource_count", None), is_protected,
                                 region if isinstance(region, str) else None))
    return states


REGION_KEY = "gtp:region"


@dataclass(frozen=True)
class CliStackSummary:
    name: str
    resource_count: int | None


class CliWorkspace:
    """The Workspace the reaper needs, on the ``pulumi`` CLI, never with ``--show-secrets``."""

    def __init__(self, cwd: str, env: Mapping[str, str] | None = None) -> None:
        self.cwd, self.env = cwd, {**os.environ, **(env or {})}

    def _run(self, *args: str) -> str:
        result = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.cwd, env=self.env,
                                capture_output=True, text=True, check=False, timeout=300)
        if result.returncode:
            raise RuntimeError(f"pulumi {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
        return result.stdout

    def list_stacks(self) -> list[CliStackSummary]:
        return [CliStackSummary(item["name"], item.get("resourceCount"))
                for item in json.loads(self._run("stack", "ls", "--json") or "[]")]

    def get_all_config(self, stack_name: str) -> dict[str, Any]:
        entries = json.loads(self._run("config", "--json", "--stack", stack_name) or "{}")
        # Secret entries carry no value without --show-secrets (nothing is decrypted); objects come as JSON text.
        return {key: entry.get("value") for key, entry in entries.items() if not entry.get("secret")}

    def refresh_config(self, stack_name: str) -> None:
        self._run("config", "refresh", "--force", "--stack", stack_name)

    def _resources(self, stack_name: str) -> list[dict[str, Any]]:
        exported = json.loads(self._run("stack", "export", "--stack", stack_name) or "{}")
        return (exported.get("deployment") or {}).get("resources") or []

    def protected(self, stack_name: str) -> bool:
        return any(r.get("protect") for r in self._resources(stack_name))

    def state_lifecycle(self, stack_name: str) -> Mapping[str, Any] | None:
        return lifecycle_from_state(self._resources(stack_name))


def open_workspace(work_dir: str, backend_url: str | None) -> CliWorkspace:
    return CliWorkspace(work_dir, {"PULUMI_BACKEND_URL": backend_url} if backend_url else None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reap", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the decisions, destroy nothing")
    parser.add_argument("--now", help="evaluate TTLs at this ISO-8601 time instead of the current time")
    parser.add_argument("--backend-url", default=os.environ.get("PULUMI_BACKEND_URL"),
                        help="Pulumi backend (default: $PULUMI_BACKEND_URL, else the CLI's login)")
    parser.add_argument("--cwd", default=".", help="Pulumi project directory (default: current directory)")
    parser.add_argument("--region", default=None,
                        help="AWS region for the orphan audit (default: each stack's gtp:region)")
    parser.add_argument("--timeout-minutes", type=float, default=DEFAULT_TIMEOUT_MINUTES,
                        help="wall-clock limit per stack's destroy")
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    try:
        now = parse_timestamp(args.now) if args.now else datetime.now(UTC)
    except ValueError as exc:
        parser.error(f"--now: {exc}")
    try:
        workspace = open_workspace(args.cwd, args.backend_url)
        states = read_stack_states(workspace, protected=workspace.protected,
                                   state_lifecycle=workspace.state_lifecycle)
    except Exception as exc:
        print(f"error: cannot list the project's stacks ({type(exc).__name__}: {exc}); the reaper needs the "
              "pulumi CLI on PATH, logged in to the backend (--backend-url), run from the project directory",
              file=sys.stderr)
        return 2
    decisions = decide(states, now)
    env = {"PULUMI_BACKEND_URL": args.backend_url} if args.backend_url else None
    regions = {state.name: args.region or state.region for state in states}

    def destroy(stack: str) -> DestroyOutcome:
        deadline = time.monotonic() + args.timeout_minutes * 60
        return destroy_stack(stack, runner=subprocess_runner(args.cwd, env, deadline=deadline),
                             keep=results_keeper(args, regions[stack], env),
                             audit=boto3_audit(region=regions[stack]), deadline=deadline,
                             remaining=state_resources(args.cwd, env),
                             cleanup=delete_control_plane_log_group(region=regions[stack]))

    return reap(decisions, destroy=destroy, dry_run=args.dry_run)


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
