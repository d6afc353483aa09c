"""Helpers for the GPU enablement tests: stack configs from dicts, golden files, modified whole-stack plans."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config import StackConfig
from stages.config import parse_stack_config
from verify import plan as gtp_plan

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def stack_raw(stack: str) -> dict[str, Any]:
    """A checked-in stack's `gtp:` config as a dict without the namespace (secrets replaced by placeholders)."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    raw = {}
    for key, value in document["config"].items():
        key = key.split(":", 1)[1]
        raw[key] = f"fake-{key}" if isinstance(value, dict) and set(value) == {"secure"} else value
    return raw


def config_of(stack: str, edit: Callable[[dict[str, Any]], None] | None = None) -> StackConfig:
    """Parse a checked-in stack's config, optionally after `edit(raw)` changed it."""
    raw = copy.deepcopy(stack_raw(stack))
    if edit:
        edit(raw)
    secrets = [key for key in ("kubeconfig", "registryPassword") if key in raw]
    return parse_stack_config(raw, project="gtp", stack="t", secret_keys=secrets)


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/gpu/golden/<name>; `UPDATE_GOLDEN=1 pytest tests/gpu` rewrites the files (review the
    diff: it is exactly what changes on the nodes)."""
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run UPDATE_GOLDEN=1 pytest tests/gpu"
    assert text == path.read_text(), f"{name} changed; if intended, run UPDATE_GOLDEN=1 pytest tests/gpu"


@pytest.fixture
def modified_plan(tmp_path: Path) -> Callable[[str, Callable[[dict[str, Any]], None]], gtp_plan.Plan]:
    """Plan a copy of a stack file after `edit(config)` changed it (keys like 'gtp:gpuNodeGroups')."""

    def run(stack: str, edit: Callable[[dict[str, Any]], None]) -> gtp_plan.Plan:
        document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
        edit(document["config"])
        path = tmp_path / f"Pulumi.{stack}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return gtp_plan.run(stack, stack_file=path)

    return run


@pytest.fixture(name="config_of")
def config_of_fixture() -> Callable[..., StackConfig]:
    return config_of


@pytest.fixture(name="assert_golden")
def assert_golden_fixture() -> Callable[[str, str], None]:
    return assert_golden
