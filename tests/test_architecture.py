"""The layers of ARCHITECTURE.md hold: import-linter's contracts pass, a planted wrong import breaks them, no
module takes part in an import cycle, and `__main__.py` stays wiring only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.conftest import ROOT

PACKAGES = ("catalog", "conventions", "stack_config", "components", "cluster_targets", "workload_kinds", "stages",
            "verify", "tools", "policy")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "COLUMNS": "250"})


def copy_packages(target: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", target / ".importlinter")
    return target


def test_import_contracts_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "planted", "contract"), [
    # A component reading the stack config instead of taking its Args.
    ("components/network.py", "from stack_config import StackConfig", "Components never read the stack config"),
    # The domain reaching up into the tools.
    ("stack_config/derived.py", "import verify.plan", "Layers"),
    # Two registries depending on each other.
    ("workload_kinds/base.py", "import cluster_targets", "Layers"),
    # The policy pack importing the project (it runs in its own environment).
    ("policy/gtp_policy/model.py", "from catalog import versions", "The policy pack stands alone"),
    # A stage reaching into a concrete target, a tool into a concrete kind, instead of asking the registry.
    ("stages/workloads.py", "from cluster_targets.eks import node_taints", "Registries are closed"),
    ("verify/plan.py", "import workload_kinds.pytorchjob", "Registries are closed"),
])
@pytest.mark.slow
def test_a_planted_wrong_import_breaks_the_contract(tmp_path: Path, module: str, planted: str, contract: str) -> None:
    root = copy_packages(tmp_path)
    path = root / module
    path.write_text(path.read_text() + f"\n{planted}  # planted by the test\n")
    result = lint_imports(root)
    assert result.returncode != 0
    # "<name> BROKEN", or "<name> BROKEN (1 ignored import)" for a contract with ignore_imports
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN") or " BROKEN (" in line]
    assert any(line.startswith(contract) for line in broken), result.stdout


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one module (import cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_strongly_connected_finds_a_cycle() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    edges = {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    assert strongly_connected(edges) == []


def test_main_is_wiring_only() -> None:
    source = (ROOT / "__main__.py").read_text()
    code = [line for line in source.split('"""', 2)[2].splitlines()
            if line.strip() and not line.strip().startswith("#")]
    assert len(code) <= 40, f"__main__.py has {len(code)} non-comment lines"
    assert "config.get" not in source and "import pulumi_" not in source
