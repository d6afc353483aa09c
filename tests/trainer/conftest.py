"""Fixtures for trainer tests (the lead's tests/conftest.py stays untouched)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Test modules import trainer_harness by name; put this dir on sys.path whatever pytest's --import-mode is.
sys.path.insert(0, str(Path(__file__).parent))

from trainer_harness import BASE_FLAGS, run, torchrun_command, trainer_env


@pytest.fixture(scope="session")
def baseline_digest(tmp_path_factory) -> str:
    """param_digest of an uninterrupted 2-rank torchrun run with BASE_FLAGS (the reference for resume tests)."""
    directory = tmp_path_factory.mktemp("baseline")
    result = run(torchrun_command(2, [*BASE_FLAGS, "--checkpoint-dir", str(directory / "ck")]), trainer_env(),
                 directory)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.done()["param_digest"]
