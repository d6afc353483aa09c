"""Whole-program plans of the stacks, run once per test session (each takes a few seconds under mocks)."""

from __future__ import annotations

import pytest

from verify.plan import Plan, run

_PLANS: dict[str, Plan] = {}


@pytest.fixture(scope="session")
def plan_of():
    def get(stack: str) -> Plan:
        if stack not in _PLANS:
            _PLANS[stack] = run(stack)
        return _PLANS[stack]

    return get
