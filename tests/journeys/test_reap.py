"""Reaper decisions (pure) and the reap loop with a fake destroy."""

from datetime import UTC, datetime

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


def ephemeral(created_at="2026-12-02T10:00:00Z", ttl_hours=2, **extra):
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


def test_expired_but_empty_is_not_destroyed_again():
    decision = decide_one(StackState("bench-a", ephemeral(), resource_count=0), NOW)
    assert decision.action == "keep"
    assert "already has no resources" in decision.reason


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


def run_reap(states, destroy, dry_run=False):
    lines = []
    code = reap(decide(states, NOW), destroy=destroy, dry_run=dry_run, log=lines.append)
    return code, "\n".join(lines)


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
    assert output.splitlines()[-1] == "2 stack(s): 1 to destroy, 1 kept, 0 with problems"


def test_problem_fails_the_run_without_destroying():
    destroy = FakeDestroy({})
    code, output = run_reap([StackState("bench-a", ephemeral(ttl_hours=None))], destroy)
    assert (code, destroy.calls) == (1, [])
    assert "bench-a: problem: ephemeral without ttlHours" in output


def test_dry_run_destroys_nothing_and_says_what_it_would_do():
    destroy = FakeDestroy({})
    code, output = run_reap([StackState("bench-a", ephemeral()), StackState("bench-b", ephemeral(ttl_hours=9))],
                            destroy, dry_run=True)
    assert (code, destroy.calls) == (0, [])
    assert "bench-a: would destroy: expired at 2026-12-02T12:00:00Z" in output
    assert "bench-b: keep: expires at" in output
    assert output.endswith("(dry run: nothing destroyed)")


# --- adapter, with a fake of the LocalWorkspace methods it uses -------------------------------------------------


class Summary:
    def __init__(self, name, resource_count=None):
        self.name, self.resource_count = name, resource_count


class FakeWorkspace:
    def __init__(self, configs, remote_configs=None, summaries=None):
        self.configs = configs
        self.remote_configs = remote_configs or {}
        self.summaries = summaries or [Summary(name, 5) for name in configs]
        self.refreshed = []

    def list_stacks(self):
        return self.summaries

    def get_all_config(self, name):
        return self.configs[name]

    def refresh_config(self, name):
        self.refreshed.append(name)
        self.configs[name] = self.remote_configs.get(name, self.configs[name])


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
    assert workspace.refreshed == ["bench-x"]
    assert states["dev"].lifecycle == {"ephemeral": False, "protect": True}
    assert states["bench-x"].lifecycle == {"ephemeral": True, "ttlHours": 1}
    assert states["bench-x"].resource_count == 5
    # Unreadable config: reported, and decided as a problem rather than skipped or destroyed.
    assert "bench-bad: cannot read gtp:lifecycle: ValueError: gtp:lifecycle is not valid JSON" in lines[0]
    assert decide_one(states["bench-bad"], NOW).action == "problem"


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
                                      "the backend's config, no gtp:expires-at tag in its state)")
    assert reap([decision], destroy=lambda stack: None, log=lambda line: None) == 1
    assert decide_one(StackState("tooling", None), NOW).action == "keep"  # not a bench stack: persistent


def test_a_bench_stack_without_config_falls_back_to_the_ttl_tags_in_its_state():
    from tools.reap import lifecycle_from_state

    exported = [{"type": "pulumi:pulumi:Stack"},
                {"type": "aws:ec2/vpc:Vpc", "outputs": {"tags": {"gtp:lifecycle": "ephemeral",
                                                                "gtp:expires-at": "2026-12-02T12:00:00Z"}}}]
    workspace = FakeWorkspace(configs={"bench-lost": {}}, remote_configs={})
    lines = []
    states = read_stack_states(workspace, log=lines.append,
                               state_lifecycle=lambda name: lifecycle_from_state(exported))
    assert lines == ["bench-lost: no gtp:lifecycle config; using the TTL tags in its state"]
    decision = decide_one(states[0], NOW)
    assert (decision.action, decision.reason) == (
        "destroy", "expired at 2026-12-02T12:00:00Z (from its state's TTL tags)")
    assert lifecycle_from_state([{"outputs": {"tags": {"gtp:lifecycle": "persistent"}}}]) is None
