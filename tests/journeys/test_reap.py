"""Reaper decisions (pure) and the reap loop with a fake destroy."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pulumi.automation import ConfigValue

from tools.destroy import DestroyOutcome
from tools.orphans import Orphan
from tools.reap import (
    StackState,
    decide,
    decide_one,
    lifecycle_from_config,
    read_stack_states,
    reap,
)

NOW = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


def ephemeral(created_at: str | None = "2026-12-02T10:00:00Z", ttl_hours: float | None = 2, **extra):
    return {"ephemeral": True, "protect": False, "ttlHours": ttl_hours, "createdAt": created_at,
            "kmsDeletionWindowDays": 7, "maxGpuNodeHours": None, **extra}


def test_not_expired_is_kept():
    decision = decide_one(StackState("bench-a", ephemeral(ttl_hours=4)), NOW)
    assert decision.action == "keep"
    assert decision.reason == "expires at 2026-12-02T14:00:00Z (in 1.0 h)"


def test_expired_is_destroyed():
    decision = decide_one(StackState("bench-a", ephemeral(ttl_hours=2)), NOW)
    assert (decision.action, decision.reason) == ("destroy", "expired at 2026-12-02T12:00:00Z")


def test_expiry_boundary_is_inclusive():
    assert decide_one(StackState("bench-a", ephemeral(ttl_hours=3)), NOW).action == "destroy"


def test_expired_and_empty_is_removed_not_left_behind():
    # Before: kept ("already has no resources") and left in the backend forever.
    decision = decide_one(StackState("bench-a", ephemeral(), resource_count=0), NOW)
    assert (decision.action, decision.reason) == (
        "remove", "expired at 2026-12-02T12:00:00Z, no resources left: the empty stack is removed")


@pytest.mark.parametrize(
    ("lifecycle", "message"),
    [
        (ephemeral(ttl_hours=None),
         "ephemeral without ttlHours; never destroyed automatically, set gtp:lifecycle.ttlHours"),
        (ephemeral(created_at=None), "ephemeral without createdAt; never destroyed automatically"),
        (ephemeral(created_at=None, ttl_hours=None), "ephemeral without ttlHours and createdAt"),
        (ephemeral(created_at="yesterday"), "invalid gtp:lifecycle: not an ISO-8601 timestamp: 'yesterday'"),
        (ephemeral(ttl_hours=-1), "invalid gtp:lifecycle: ttlHours must be a positive number, got -1"),
        (ephemeral(protect=True), "ephemeral but protect: true"),
    ],
)
def test_ephemeral_without_usable_ttl_is_a_problem_never_destroyed(lifecycle, message):
    decision = decide_one(StackState("bench-a", lifecycle), NOW)
    assert decision.action == "problem"
    assert message in decision.reason


@pytest.mark.parametrize(
    "lifecycle",
    [None, {"ephemeral": False, "protect": True, "ttlHours": 1, "createdAt": "2000-01-01T00:00:00Z"}],
)
def test_non_ephemeral_is_never_touched_even_with_an_old_ttl(lifecycle):
    decision = decide_one(StackState("prod", lifecycle), NOW)
    assert decision.action == "keep"
    assert "never reaped" in decision.reason


def test_decide_sorts_and_requires_aware_now():
    states = [StackState("prod", None), StackState("bench-b", ephemeral()), StackState("dev", None)]
    assert [d.stack for d in decide(states, NOW)] == ["bench-b", "dev", "prod"]
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        decide(states, datetime(2026, 12, 2))


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (StackState("bench-a", ephemeral(), state_error="RuntimeError: pulumi stack export failed: 403"),
         "cannot read its state (RuntimeError: pulumi stack export failed: 403); whether it is protected or empty "
         "is unknown"),
        (StackState("bench-a", None, config_error="ValueError: gtp:lifecycle is not valid JSON"),
         "cannot read its config (ValueError: gtp:lifecycle is not valid JSON); its TTL is unknown"),
        (StackState("bench-a", ephemeral(), resource_count=9, protected=True),
         "expired at 2026-12-02T12:00:00Z, but its state has protected resources (Pulumi refuses to destroy them)"),
    ],
)
def test_every_unknown_of_a_bench_stack_is_a_problem_with_its_own_reason(state, message):
    # Before: an unreadable state was "keep: has protected resources" (exit 0), and so was an expired protected one.
    decision = decide_one(state, NOW)
    assert decision.action == "problem"
    assert decision.reason.startswith(message)
    assert "never reaped" not in decision.reason


def test_what_is_known_still_decides_without_the_unknowns():
    # Not a bench stack: its name alone keeps it, whatever could not be read.
    decision = decide_one(StackState("tooling", None, config_error="RuntimeError: boom"), NOW)
    assert (decision.action, decision.reason) == (
        "keep", "not named bench-*, never reaped (its config could not be read: RuntimeError: boom)")
    # A persistent bench stack needs no state; a protected one that has not expired yet is kept until it does.
    assert decide_one(StackState("bench-a", {"ephemeral": False}, state_error="x"), NOW).action == "keep"
    assert decide_one(StackState("bench-a", ephemeral(ttl_hours=9), protected=True), NOW).action == "keep"


class FakeDestroy:
    def __init__(self, outcomes):
        self.outcomes = outcomes
        self.calls = []

    def __call__(self, stack):
        self.calls.append(stack)
        outcome = self.outcomes[stack]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def run_reap(states, destroy, dry_run=False, remove=None):
    lines = []
    code = reap(decide(states, NOW), destroy=destroy, remove=remove or FakeRemove(), dry_run=dry_run,
                log=lines.append)
    return code, "\n".join(lines)


class FakeRemove:
    def __init__(self, errors=None):
        self.errors = errors or {}
        self.calls = []

    def __call__(self, stack):
        self.calls.append(stack)
        if stack in self.errors:
            raise self.errors[stack]


def test_destroy_failure_is_reported_and_other_stacks_still_processed():
    states = [StackState("bench-a", ephemeral()), StackState("bench-b", ephemeral()),
              StackState("bench-c", ephemeral()), StackState("dev", None)]
    destroy = FakeDestroy({
        "bench-a": DestroyOutcome("bench-a", destroyed=False, attempts=4, error="pulumi destroy still failing"),
        "bench-b": RuntimeError("backend unreachable"),
        "bench-c": DestroyOutcome("bench-c", destroyed=True, attempts=1),
    })
    code, output = run_reap(states, destroy)
    assert destroy.calls == ["bench-a", "bench-b", "bench-c"]
    assert code == 1
    assert "[bench-c] destroyed after 1 attempt(s)" in output
    assert "bench-b: ERROR: destroy raised RuntimeError: backend unreachable" in output
    assert "FAILED: bench-a (pulumi destroy still failing); bench-b (destroy raised RuntimeError)" in output
    assert "dev: keep:" in output


def test_orphans_after_destroy_fail_the_run():
    orphan = Orphan("ec2:network-interface", "eni-1", "us-east-1", "tag gtp:stack=bench-a")
    destroy = FakeDestroy({"bench-a": DestroyOutcome("bench-a", destroyed=True, attempts=1, orphans=[orphan])})
    code, output = run_reap([StackState("bench-a", ephemeral())], destroy)
    assert code == 1
    assert "FAILED: bench-a (orphaned resources remain)" in output
    assert "eni-1" in output


def test_all_destroyed_exits_zero():
    destroy = FakeDestroy({"bench-a": DestroyOutcome("bench-a", destroyed=True, attempts=2)})
    code, output = run_reap([StackState("bench-a", ephemeral()), StackState("prod", None)], destroy)
    assert code == 0
    assert output.splitlines()[-1] == "2 stack(s): 1 to destroy, 0 empty to remove, 1 kept, 0 with problems"


def test_problem_fails_the_run_without_destroying():
    destroy = FakeDestroy({})
    code, output = run_reap([StackState("bench-a", ephemeral(ttl_hours=None))], destroy)
    assert (code, destroy.calls) == (1, [])
    assert "bench-a: problem: ephemeral without ttlHours" in output


def test_dry_run_destroys_nothing_and_says_what_it_would_do():
    destroy, remove = FakeDestroy({}), FakeRemove()
    code, output = run_reap([StackState("bench-a", ephemeral()), StackState("bench-b", ephemeral(ttl_hours=9)),
                             StackState("bench-e", ephemeral(), resource_count=0)], destroy, dry_run=True,
                            remove=remove)
    assert (code, destroy.calls, remove.calls) == (0, [], [])
    assert "bench-a: would destroy: expired at 2026-12-02T12:00:00Z" in output
    assert "bench-b: keep: expires at" in output
    assert "bench-e: would remove: expired at 2026-12-02T12:00:00Z, no resources left" in output
    assert output.endswith("(dry run: nothing destroyed or removed)")


def test_empty_stacks_are_removed_and_a_failed_removal_fails_the_run():
    remove = FakeRemove({"bench-f": RuntimeError("pulumi stack rm failed: 'bench-f' still has resources")})
    code, output = run_reap([StackState("bench-e", ephemeral(), resource_count=0),
                             StackState("bench-f", ephemeral(), resource_count=0)], FakeDestroy({}), remove=remove)
    assert (code, remove.calls) == (1, ["bench-e", "bench-f"])
    assert "bench-e: removed the empty stack" in output
    assert "bench-f: ERROR: pulumi stack rm raised RuntimeError: pulumi stack rm failed: 'bench-f' still has" in output
    assert "FAILED: bench-f (stack rm raised RuntimeError)" in output


# --- adapter, with a fake of the LocalWorkspace methods it uses -------------------------------------------------


class Summary:
    def __init__(self, name, resource_count=None):
        self.name, self.resource_count = name, resource_count


class FakeWorkspace:
    """The reaper's Workspace; it has no method that writes, so nothing here can be written."""

    def __init__(self, configs, remote_configs=None, summaries=None, states=None):
        self.configs = configs
        self.remote_configs = remote_configs or {}
        self.summaries = summaries or [Summary(name, 5) for name in configs]
        self.states = states or {}
        self.backend_reads = []

    def list_stacks(self):
        return self.summaries

    def get_all_config(self, stack_name: str) -> dict[str, Any]:
        return self.configs[stack_name]

    def backend_config(self, stack_name: str) -> dict[str, Any]:
        self.backend_reads.append(stack_name)
        return self.remote_configs.get(stack_name, {})

    def resources(self, stack_name: str) -> list[dict[str, Any]]:
        state = self.states.get(stack_name, [{"type": "aws:s3/bucket:Bucket"}] * 5)
        if isinstance(state, Exception):
            raise state
        return state


