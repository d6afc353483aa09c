"""The Makefile's promises: `make help` lists every target with its parameters, no target is empty, setup says
what it does and installs no Checkov, `make check` / `make test` install Checkov themselves, the light setup has no
torch. Only `make help` and dry runs (`make -n -B`: every command printed, none run) are used here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = ROOT / "Makefile"
BUILTIN = {"MAKE", "CURDIR", "MAKEFILE_LIST", "MAKEFLAGS"}

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is what runs these targets")


def _make(*args: str) -> str:
    done = subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def phony_targets(text: str) -> list[str]:
    return [name for line in text.splitlines() if line.startswith(".PHONY:") for name in line.split()[1:]]


@cache
def rules() -> dict[str, tuple[str, list[str]]]:
    """Target → (its prerequisites and `##` text, its recipe lines)."""
    found: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in MAKEFILE.read_text().splitlines():
        match = re.match(r"^([a-z][a-z-]*):(?!=)(.*)$", line)
        if match:
            current = match.group(1)
            found[current] = (match.group(2), [])
        elif line.startswith("\t") and current:
            found[current][1].append(line)
        elif not line.startswith("#"):
            current = None
    return found


def test_help_lists_every_phony_target():
    targets = phony_targets(MAKEFILE.read_text())
    listed = [line.split()[1] for line in _make("-s", "help").splitlines() if line.startswith("make ")]
    assert targets and sorted(set(targets) - set(listed)) == [], listed
    assert sorted(set(listed) - set(targets)) == [], "a listed target is missing from .PHONY"


def test_no_phony_target_is_empty_or_undocumented():
    for target in phony_targets(MAKEFILE.read_text()):
        assert target in rules(), f"{target} is in .PHONY but has no rule"
        head, recipe = rules()[target]
        prerequisites, _, comment = head.partition("##")
        assert comment.strip(), f"{target}: no `## ` text for make help"
        assert recipe or prerequisites.split(), f"{target} is an empty target (no recipe, no prerequisites)"
        if target.startswith("test"):
            assert any("pytest" in line for line in recipe), f"{target} runs no tests"


def test_help_names_each_parameter_a_target_reads():
    text = MAKEFILE.read_text()
    internal = set(re.findall(r"^([A-Z_]+) :=", text, flags=re.M)) | BUILTIN
    for target in phony_targets(text):
        head, recipe = rules()[target]
        used = set(re.findall(r"\$\(([A-Z_]+)\)", "\n".join(recipe))) - internal
        comment = head.partition("##")[2]
        missing = sorted(name for name in used if f"{name}=" not in comment)
        assert missing == [], f"make help's line of {target} doesn't name {missing}"


def test_setup_talks_and_installs_no_checkov():
    commands = _make("-n", "-B", "setup")
    assert "checkov" not in commands.lower()
    banners = re.findall(r"setup \[(\d)/(\d)\]", commands)
    assert [step for step, _ in banners] == ["1", "2", "3", "4"], banners


@pytest.mark.parametrize("target", ["check", "test"])
def test_check_and_test_install_checkov_themselves(target):
    assert "-r requirements-checkov.txt" in _make("-n", "-B", target)


def test_test_fast_needs_no_checkov():
    """The fast tier leaves out the tests that run Checkov (marked slow), so it does not install it."""
    assert "checkov" not in _make("-n", "-B", "test-fast").lower()


def test_setup_light_installs_no_torch():
    commands = _make("-n", "-B", "setup-light")
    assert "grep -v '^torch==' requirements.txt" in commands
    assert "-r requirements.txt" not in commands and "images/trainer" not in commands and "helm" not in commands
    assert "torch==" in (ROOT / "requirements.txt").read_text()  # so the filter has something to drop


def test_setup_plan_is_the_light_setup_and_helm():
    """What the pr workflow's plan diff installs: a plan renders the charts with helm and imports no torch."""
    commands = _make("-n", "-B", "setup-plan")
    assert "grep -v '^torch==' requirements.txt" in commands and "tools.vendor helm .venv/bin/helm" in commands
    assert "-r requirements.txt" not in commands and "images/trainer" not in commands


def test_bench_report_installs_matplotlib_only_for_a_plot():
    assert "requirements-plot.txt" in _make("-n", "-B", "bench-report", "SOURCE=build/none", "PLOT=busbw.png")
    assert "requirements-plot.txt" not in _make("-n", "-B", "bench-report", "SOURCE=build/none")
    assert "matplotlib" not in (ROOT / "requirements.txt").read_text()


def test_ci_calls_targets_that_exist():
    targets = set(phony_targets(MAKEFILE.read_text()))
    called = re.findall(r"\bmake ([a-z][a-z-]*)", (ROOT / ".ci" / "run").read_text())
    workflows = "\n".join(path.read_text() for path in (ROOT / ".github" / "workflows").glob("*.yml"))
    called += re.findall(r"run: make ([a-z][a-z-]*)", workflows)
    assert {"setup", "test", "engine-test", "swarm-test", "cluster-test"} <= set(called)
    assert sorted(set(called) - targets) == []
