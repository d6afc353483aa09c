"""Reaper: destroy ephemeral stacks whose TTL has passed.

    python -m tools.reap [--dry-run] [--now 2026-12-02T13:00:00Z] [--backend-url URL] [--cwd DIR]

Rules (:func:`decide`, pure; each stack gets exactly one decision):

- a production stack (``prod``, ``production``, ``prod-*``) → ``keep``, whatever its config says;
- not named ``bench-*`` → ``keep`` (its ``gtp:lifecycle`` only words the reason): both marks are required, so one
  mistyped flag on another stack cannot get it destroyed;
- a ``bench-*`` stack is decided only on what could be read; every unknown is a ``problem`` (the run exits 1):
  its config unreadable or unparseable, its state unreadable (``pulumi stack export`` failed), no
  ``gtp:lifecycle`` anywhere (not in its stack file, not in its last deployment's config, no TTL tags
  ``gtp:lifecycle``/``gtp:expires-at`` on its resources in the state), ``protect: true``, no or an invalid
  ``ttlHours``/``createdAt``;
- ``bench-*`` with ``ephemeral: false``         → ``keep``: persistent stacks are never touched;
- ``bench-*``, ``createdAt + ttlHours > now``   → ``keep``;
- expired, with protected resources in its state → ``problem``: Pulumi would refuse, and it is someone's intent;
- expired, no resources left in its state     → ``remove`` (``pulumi stack rm``, which refuses a stack that still
  has resources), so empty stacks are not left behind;
- expired                                    → ``destroy`` through :func:`tools.destroy.destroy_stack`
  (retries, orphan audit); the next run removes the then empty stack.

Each stack's benchmark results are kept before its destroy (``--keep-results DIR``, ``--results-archive s3://...``;
see :func:`tools.destroy.keep_bench_results`): the bucket that holds them is force-deleted with the stack.
A failed destroy is reported and the other stacks are still processed. Exit status: 0 when every destroy and
removal succeeded and no stack has a problem; 1 otherwise.

``--dry-run`` writes nothing: it runs only the commands in :data:`READ_ONLY_COMMANDS` (the workspace refuses any
other), prints the decisions, and destroys and removes nothing. Deciding never writes either: the config of a
stack with no stack file here is read from its last deployment (``pulumi stack history``); only a real run writes
that file (``pulumi config refresh``), just before it destroys the stack.

The adapter (:class:`CliWorkspace`, :func:`read_stack_states`) drives the ``pulumi`` CLI and never decrypts a
secret: the TTL is read with ``pulumi config --json`` (or ``pulumi stack history --json``) *without*
``--show-secrets`` (secret values then come back without a value, see pulumi/pulumi ``pkg/cmd/pulumi/config.go``),
and the state with ``pulumi stack export`` (also without ``--show-secrets``). So one stack whose secrets this runner
cannot decrypt is still decided on its own lifecycle instead of failing the nightly run. The orphan audit of each
stack runs in the stack's own region (``gtp:region``). Run it where the CLI is installed and logged in to the backend
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

Action = Literal["keep", "destroy", "remove", "problem"]
ACTIONS: tuple[Action, ...] = ("keep", "destroy", "remove", "problem")


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
    config_error: str | None = None
    """Why its config could not be read or parsed (None: it was)."""
    state_error: str | None = None
    """Why its state could not be read (None: it was, or it wasn't needed)."""
    config_from_backend: bool = False
    """Its ``gtp:lifecycle`` came from its last deployment: no stack file here, written only before a destroy."""


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


def is_reapable(name: str) -> bool:
    return name.startswith(REAPABLE_PREFIX) and not is_production(name)


def decide_one(state: StackState, now: datetime) -> Decision:
    lifecycle = state.lifecycle
    if is_production(state.name):
        return Decision(state.name, "keep", "production stack, never reaped")
    if not is_reapable(state.name):
        if state.config_error is not None:
            reason = f"not named {REAPABLE_PREFIX}*, never reaped (its config could not be read: {state.config_error})"
        elif lifecycle is None:
            reason = f"no {LIFECYCLE_KEY} config: persistent, never reaped"
        elif not lifecycle.get("ephemeral", False):
            reason = "persistent (ephemeral: false), never reaped"
        else:
            reason = f"ephemeral but not named {REAPABLE_PREFIX}*, never reaped"
        return Decision(state.name, "keep", reason)
    if state.config_error is not None:
        return Decision(state.name, "problem",
                        f"cannot read its config ({state.config_error}); its TTL is unknown: fix its stack file or "
                        "the backend's access, or decide by hand")
    if lifecycle is not None and not lifecycle.get("ephemeral", False):
        return Decision(state.name, "keep", "persistent (ephemeral: false), never reaped")
    if state.state_error is not None:
        return Decision(state.name, "problem",
                        f"cannot read its state ({state.state_error}); whether it is protected or empty is unknown: "
                        "check the backend (pulumi stack export), or decide by hand")
    if lifecycle is None:
        # A bench stack is ephemeral by construction (tools.bench_stack): no readable lifecycle is a fault (its
        # file never reached main, or the backend lost its config), not a persistent stack.
        return Decision(state.name, "problem",
                        f"a {REAPABLE_PREFIX}* stack with no readable {LIFECYCLE_KEY} (no stack file here, none in its "
                        f"last deployment's config, no {TTL_TAG} tag in its state); decide by hand, or restore its "
                        "stack file")
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
    expired = f"expired at {_format_time(expires_at)}{source}"
    if now < expires_at:
        remaining_hours = (expires_at - now).total_seconds() / 3600
        return Decision(
            state.name, "keep", f"expires at {_format_time(expires_at)} (in {remaining_hours:.1f} h){source}"
        )
    if state.protected:
        return Decision(state.name, "problem",
                        f"{expired}, but its state has protected resources (Pulumi refuses to destroy them): "
                        "unprotect them (pulumi state unprotect) or decide by hand")
    if state.resource_count == 0:
        return Decision(state.name, "remove", f"{expired}, no resources left: the empty stack is removed")
    return Decision(state.name, "destroy", expired)


def decide(states: Iterable[StackState], now: datetime) -> list[Decision]:
    """One decision per stack, in stack-name order."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return [decide_one(state, now) for state in sorted(states, key=lambda s: s.name)]


def reap(
    decisions: Sequence[Decision],
    *,
    destroy: Callable[[str], DestroyOutcome],
    remove: Callable[[str], None],
    dry_run: bool = False,
    log: Callable[[str], None] = print,
) -> int:
    """Carry out the decisions; returns the exit status. Under ``dry_run`` neither ``destroy`` nor ``remove`` runs."""
    failed: list[str] = []
    for decision in decisions:
        prefix = f"would {decision.action}" if dry_run and decision.action in ("destroy", "remove") else decision.action
        log(f"{decision.stack}: {prefix}: {decision.reason}")
        if decision.action == "problem":
            failed.append(f"{decision.stack} (problem: {decision.reason})")
        elif dry_run:
            continue
        elif decision.action == "remove":
            try:
                remove(decision.stack)
            except Exception as exc:
                log(f"{decision.stack}: ERROR: pulumi stack rm raised {type(exc).__name__}: {exc}")
                failed.append(f"{decision.stack} (stack rm raised {type(exc).__name__})")
                continue
            log(f"{decision.stack}: removed the empty stack")
        elif decision.action == "destroy":
            try:
                outcome = destroy(decision.stack)
            except Exception as exc:
                log(f"{decision.stack}: ERROR: destroy raised {type(exc).__name__}: {exc}")
                failed.append(f"{decision.stack} (destroy raised {type(exc).__name__})")
                continue
            log(report(outcome))
            if not outcome.ok:
                failed.append(f"{decision.stack} ({outcome.error or 'orphaned resources remain'})")
    counts = {action: sum(d.action == action for d in decisions) for action in ACTIONS}
    log(
        f"{len(decisions)} stack(s): {counts['destroy']} to destroy, {counts['remove']} empty to remove, "
        f"{counts['keep']} kept, {counts['problem']} with problems"
        f"{' (dry run: nothing destroyed or removed)' if dry_run else ''}"
    )
    if failed:
        log("FAILED: " + "; ".join(failed))
        return 1
    return 0


# --- pulumi CLI adapter --------------------------------------------------------------------------------------------


class Workspace(Protocol):
    """What the reaper reads about the project's stacks; every method only reads."""

    def list_stacks(self) -> Sequence[Any]: ...

    def get_all_config(self, stack_name: str) -> Mapping[str, Any]:
        """The config in the stack's file here (empty when it has none)."""
        ...

    def backend_config(self, stack_name: str) -> Mapping[str, Any]:
        """The config of the stack's last deployment, as the backend recorded it."""
        ...

    def resources(self, stack_name: str) -> Sequence[Mapping[str, Any]]:
        """The resources in the stack's exported state."""
        ...


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


def _error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def read_stack_state(workspace: Workspace, name: str, resource_count: int | None = None,
                     log: Callable[[str], None] = print) -> StackState:
    """One stack as the reaper sees it; what cannot be read is recorded (``config_error``, ``state_error``), never
    guessed, so :func:`decide_one` reports it as a problem. Only ``bench-*`` stacks' states are read."""
    if is_production(name):
        return StackState(name, None, resource_count)  # kept on its name alone: nothing else is read
    lifecycle = region = config_error = None
    config_from_backend = False
    try:
        config = workspace.get_all_config(name)
        if LIFECYCLE_KEY not in config and is_reapable(name):
            # A bench stack created elsewhere (a bench run in CI) has no stack file here: its last deployment's
            # config, read without writing the file (`pulumi config refresh` would write it).
            config = workspace.backend_config(name)
            config_from_backend = LIFECYCLE_KEY in config
        lifecycle = lifecycle_from_config(config)
        region_entry = config.get(REGION_KEY)
        region = getattr(region_entry, "value", region_entry)
    except Exception as exc:
        config_error = _error_text(exc)
        log(f"{name}: cannot read {LIFECYCLE_KEY}: {config_error}")
    if not is_reapable(name):
        return StackState(name, lifecycle, resource_count, config_error=config_error)
    protected, state_error = False, None
    try:
        resources = workspace.resources(name)
        resource_count, protected = len(resources), any(r.get("protect") for r in resources)
        if lifecycle is None and config_error is None:
            lifecycle = lifecycle_from_state(resources)
            if lifecycle is not None:
                log(f"{name}: no {LIFECYCLE_KEY} config; using the TTL tags in its state")
    except Exception as exc:
        state_error = _error_text(exc)
        log(f"{name}: cannot read its state: {state_error}")
    return StackState(name, lifecycle, resource_count, protected, region if isinstance(region, str) else None,
                      config_error, state_error, config_from_backend)


def read_stack_states(workspace: Workspace, log: Callable[[str], None] = print) -> list[StackState]:
    """Every stack of the project, read with :func:`read_stack_state` (which never writes)."""
    return [read_stack_state(workspace, summary.name, getattr(summary, "resource_count", None), log)
            for summary in workspace.list_stacks()]


REGION_KEY = "gtp:region"

READ_ONLY_COMMANDS = frozenset({("stack", "ls"), ("config",), ("stack", "history"), ("stack", "export"),
                                ("stack", "output")})
"""The ``pulumi`` commands (their leading words) that only read. Every other one the reaper runs writes stack
config or state (``config refresh`` the stack file, ``destroy``, ``stack rm``): never under ``--dry-run``."""


def command_words(args: Sequence[str]) -> tuple[str, ...]:
    """The leading words of a ``pulumi`` command line, up to its first flag: ``("config", "refresh")``."""
    words: list[str] = []
    for arg in args:
        if arg.startswith("-"):
            break
        words.append(arg)
    return tuple(words)


def is_read_only(args: Sequence[str]) -> bool:
    return command_words(args) in READ_ONLY_COMMANDS


@dataclass(frozen=True)
class CliStackSummary:
    name: str
    resource_count: int | None


class CliWorkspace:
    """The Workspace the reaper needs, on the ``pulumi`` CLI, never with ``--show-secrets``.

    With ``dry_run`` it refuses every command that is not in :data:`READ_ONLY_COMMANDS`.
    """

    def __init__(self, cwd: str, env: Mapping[str, str] | None = None, *, dry_run: bool = False) -> None:
        self.cwd, self.env, self.dry_run = cwd, {**os.environ, **(env or {})}, dry_run
        self._exported: dict[str, list[dict[str, Any]]] = {}

    def _run(self, *args: str) -> str:
        if self.dry_run and not is_read_only(args):
            raise RuntimeError(f"refusing `pulumi {' '.join(args)}` under --dry-run: it writes stack config or state")
        result = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.cwd, env=self.env,
                                capture_output=True, text=True, check=False, timeout=300)
        if result.returncode:
            raise RuntimeError(f"pulumi {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
        return result.stdout

    def list_stacks(self) -> list[CliStackSummary]:
        return [CliStackSummary(item["name"], item.get("resourceCount"))
                for item in json.loads(self._run("stack", "ls", "--json") or "[]")]

    @staticmethod
    def _values(entries: Mapping[str, Any]) -> dict[str, Any]:
        # Secret entries carry no value without --show-secrets (nothing is decrypted); objects come as JSON text.
        return {key: entry.get("value") for key, entry in entries.items() if not entry.get("secret")}

    def get_all_config(self, stack_name: str) -> dict[str, Any]:
        return self._values(json.loads(self._run("config", "--json", "--stack", stack_name) or "{}"))

    def backend_config(self, stack_name: str) -> dict[str, Any]:
        # The newest update first; its config is what `pulumi config refresh` would write to the stack file.
        updates = json.loads(self._run("stack", "history", "--json", "--page-size", "1", "--stack", stack_name)
                             or "[]")
        return self._values((updates[0].get("config") or {}) if updates else {})

    def resources(self, stack_name: str) -> list[dict[str, Any]]:
        if stack_name not in self._exported:
            exported = json.loads(self._run("stack", "export", "--stack", stack_name) or "{}")
            self._exported[stack_name] = (exported.get("deployment") or {}).get("resources") or []
        return self._exported[stack_name]

    def write_config_file(self, stack_name: str) -> None:
        """Writes the stack file from its last deployment, for the destroy (writes: never under --dry-run)."""
        self._run("config", "refresh", "--force", "--stack", stack_name)

    def remove_stack(self, stack_name: str) -> None:
        """``pulumi stack rm``, which refuses a stack that still has resources (no ``--force``); the stack file
        here, if any, is left to git (``--preserve-config``)."""
        self._run("stack", "rm", "--yes", "--preserve-config", "--stack", stack_name)


def open_workspace(work_dir: str, backend_url: str | None, *, dry_run: bool = False) -> CliWorkspace:
    return CliWorkspace(work_dir, {"PULUMI_BACKEND_URL": backend_url} if backend_url else None, dry_run=dry_run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reap", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="print the decisions; run only read-only pulumi commands, destroy and remove nothing")
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
        workspace = open_workspace(args.cwd, args.backend_url, dry_run=args.dry_run)
        states = read_stack_states(workspace)
    except Exception as exc:
        print(f"error: cannot list the project's stacks ({type(exc).__name__}: {exc}); the reaper needs the "
              "pulumi CLI on PATH, logged in to the backend (--backend-url), run from the project directory",
              file=sys.stderr)
        return 2
    decisions = decide(states, now)
    env = {"PULUMI_BACKEND_URL": args.backend_url} if args.backend_url else None
    by_name = {state.name: state for state in states}
    regions = {state.name: args.region or state.region for state in states}

    def destroy(stack: str) -> DestroyOutcome:
        if by_name[stack].config_from_backend:
            workspace.write_config_file(stack)  # the destroy reads the stack file (decided without it)
        deadline = time.monotonic() + args.timeout_minutes * 60
        return destroy_stack(stack, runner=subprocess_runner(args.cwd, env, deadline=deadline),
                             keep=results_keeper(args, regions[stack], env),
                             audit=boto3_audit(region=regions[stack]), deadline=deadline,
                             remaining=state_resources(args.cwd, env),
                             cleanup=delete_control_plane_log_group(region=regions[stack]))

    return reap(decisions, destroy=destroy, remove=workspace.remove_stack, dry_run=args.dry_run)


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
