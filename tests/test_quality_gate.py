"""The Python quality gate in `make check` (verify/check.py): each of its three tools, with this repository's own
configuration, fails on a planted defect of the kind it is there for, and `make check` runs all three."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verify import check

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

PLANTED = '''"""A module with one defect of each kind."""

import os


def unused_helper() -> int:
    return 1


def typed() -> int:
    return "not an int"
'''


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=300)


def test_make_check_runs_the_three_tools_on_the_platform_code() -> None:
    source = Path(check.__file__).read_text()
    for name in ('"ruff"', '"types"', '"dead code"'):
        assert f"results[{name}]" in source
    assert {"catalog", "components", "stack_config", "tools", "verify", "tests", "vulture_whitelist.py"} <= set(
        check.VULTURE_PATHS)
    include = json.loads("\n".join(line for line in (ROOT / "pyrightconfig.json").read_text().splitlines()
                                   if not line.lstrip().startswith("//")))["include"]
    assert {"catalog", "components", "stack_config", "stages", "tools", "verify", "workload_kinds"} <= set(include)


@pytest.mark.slow
def test_ruff_with_the_repo_config_fails_on_an_unused_import(tmp_path: Path) -> None:
    (tmp_path / "planted.py").write_text(PLANTED)
    done = _run([str(BIN / "ruff"), "check", "--no-cache", "--config", str(ROOT / "ruff.toml"), "planted.py"],
                tmp_path)
    assert done.returncode == 1 and "F401" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_vulture_with_the_whitelist_fails_on_a_dead_function(tmp_path: Path) -> None:
    (tmp_path / "planted.py").write_text(PLANTED)
    done = _run([str(BIN / "vulture"), "planted.py", str(ROOT / "vulture_whitelist.py"), "--min-confidence", "60"],
                tmp_path)
    assert done.returncode == 3 and "unused function 'unused_helper'" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_basedpyright_in_basic_mode_fails_on_a_finding_missing_from_the_baseline(tmp_path: Path) -> None:
    """The repo's settings (basic mode, Python 3.11) on a project of one planted file: the wrong return type is an
    error, because no baseline lists it."""
    settings = json.loads("\n".join(line for line in (ROOT / "pyrightconfig.json").read_text().splitlines()
                                    if not line.lstrip().startswith("//")))
    settings.update(include=["planted.py"], extraPaths=[], venvPath=str(ROOT), venv=".venv")
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(settings))
    (tmp_path / "planted.py").write_text(PLANTED)
    done = _run([str(BIN / "basedpyright")], tmp_path)
    assert done.returncode == 1 and "reportReturnType" in done.stdout, done.stdout + done.stderr
