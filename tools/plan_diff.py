"""What a change does to a stack's desired state: the offline plan at a git ref vs the working tree.

``python -m tools.plan_diff --stack dev --base origin/main`` (what ``make plan-diff`` runs) plans the stack
twice — from a temporary `git worktree` of BASE, with BASE's own code, and from the working tree — and prints
resources added, removed and changed, with the changed fields as dotted paths (``old -> new``). This is
what a reviewer reads on a pull request; no credentials are involved.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tools.plan_record import ROOT

_MISSING = object()


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested inputs as ``{"a.b[0].c": leaf}``; empty containers are leaves so they still show up."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def _comparable(resource: Mapping[str, Any]) -> dict[str, Any]:
    return {"inputs": resource.get("inputs", {}), "options": resource.get("options", {}),
            "dependsOn": resource.get("dependsOn", []), "provider": resource.get("provider"),
            "parent": resource.get("parent")}


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    flat_old, flat_new = flatten(_comparable(old)), flatten(_comparable(new))
    for key in sorted(set(flat_old) | set(flat_new)):
        before, after = flat_old.get(key, _MISSING), flat_new.get(key, _MISSING)
        if before != after:
            yield key, before, after


def _show(value: Any) -> str:
    return "(absent)" if value is _MISSING else json.dumps(value, sort_keys=True)


def diff_plans(base: Mapping[str, Any] | None, head: Mapping[str, Any]) -> str:
    """A readable diff of two `resources.json` documents (base None: the stack is new)."""
    old = {r["urn"]: r for r in (base or {}).get("resources", [])}
    new = {r["urn"]: r for r in head.get("resources", [])}
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = [(urn, list(field_changes(old[urn], new[urn]))) for urn in sorted(set(old) & set(new))]
    changed = [(urn, changes) for urn, changes in changed if changes]
    lines = [f"stack {head.get('stack')}: {len(added)} to add, {len(changed)} to change, {len(removed)} to delete"]
    for urn in added:
        lines.append(f"+ {new[urn]['type']}  {new[urn]['name']}")
    for urn in removed:
        lines.append(f"- {old[urn]['type']}  {old[urn]['name']}")
    for urn, changes in changed:
        lines.append(f"~ {new[urn]['type']}  {new[urn]['name']}")
        lines.extend(f"    {path}: {_show(before)} -> {_show(after)}" for path, before, after in changes)
    output_changes = list(field_changes({"inputs": (base or {}).get("outputs", {})}, {"inputs": head.get("outputs", {})}))
    if output_changes:
        lines.append("outputs:")
        lines.extend(f"    {path.removeprefix('inputs.')}: {_show(before)} -> {_show(after)}"
                     for path, before, after in output_changes)
    return "\n".join(lines)


def plan_tree(tree: Path, stack: str, out: Path) -> dict[str, Any] | None:
    """Plan `stack` with the code in `tree`; None if the stack doesn't exist there."""
    if not (tree / "stacks" / f"Pulumi.{stack}.yaml").exists():
        return None
    from tools.validate import crd_dir

    # The base worktree lives in a temp dir, away from ../shared/crds: point it at the same schemas.
    schemas, _ = crd_dir(download=False)
    env = {**os.environ, **({"GTP_CRD_DIR": str(schemas)} if schemas else {})}
    # Refs from before the tools/ package kept the planner at gtp/plan.py.
    module = "tools.plan" if (tree / "tools" / "plan.py").exists() else "gtp.plan"
    result = subprocess.run([sys.executable, "-m", module, "--stack", stack, "--out", str(out), "--quiet"],
                            cwd=tree, capture_output=True, text=True, check=False, env=env)
    path = out / stack / "resources.json"
    if not path.exists():  # validation failures still write the plan; config errors don't
        raise RuntimeError(f"planning {stack} in {tree} failed:\n{result.stderr.strip()}")
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan_diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main or HEAD~1")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gtp-plan-diff-") as tmp:
        worktree = Path(tmp) / "base"
        try:
            subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(worktree), args.base], cwd=ROOT,
                           check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as error:
            print(f"error: can't check out {args.base!r}: {error.stderr.strip()}", file=sys.stderr)
            return 2
        try:
            base = plan_tree(worktree, args.stack, Path(tmp) / "base-plan")
            head = plan_tree(ROOT, args.stack, Path(tmp) / "head-plan")
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False,
                           capture_output=True)
    if head is None:
        print(f"stack {args.stack}: removed in the working tree")
        return 0
    print(diff_plans(base, head))
    return 0


if __name__ == "__main__":
    sys.exit(main())
