"""What a change does to a stack's desired state: the offline plan at a git ref vs the working tree.

``python -m tools.plan_diff --stack dev --base origin/main`` (what ``make plan-diff`` runs) plans the stack
twice — from a temporary `git worktree` of BASE, with BASE's own code, and from the working tree — and prints
resources added (``+``, with their key inputs), removed (``-``), changed in place (``~``) and replaced (``+-``,
naming the property that forces it, from ``tools.replacements``), with the changed fields as dotted paths
(``old -> new``; multi-line YAML/JSON values as line diffs). Fields a resource's ``ignoreChanges`` covers are left
out, as Pulumi leaves them out. Version changes (providers' SDK pins, Helm charts, EKS add-ons, vendored
manifests) are listed together, and the head plan's policy violations are shown. Exit status: 0 clean, 1 the
head plan has policy violations or failed, 2 an unknown stack or ref. This is what a reviewer reads on a pull
request; no credentials are involved.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tools.plan_record import ROOT
from tools.replacements import forcing

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


def _ignored(path: str, ignore_changes: list[str]) -> bool:
    """Whether Pulumi ignores `path` (``inputs.a.b[0]``) under `ignoreChanges` (``a.b``, ``a.b[*]``, ``a.*``)."""
    if not path.startswith("inputs."):
        return False
    bare = path.removeprefix("inputs.")
    for pattern in ignore_changes:
        regex = re.escape(pattern).replace(r"\[\*\]", r"\[\d+\]").replace(r"\*", r"[^.\[]+")
        if re.fullmatch(rf"{regex}(?:[.\[].*)?", bare):
            return True
    return False


def _multiline(value: Any) -> list[str] | None:
    """A string value as lines when it is multi-line or a JSON document (pretty-printed); None otherwise."""
    if not isinstance(value, str):
        return None
    stripped = value.strip()
    if stripped[:1] in "{[":
        try:
            return json.dumps(json.loads(stripped), indent=2, sort_keys=True).splitlines()
        except ValueError:
            pass
    return value.splitlines() if "\n" in stripped else None


def _change_lines(path: str, before: Any, after: Any) -> list[str]:
    old_lines = [] if before is _MISSING else _multiline(before)
    new_lines = [] if after is _MISSING else _multiline(after)
    if old_lines is not None and new_lines is not None and (old_lines or new_lines):
        body = list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=2))[2:]
        return [f"    {path}:"] + [f"        {line}" for line in body]
    return [f"    {path}: {_show(before)} -> {_show(after)}"]


_KEY_INPUTS = 8


def _key_inputs(resource: Mapping[str, Any]) -> list[str]:
    """A new resource's scalar inputs, those that would force a replacement later (its identity) first."""
    flat = flatten(resource.get("inputs", {}))
    identity = set(forcing(resource["type"], list(flat)))
    shown = sorted(((path, value) for path, value in flat.items() if path and not isinstance(value, (dict, list))),
                   key=lambda item: (item[0] not in identity, item[0]))
    lines = [f"    {path}: {_show(value)}" for path, value in shown[:_KEY_INPUTS]]
    if len(shown) > _KEY_INPUTS:
        lines.append(f"    ... and {len(shown) - _KEY_INPUTS} more input(s)")
    return lines


_VERSION_PATH = re.compile(r"(?:^|\.)(?:version|addonVersion|clusterVersion|releaseVersion|directory|file|chart)$")


