"""Golden copies of every stack's plan: an infra change shows up as a diff of these files in review.

Refresh after an intended change with `make golden` (UPDATE_GOLDEN=1), and review the diff like code.
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT, plan_stack
from verify import plan as gtp_plan

GOLDEN = ROOT / "tests" / "golden"


@pytest.mark.parametrize("stack", ["dev", "edge", "edge-swarm", "prod"])
def test_plan_matches_golden(stack: str) -> None:
    resources, manifests = gtp_plan.render(plan_stack(stack))
    directory = GOLDEN / stack
    if os.environ.get("UPDATE_GOLDEN"):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "resources.json").write_text(resources)
        (directory / "manifests.yaml").write_text(manifests)
    assert (directory / "resources.json").read_text() == resources, (
        f"the {stack} plan changed; review `git diff tests/golden` after `make golden`")
    assert (directory / "manifests.yaml").read_text() == manifests
