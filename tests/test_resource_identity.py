"""Issue 41 major 3: no Pulumi resource is named by a list position.

A resource's name is its identity to the engine. Named by an index (`f"{name}-admin-{index}"`), removing or
reordering an item gives the same name to another item, which the engine reads as an update of that resource — and
where AWS makes the resource unique by a field (one EKS access entry per principal), the create-first replacement
that follows collides with the entry it replaces. Key such resources by that field (a node group by its map key, a
subnet by its zone, an access entry by its principal). This scan finds the class in every platform module: a call
that may register a resource with a positional argument (the resource name, or the part of it a helper is given)
that is an f-string formatting the index of an enclosing `enumerate` (or `range`) loop.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ("__main__.py", "components", "cluster_targets", "stages", "workload_kinds")


def _index_names(node: ast.For | ast.comprehension) -> set[str]:
    """The index variable(s) of `for i, x in enumerate(...)` (also `for i in range(len(...))`)."""
    iterator = node.iter
    if not isinstance(iterator, ast.Call) or not isinstance(iterator.func, ast.Name):
        return set()
    target = node.target
    if iterator.func.id == "enumerate" and isinstance(target, ast.Tuple) and target.elts \
            and isinstance(target.elts[0], ast.Name):
        return {target.elts[0].id}
    if iterator.func.id == "range" and isinstance(target, ast.Name):
        return {target.id}
    return set()


PROVIDER_MODULES = frozenset({"aws", "k8s", "kubernetes", "docker", "pulumi", "helm"})
"""How the platform imports the Pulumi SDKs: a call below one of these registers a resource (or reads one)."""
NOT_RESOURCES = frozenset({"Problem"})
"""Classes whose first argument is a key path, not a resource name (a config problem names `x[3]` by position)."""


def _registers(call: ast.Call) -> bool:
    """Whether `call` may register a resource: a provider SDK's class, a component's (a capitalized class of our
    own), or a component's private helper (`self._admin_access(...)`) that registers children."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id[:1].isupper() and func.id not in NOT_RESOURCES
    if isinstance(func, ast.Attribute):
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in PROVIDER_MODULES:
            return True
        return isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr.startswith("_")
    return False


def _formats(value: ast.expr, names: set[str]) -> bool:
    return isinstance(value, ast.JoinedStr) and any(
        isinstance(part, ast.FormattedValue) and any(isinstance(n, ast.Name) and n.id in names
                                                     for n in ast.walk(part.value))
        for part in value.values)


def positional_names(source: str, filename: str = "<source>") -> Iterator[str]:
    """`file:line` of every call named by an enclosing loop's index."""
    tree = ast.parse(source, filename)

    def visit(node: ast.AST, indexes: set[str]) -> Iterator[str]:
        if isinstance(node, ast.For):
            indexes = indexes | _index_names(node)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in node.generators:
                indexes = indexes | _index_names(generator)
        if isinstance(node, ast.Call) and indexes and _registers(node) \
                and any(_formats(arg, indexes) for arg in node.args):
            yield f"{filename}:{node.lineno}"
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and child is not node:
                yield from visit(child, set())  # a nested function's own loops only
            else:
                yield from visit(child, indexes)

    yield from visit(tree, set())


def _platform_files() -> list[Path]:
    files: list[Path] = []
    for entry in PLATFORM:
        path = ROOT / entry
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


def test_no_platform_resource_is_named_by_a_list_position() -> None:
    found = [hit for path in _platform_files()
             for hit in positional_names(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], f"resources named by a list position (key them by what identifies them): {found}"


@pytest.mark.parametrize("source", [
    # the instance issue 41 found (components/eks_cluster.py before the fix)
    "for index, role in enumerate(roles):\n    self._admin_access(name, f'admin-{index}', role)\n",
    "for i, cidr in enumerate(cidrs):\n    aws.ec2.SecurityGroupIngressRule(f'{name}-api-{i}', cidr_ipv4=cidr)\n",
    "rules = [aws.vpc.SecurityGroupIngressRule(f'{name}-{i}', cidr_ipv4=c) for i, c in enumerate(cidrs)]\n",
    "targets = [aws.efs.MountTarget(f'{name}-mount-{index}', subnet_id=ids[index]) for index in range(count)]\n",
    "for i in range(len(zones)):\n    aws.ec2.Subnet(f'{name}-private-{i}', availability_zone=zones[i])\n",
])
def test_the_scan_finds_each_form_of_a_positional_name(source: str) -> None:
    assert list(positional_names(source)) == ["<source>:2" if "\n    " in source else "<source>:1"]


@pytest.mark.parametrize("source", [
    "for index, zone in enumerate(zones):\n    aws.ec2.Subnet(f'{name}-private-{zone}', cidr_block=cidrs[index])\n",
    "for index, doc in enumerate(documents):\n    log(f'document {doc}')\n    documents[index] = doc\n",
    "for index, cidr in enumerate(cidrs):\n    yield Problem(f'cluster.cidrs[{index}]', f'{cidr!r} is not a CIDR')\n",
    "for role in roles:\n    self._admin_access(name, f'admin-{principal_key(role)}', role)\n",
])
def test_the_scan_passes_names_keyed_by_identity(source: str) -> None:
    assert list(positional_names(source)) == []
