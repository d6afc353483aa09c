"""Issue 41 blocker 1: every AWS stack as committed deploys once a user fills in only what is theirs.

The real engine's refusal gates (`stages.config.load_stack_config`: placeholders, unpinned build inputs, the air
gap; `stages.cluster`: the caller's access; the EKS preflight) run here as under `pulumi preview`, on the committed
`dev` and `prod` and on a bench stack made from the template. Before: every one was refused for a catalog pin
shipped empty (the node monitoring agent's build, the EFA installer's digest) that no user value could lift.
`docs/deploy.md` lists exactly the values these stacks ask for; a test holds the list to the gates.
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

import stages.cluster
import stages.config
from stack_config import ConfigError
from tests.conftest import ROOT
from tools import bench_stack
from verify import plan as gtp_plan

BENCH_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "ab" * 32

# What a user of one organisation fills in: its accounts, its networks' CIDRs, its runners, its Transit Gateway and
# its reservation (each a value `stack_config/placeholders.py` recognises as a stand-in before).
OWN_VALUES = {
    "123456789012": "731956284017", "210987654321": "731956284018",  # accounts
    "203.0.113.": "52.94.76.", "192.0.2.": "10.251.0.", "198.51.100.": "10.250.1.",  # CIDRs
    "-example]": "-runner]",  # runner labels
    "tgw-0123456789abcdef0": "tgw-0a1b2c3d4e5f60718",
    "cr-0123456789abcdef0": "cr-0a1b2c3d4e5f60718",
}


def _bench(root: Path) -> Path:
    for path in ("Pulumi.yaml", "__main__.py"):
        shutil.copy2(ROOT / path, root / path)
    shutil.copytree(ROOT / "stacks", root / "stacks")
    return bench_stack.create("shipped", 6, BENCH_IMAGE, root=root, now=datetime(2026, 12, 7, 12, tzinfo=UTC))


def _stack_file(tmp_path: Path, stack: str) -> tuple[str, Path]:
    if stack == "bench":
        path = _bench(tmp_path)
        return "bench-shipped", path
    return stack, ROOT / "stacks" / f"Pulumi.{stack}.yaml"


def _filled_in(tmp_path: Path, name: str, path: Path) -> Path:
    text = path.read_text()
    for stand_in, own in OWN_VALUES.items():
        text = text.replace(stand_in, own)
    filled = tmp_path / "filled" / f"Pulumi.{name}.yaml"
    filled.parent.mkdir(parents=True, exist_ok=True)
    filled.write_text(text)
    return filled


def _as_the_engine(monkeypatch: pytest.MonkeyPatch, deployer: str | None = None) -> None:
    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)
    monkeypatch.setattr(stages.cluster, "under_mocks", lambda: False)
    if deployer is not None:
        monkeypatch.setattr(stages.cluster, "caller_role", lambda provider: deployer)


def _refusals(monkeypatch: pytest.MonkeyPatch, name: str, path: Path) -> list:
    _as_the_engine(monkeypatch)
    with pytest.raises(ConfigError) as caught:
        gtp_plan.run(name, stack_file=path, into=gtp_plan.Plan(project="gtp", stack=name))
    return caught.value.problems


@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod", "bench"])
def test_as_shipped_the_engine_asks_only_for_the_users_own_values(monkeypatch, tmp_path: Path, stack: str) -> None:
    name, path = _stack_file(tmp_path, stack)
    problems = _refusals(monkeypatch, name, path)
    assert problems and all(p.message.startswith("placeholder — ") for p in problems), \
        [f"{p.path}: {p.message}" for p in problems if not p.message.startswith("placeholder — ")]


@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod", "bench"])
def test_with_the_users_own_values_every_gate_of_preview_passes(monkeypatch, tmp_path: Path, stack: str) -> None:
    name, path = _stack_file(tmp_path, stack)
    filled = _filled_in(tmp_path, name, path)
    deployer = re.search(r"deployerRoleArn: (\S+)", filled.read_text()).group(1)
    _as_the_engine(monkeypatch, deployer)
    plan = gtp_plan.run(name, stack_file=filled)
    assert plan.by_type("aws:eks/cluster:Cluster") and plan.by_type("pulumi:providers:kubernetes")


def _generalized(path: str) -> str:
    return re.sub(r"\[\d+\]", "[*]", path)


def _asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, set[str]]:
    """Generalized key path → the stacks whose preview asks for it."""
    asked: dict[str, set[str]] = {}
    for stack in ("dev", "prod", "bench"):
        name, path = _stack_file(tmp_path / stack, stack) if stack == "bench" else _stack_file(tmp_path, stack)
        for problem in _refusals(monkeypatch, name, path):
            asked.setdefault(_generalized(problem.path), set()).add(stack)
    return asked


def _documented() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = text.split("<!-- values to fill in -->", 1)[1].split("<!-- end of values to fill in -->", 1)[0]
    rows = [line.strip().split("|") for line in block.splitlines() if line.strip().startswith("| `")]
    return {row[1].strip().strip("`"): {s.strip() for s in row[2].split(",")} for row in rows}


@pytest.mark.program
def test_deploy_md_lists_exactly_what_preview_asks_for(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    assert _documented() == _asked(monkeypatch, tmp_path)
