"""Below the registries nothing compares a cluster mode's or a workload kind's name: rules ask the traits the
targets and kinds declare (stack_config/targets.py, stack_config/kinds.py). The scan below finds the class of
mistake (a comparison of `cluster.mode` or a workload's `kind` with a literal, or a table keyed by mode names looked
up with one), and the registries refuse what would make an answer silently wrong."""

from __future__ import annotations

import ast

import pytest

import cluster_targets
import workload_kinds
from stack_config import applicability, kinds, targets
from tests.conftest import ROOT

BELOW_THE_REGISTRIES = ("__main__.py", "catalog", "conventions", "stack_config", "components", "stages", "verify",
                        "tools")
CHOICES = ("cluster.mode", "workload.kind")


def _literal(node: ast.expr) -> bool:
    """A string, or a tuple/list/set/dict of them (a mode-keyed table)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys) and all(k is not None and _literal(k) for k in node.keys)
    return False


def name_compares(source: str) -> list[str]:
    """`cluster.mode` or `workload.kind` compared with (or looked up in) string literals: line and code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        operands: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            operands = [node.func.value, *node.args[:1]]
        elif isinstance(node, ast.Subscript):
            operands = [node.value, node.slice]
        chosen = [o for o in operands if ast.unparse(o).endswith(CHOICES)]
        if chosen and any(_literal(o) for o in operands if o not in chosen):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_each_form_of_the_mistake() -> None:
    planted = ('if config.cluster.mode == "eks": pass\n'
               'if config.cluster.mode not in ("existing", "swarm"): pass\n'
               'handler = {"existing": "runc"}.get(config.cluster.mode)\n'
               'if workload.kind != "pytorchjob": pass\n'
               'if self.workload.kind in {"pytorchjob", "trainjob"}: pass\n')
    assert len(name_compares(planted)) == 5
    fine = ('if config.cluster.mode in IN_AWS: pass\n'
            'if workload.kind not in KEDA_SCALED: pass\n'
            'if storage.kind == "existing": pass\n'
            'if workload.autoscaling.mode == "scaledjob": pass\n'
            'traits = TARGETS[config.cluster.mode]\n')
    assert name_compares(fine) == []


def test_no_mode_or_kind_name_is_compared_below_the_registries() -> None:
    found = []
    for top in BELOW_THE_REGISTRIES:
        paths = [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))
        for path in paths:
            found += [f"{path.relative_to(ROOT)}:{hit}" for hit in name_compares(path.read_text())]
    assert found == [], "ask the traits (stack_config/targets.py, kinds.py) instead:\n" + "\n".join(found)


def test_every_target_and_configurable_kind_is_registered_with_its_traits() -> None:
    for mode, target in cluster_targets.TARGETS.items():
        assert targets.traits_for(mode) == target.traits
        assert target.platform == target.traits.platform
    for name in workload_kinds.CONFIGURABLE:
        assert kinds.kind_traits(name) == workload_kinds.KINDS[name].traits
    # What the traits say today, as the rules used to spell it out by name.
    assert targets.IN_AWS.names == ("eks",)
    assert targets.ADOPTED_NODES.names == ("existing", "swarm")
    assert kinds.KUEUE_ADMITTED.names == ("pytorchjob", "trainjob")
    assert kinds.KEDA_SCALED.names == ("pytorchjob",)


def test_registering_a_name_twice_with_other_traits_is_refused() -> None:
    eks = targets.traits_for("eks")
    targets.register("eks", eks)  # the same traits again: idempotent (a module imported twice)
    with pytest.raises(ValueError, match="cluster target 'eks' is registered twice"):
        targets.register("eks", targets.TargetTraits(platform="swarm"))
    assert targets.traits_for("eks") is eks
    with pytest.raises(ValueError, match="workload kind 'pytorchjob' is registered twice"):
        kinds.register("pytorchjob", kinds.KindTraits())


def test_an_unregistered_name_is_a_clear_error_not_an_empty_answer() -> None:
    with pytest.raises(LookupError, match=r"no cluster target is registered for cluster.mode 'nope' \(registered: "
                                          r"eks, existing, swarm"):
        targets.traits_for("nope")
    with pytest.raises(LookupError, match=r"no workload kind is registered for workloads.<name>.kind 'nope'"):
        kinds.kind_traits("nope")
    nothing = targets.TARGETS.capable(lambda traits: False)
    assert "eks" not in nothing and 3 not in nothing
    with pytest.raises(LookupError, match="names no registered target or kind"):
        applicability.values_of((nothing,))