def test_read_stack_states_parses_config_values_and_pulls_missing_config():
    workspace = FakeWorkspace(
        configs={
            "dev": {"gtp:lifecycle": ConfigValue('{"ephemeral": false, "protect": true}')},
            "bench-x": {},
            "bench-bad": {"gtp:lifecycle": ConfigValue("{not json")},
        },
        remote_configs={"bench-x": {"gtp:lifecycle": ConfigValue('{"ephemeral": true, "ttlHours": 1}')}},
    )
    lines = []
    states = {state.name: state for state in read_stack_states(workspace, log=lines.append)}
    assert workspace.backend_reads == ["bench-x"]  # read from its last deployment, not pulled into a file
    assert states["dev"].lifecycle == {"ephemeral": False, "protect": True}
    assert states["bench-x"].lifecycle == {"ephemeral": True, "ttlHours": 1}
    assert states["bench-x"].config_from_backend and not states["dev"].config_from_backend
    assert states["bench-x"].resource_count == 5
    # Unreadable config: reported, and decided as a problem rather than skipped or destroyed.
    assert "bench-bad: cannot read gtp:lifecycle: ValueError: gtp:lifecycle is not valid JSON" in lines[0]
    decision = decide_one(states["bench-bad"], NOW)
    assert decision.action == "problem"
    assert decision.reason.startswith("cannot read its config (ValueError: gtp:lifecycle is not valid JSON")