def version_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Version bumps of charts, add-ons, vendored manifests and the cluster, one line each."""
    lines = []
    for urn in sorted(set(old) & set(new)):
        for path, before, after in field_changes(old[urn], new[urn]):
            if path.startswith("inputs.") and _VERSION_PATH.search(path.removeprefix("inputs.")):
                lines.append(f"    {new[urn]['type']}  {new[urn]['name']}  {path.removeprefix('inputs.')}: "
                             f"{_show(before)} -> {_show(after)}")
    return lines


def diff_plans(base: Mapping[str, Any] | None, head: Mapping[str, Any],
               provider_versions: list[str] | None = None) -> str:
    """A readable diff of two `resources.json` documents (base None: the stack is new)."""
    old = {r["urn"]: r for r in (base or {}).get("resources", [])}
    new = {r["urn"]: r for r in head.get("resources", [])}
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = []
    for urn in sorted(set(old) & set(new)):
        ignore = list(new[urn].get("options", {}).get("ignoreChanges") or [])
        changes = [c for c in field_changes(old[urn], new[urn]) if not _ignored(c[0], ignore)]
        if changes:
            changed.append((urn, changes))
    replaced = {urn: forcing(new[urn]["type"], [path for path, _, _ in changes])
                for urn, changes in changed if new[urn].get("custom", True)}
    replaced = {urn: props for urn, props in replaced.items() if props}
    lines = [f"stack {head.get('stack')}: {len(added)} to add, {len(changed) - len(replaced)} to change, "
             f"{len(replaced)} to replace, {len(removed)} to delete"]
    for urn in added:
        lines.append(f"+ {new[urn]['type']}  {new[urn]['name']}")
        if new[urn].get("custom", True):
            lines.extend(_key_inputs(new[urn]))
    for urn in removed:
        lines.append(f"- {old[urn]['type']}  {old[urn]['name']}")
    for urn, changes in changed:
        if urn in replaced:
            lines.append(f"+- {new[urn]['type']}  {new[urn]['name']}  (replace: {', '.join(replaced[urn])} "
                         f"forces a new resource)")
        else:
            lines.append(f"~ {new[urn]['type']}  {new[urn]['name']}")
        for path, before, after in changes:
            lines.extend(_change_lines(path, before, after))
    output_changes = list(field_changes({"inputs": (base or {}).get("outputs", {})}, {"inputs": head.get("outputs", {})}))
    if output_changes:
        lines.append("outputs:")
        lines.extend(f"    {path.removeprefix('inputs.')}: {_show(before)} -> {_show(after)}"
                     for path, before, after in output_changes)
    versions = list(provider_versions or []) + version_changes(old, new)
    if versions:
        lines.append("versions:")
        lines.extend(versions)
    violations = head.get("violations") or []
    if violations:
        lines.append(f"policy violations ({len(violations)}):")
        lines.extend(f"    {line}" for line in violations)
    return "\n".join(lines)


_PIN = re.compile(r"^\s*(pulumi[-_a-z]*)\s*==\s*([^\s;#]+)", re.IGNORECASE | re.MULTILINE)


def provider_pins(tree: Path) -> dict[str, str]:
    """The Pulumi SDK and provider pins in `tree`'s requirements.txt (what decides the provider plugins)."""
    path = tree / "requirements.txt"
    return {name.lower(): version for name, version in _PIN.findall(path.read_text())} if path.exists() else {}


def provider_version_changes(base: Path, head: Path) -> list[str]:
    old, new = provider_pins(base), provider_pins(head)
    return [f"    {name}: {old.get(name, '(absent)')} -> {new.get(name, '(absent)')}"
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def plan_tree(tree: Path, stack: str, out: Path) -> dict[str, Any] | None:
    """Plan `stack` with the code in `tree`; None if the stack doesn't exist there."""
    if not (tree / "stacks" / f"Pulumi.{stack}.yaml").exists():
        return None
    # Refs from before the tools/ package kept the planner at gtp/plan.py.
    module = "tools.plan" if (tree / "tools" / "plan.py").exists() else "gtp.plan"
    result = subprocess.run([sys.executable, "-m", module, "--stack", stack, "--out", str(out), "--quiet"],
                            cwd=tree, capture_output=True, text=True, check=False)
    path = out / stack / "resources.json"
    if not path.exists():  # validation failures still write the plan; config errors don't
        raise RuntimeError(f"planning {stack} in {tree} failed:\n{result.stderr.strip()}")
    plan = json.loads(path.read_text())
    if result.returncode:  # invalid objects or policy violations: the planner lists them as "  - ..." lines
        plan["violations"] = [line.strip()[2:] for line in result.stderr.splitlines()
                              if line.startswith("  - ")] or [result.stderr.strip().splitlines()[-1]]
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan_diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main or HEAD~1")
    args = parser.parse_args(argv)
    from tools.plan import known_stacks

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
            providers = provider_version_changes(worktree, ROOT)
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False,
                           capture_output=True)
    if head is None and base is None:
        print(f"error: no stack {args.stack!r} at {args.base} or in the working tree "
              f"(stacks: {', '.join(known_stacks(ROOT))})", file=sys.stderr)
        return 2
    if head is None:
        print(f"stack {args.stack}: removed in the working tree")
        return 0
    print(diff_plans(base, head, providers))
    return 1 if head.get("violations") else 0


if __name__ == "__main__":
    sys.exit(main())
