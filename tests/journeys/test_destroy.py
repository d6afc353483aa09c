"""tools.destroy: bounded retries on transient AWS errors only, then the orphan audit decides the exit status."""

import pytest

from tools import destroy as destroy_module
from tools.destroy import CommandResult, backoff_seconds, destroy_stack, report, transient_error
from tools.orphans import Orphan

SUBNET_IN_USE = (
    "  aws:ec2:Subnet (dev-private-a):\n"
    "    error: deleting EC2 Subnet (subnet-0abc): operation error EC2: DeleteSubnet, https response error "
    "StatusCode: 400, api error DependencyViolation: The subnet 'subnet-0abc' has dependencies and cannot be deleted.\n"
)
SG_ENI_IN_USE = "error: api error InvalidParameterValue: Network interface 'eni-0f' is currently in use.\n"
PROTECTED = ("error: resource urn:pulumi:dev::gtp::aws:eks/cluster:Cluster::dev cannot be deleted because it is "
             "protected\n")


class ScriptedRunner:
    def __init__(self, *results):
        self.results = list(results)
        self.calls = 0

    def __call__(self, stack):
        self.calls += 1
        return self.results.pop(0)


def no_orphans(stack):
    return []


def run(runner, audit=no_orphans, retries=3):
    sleeps, lines = [], []
    outcome = destroy_stack("dev", runner=runner, audit=audit, retries=retries, backoff_base=10,
                            sleep=sleeps.append, log=lines.append)
    return outcome, sleeps, lines


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (SUBNET_IN_USE, "DependencyViolation"),
        (SG_ENI_IN_USE, "is currently in use"),
        ("error: DependencyViolation: resource sg-1 has a dependent object\n", "DependencyViolation"),
        ("error: InvalidParameterValue: The security group is in use by eni-1\n", "in use"),
        (PROTECTED, None),
        ("error: InvalidParameterValue: Value (x) for parameter name is invalid\n", None),
        ("error: AccessDenied: not authorized to perform ec2:DeleteSubnet\n", None),
    ],
)
def test_transient_error_classification(output, expected):
    found = transient_error(output)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found


def test_retries_transient_error_then_succeeds():
    runner = ScriptedRunner(CommandResult(255, SUBNET_IN_USE), CommandResult(255, SG_ENI_IN_USE),
                            CommandResult(0, "Resources: 42 deleted\n"))
    outcome, sleeps, lines = run(runner)
    assert (outcome.ok, outcome.exit_code, outcome.attempts, runner.calls) == (True, 0, 3, 3)
    assert sleeps == [10, 20]
    assert "[dev] transient AWS error, retrying in 10s (1/3):" in lines[0]
    assert "DependencyViolation" in lines[0]


def test_gives_up_after_the_retry_budget():
    runner = ScriptedRunner(*[CommandResult(255, SUBNET_IN_USE)] * 3)
    outcome, sleeps, _ = run(runner, retries=2)
    assert (outcome.destroyed, outcome.exit_code, runner.calls, len(sleeps)) == (False, 1, 3, 2)
    assert outcome.error.startswith("pulumi destroy still failing after 3 attempts: ")
    assert "has dependencies and cannot be deleted" in outcome.error


def test_does_not_retry_a_non_transient_error():
    runner = ScriptedRunner(CommandResult(255, PROTECTED))
    outcome, sleeps, _ = run(runner)
    assert (runner.calls, sleeps, outcome.exit_code) == (1, [], 1)
    assert outcome.error == "pulumi destroy failed (exit 255) with a non-transient error"


def test_zero_retries_means_one_attempt():
    outcome, _, _ = run(ScriptedRunner(CommandResult(1, SUBNET_IN_USE)), retries=0)
    assert outcome.attempts == 1 and not outcome.ok
    with pytest.raises(ValueError, match="retries must be >= 0, got -1"):
        run(ScriptedRunner(), retries=-1)


def test_audit_failure_is_non_zero_even_after_a_clean_destroy():
    def broken_audit(stack):
        raise RuntimeError("Unable to locate credentials")

    outcome, _, _ = run(ScriptedRunner(CommandResult(0, "")), audit=broken_audit)
    assert outcome.destroyed and outcome.exit_code == 1
    assert outcome.error == "orphan audit failed: RuntimeError: Unable to locate credentials"


def test_orphans_after_destroy_are_printed_and_fail():
    orphan = Orphan("elb:load-balancer", "a1b2c3", "us-east-1", "tag kubernetes.io/cluster/gtp-dev=owned")
    outcome, _, _ = run(ScriptedRunner(CommandResult(0, "")), audit=lambda stack: [orphan])
    assert outcome.exit_code == 1
    text = report(outcome)
    assert "[dev] resources still exist" in text
    assert "elb:load-balancer  a1b2c3  us-east-1  tag kubernetes.io/cluster/gtp-dev=owned" in text


def test_audit_runs_after_a_failed_destroy_too():
    audited = []
    outcome, _, _ = run(ScriptedRunner(CommandResult(1, PROTECTED)), audit=lambda s: audited.append(s) or [])
    assert audited == ["dev"] and outcome.exit_code == 1


def test_backoff_is_exponential_and_capped():
    assert [backoff_seconds(n, 30) for n in (1, 2, 3, 4, 5, 6)] == [30, 60, 120, 240, 300, 300]


def test_cli_wires_runner_audit_and_retries(monkeypatch, capsys):
    seen = {}

    def fake_runner(cwd, env=None, deadline=None):
        seen["cwd"] = cwd
        return ScriptedRunner(CommandResult(1, SUBNET_IN_USE), CommandResult(0, ""))

    monkeypatch.setattr(destroy_module, "subprocess_runner", fake_runner)
    monkeypatch.setattr(destroy_module, "boto3_audit", lambda cluster_name, region: no_orphans)
    monkeypatch.setattr(destroy_module.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(destroy_module, "state_resources", lambda cwd: lambda stack: [])
    monkeypatch.setattr(destroy_module, "delete_control_plane_log_group", lambda cluster, region: lambda stack: [])
    monkeypatch.setattr(destroy_module, "results_keeper", lambda args, region, env=None, bucket_of=None: lambda s: [])
    monkeypatch.setattr(destroy_module, "artifacts_bucket_preflight", lambda *arguments: lambda s: [])
    assert destroy_module.main(["bench-x", "--yes", "--retries", "1", "--cwd", "/proj"]) == 0
    assert seen["cwd"] == "/proj"
    assert "[bench-x] destroyed after 2 attempt(s)" in capsys.readouterr().out


def test_pulumi_command_is_non_interactive():
    assert destroy_module.pulumi_destroy_command("bench-x") == [
        "pulumi", "destroy", "--yes", "--non-interactive", "--skip-preview", "--stack", "bench-x"]