def test_an_unreadable_state_is_recorded_never_read_as_protected():
    workspace = FakeWorkspace(configs={"bench-u": {"gtp:lifecycle": ConfigValue(json.dumps(ephemeral()))}},
                              states={"bench-u": RuntimeError("pulumi stack export failed: backend 503")})
    lines = []
    (state,) = read_stack_states(workspace, log=lines.append)
    assert (state.protected, state.state_error) == (False, "RuntimeError: pulumi stack export failed: backend 503")
    assert lines == ["bench-u: cannot read its state: RuntimeError: pulumi stack export failed: backend 503"]
    code, output = run_reap([state], FakeDestroy({}))
    assert code == 1
    assert "bench-u: problem: cannot read its state (RuntimeError: pulumi stack export failed: backend 503)" in output


def test_lifecycle_from_config_rejects_non_objects():
    assert lifecycle_from_config({}) is None
    with pytest.raises(ValueError, match="gtp:lifecycle must be an object, got list"):
        lifecycle_from_config({"gtp:lifecycle": ConfigValue("[1]")})


def test_a_bench_stack_without_a_readable_lifecycle_is_a_problem_not_kept_forever():
    # Before: a bench-* stack whose file never reached main (and whose backend config has no lifecycle) was kept
    # as "persistent", silently, with exit 0.
    decision = decide_one(StackState("bench-lost", None), NOW)
    assert decision.action == "problem"
    assert decision.reason.startswith("a bench-* stack with no readable gtp:lifecycle (no stack file here, none in "
                                      "its last deployment's config, no gtp:expires-at tag in its state)")
    assert reap([decision], destroy=FakeDestroy({}), remove=FakeRemove(), log=[].append) == 1
    assert decide_one(StackState("tooling", None), NOW).action == "keep"  # not a bench stack: persistent


def test_a_bench_stack_without_config_falls_back_to_the_ttl_tags_in_its_state():
    from tools.reap import lifecycle_from_state

    exported = [{"type": "pulumi:pulumi:Stack"},
                {"type": "aws:ec2/vpc:Vpc", "outputs": {"tags": {"gtp:lifecycle": "ephemeral",
                                                                "gtp:expires-at": "2026-12-02T12:00:00Z"}}}]
    workspace = FakeWorkspace(configs={"bench-lost": {}}, remote_configs={}, states={"bench-lost": exported})
    lines = []
    states = read_stack_states(workspace, log=lines.append)
    assert lines == ["bench-lost: no gtp:lifecycle config; using the TTL tags in its state"]
    decision = decide_one(states[0], NOW)
    assert (decision.action, decision.reason) == (
        "destroy", "expired at 2026-12-02T12:00:00Z (from its state's TTL tags)")
    assert lifecycle_from_state([{"outputs": {"tags": {"gtp:lifecycle": "persistent"}}}]) is None
