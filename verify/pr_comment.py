"""The offline plan diff of every stack as one PR comment (what `.github/workflows/pr.yml` posts).

``python -m tools.pr_comment --base origin/main --out plan-diff.md`` runs ``python -m tools.plan_diff --format
json`` once per stack (`verify.plan_diff.stacks_to_diff`: the stack files at BASE and in the working tree), writes
the comment and prints ``failed=<stacks>`` for `$GITHUB_OUTPUT`. In the comment:

- production stacks (``lifecycle.protect: true`` in their config) come first, then the others in listing order;
- each stack is a ``<details>`` whose ``<summary>`` is its count line (to add, change, replace, delete), open when
  it has destructive changes or its plan diff failed (its error is shown, and it counts as failed);
- the comment fits GitHub's limit (65536 characters): every stack keeps its summary, its error and its destructive
  changes; the other sections get what is left, production stacks first, and a stack cut says what was cut and
  the `make plan-diff` command that shows all of it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.plan_diff import Section, markdown_section, stacks_to_diff
from verify.plan_record import ROOT

LIMIT = 65_000
"""GitHub refuses a comment body over 65536 characters; the margin is for pr-comment.sh's marker line."""
ERROR_LINES = 40
"""A failed stack shows the last this many lines of its plan diff's stderr (the error is at the end)."""
ERROR_CHARS = 4_000


@dataclass(frozen=True)
class StackDiff:
    """One stack's plan diff as the comment shows it."""

    stack: str
    production: bool = False
    """`lifecycle.protect: true` in the stack's config: listed first, and cut last."""
    summary: str | None = None
    """The count line without the stack's name (``0 to add, 5 to change, 4 to replace, 0 to delete``); None when
    the plan diff printed nothing."""
    sections: tuple[tuple[str, Section], ...] = ()
    """`verify.plan_diff.SECTIONS` in order, each with its kind (``destructive``, ``resources``, ...)."""
    failure: str | None = None
    """Why the plan diff failed (exit status and the end of its stderr); None when it passed."""

    @classmethod
    def from_json(cls, stack: str, production: bool, text: str, failure: str | None = None) -> StackDiff:
        """From ``python -m tools.plan_diff --format json``'s output."""
        document = json.loads(text)
        sections = tuple((item["kind"], Section(item["title"], list(item["lines"]), item["style"]))
                         for item in document["sections"])
        return cls(stack, production, document["summary"].partition(": ")[2], sections, failure)

    @property
    def destructive(self) -> bool:
        return any(kind == "destructive" for kind, _ in self.sections)

    @property
    def failed(self) -> bool:
        return self.failure is not None


def is_production(stack: str, root: Path = ROOT) -> bool:
    """Whether the stack's config sets `lifecycle.protect: true` (the policy pack's "production"), read from its
    stack file as the program reads it; False for a stack the working tree no longer has."""
    from stack_config.source import YamlFileError
    from verify.plan import stack_config

    try:
        project, config, _ = stack_config(root, stack)
        lifecycle = json.loads(config.get(f"{project}:lifecycle", "{}"))
    except (FileNotFoundError, YamlFileError, ValueError):
        return False
    return isinstance(lifecycle, dict) and lifecycle.get("protect") is True


# --- rendering ---------------------------------------------------------------------------------------------


@dataclass
class _Part:
    """A piece of a stack's details that can be cut line by line: `head` and `tail` stay together (a title, a
    code fence), `body` keeps as many lines as fit."""

    title: str
    head: list[str]
    body: list[str]
    tail: list[str]
    kept: int = 0

    def lines(self, kept: int) -> list[str]:
        return ["", *self.head, *self.body[:kept], *self.tail] if kept else []

    def cut(self) -> str | None:
        if self.kept == len(self.body):
            return None
        title = self.title.split(" (")[0]  # `cluster`, not `cluster (build/plan/prod/cluster.yaml)`
        return f"{title} ({self.kept} of {len(self.body)} lines)" if self.kept else title


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _section_part(section: Section) -> _Part:
    rendered = markdown_section(section)
    title = section.title or "resources"
    if section.style == "list":
        return _Part(title, rendered[:2], rendered[2:], [])
    return _Part(title, rendered[:3], rendered[3:-1], rendered[-1:])


def _parts(diff: StackDiff) -> tuple[list[_Part], list[_Part]]:
    """The parts every stack keeps (its error, its destructive changes) and the rest."""
    kept: list[_Part] = []
    if diff.failure is not None:
        kept.append(_Part("the error", ["````"], diff.failure.splitlines() or ["(no output)"], ["````"]))
    kept += [_section_part(section) for kind, section in diff.sections if kind == "destructive"]
    rest = [_section_part(section) for kind, section in diff.sections if kind != "destructive"]
    return kept, rest


def _opening(diff: StackDiff) -> list[str]:
    name = f"<b>{diff.stack}</b>" + (" (production)" if diff.production else "")
    status = [diff.summary] if diff.summary else []
    status += [":warning: destructive changes"] if diff.destructive else []
    status += [":x: plan-diff failed"] if diff.failed else []
    state = " open" if diff.destructive or diff.failed else ""
    return [f"<details{state}><summary>{name}: {' '.join(status)}</summary>"]


def _note(diff: StackDiff, base: str, cuts: list[str]) -> list[str]:
    return ["", f"*Cut to fit GitHub's comment limit: {', '.join(cuts)}. The whole diff: "
                f"`make plan-diff STACK={diff.stack} BASE={base}`*"]


def _header(diffs: list[StackDiff], base: str) -> list[str]:
    destructive = [diff.stack for diff in diffs if diff.destructive]
    failed = [diff.stack for diff in diffs if diff.failed]

    def count(names: list[str], what: str) -> str:
        return f"{len(names)} {what}" + (f" ({', '.join(names)})" if names else "")

    stacks = f"{len(diffs)} stack" + ("" if len(diffs) == 1 else "s")
    return [f"### Offline plan diff against `{base}`", "",
            f"{stacks}: {count(destructive, 'with destructive changes')}, {count(failed, 'failed')}"]


def render(diffs: Sequence[StackDiff], base: str, limit: int = LIMIT) -> str:
    """The comment: production stacks first, each cut to fit `limit` characters (see the module docstring)."""
    ordered = sorted(diffs, key=lambda diff: not diff.production)  # stable: listing order within each group
    parts = {diff.stack: _parts(diff) for diff in ordered}
    fixed = _size(_header(ordered, base))
    for diff in ordered:
        everything = [*parts[diff.stack][0], *parts[diff.stack][1]]
        fixed += _size(["", *_opening(diff), "", "No change to the plan.", "", "</details>"])
        fixed += _size(_note(diff, base, [f"{part.title} (99999 of 99999 lines)" for part in everything]))
    budget = limit - fixed
    # Everything kept first (in every stack), then the rest, production stacks first; a part that doesn't fit
    # whole keeps as many lines as fit.
    for tier in (0, 1):
        for diff in ordered:
            for part in parts[diff.stack][tier]:
                whole = _size(part.lines(len(part.body)))
                if whole <= budget:
                    part.kept = len(part.body)
                else:
                    room = budget - _size(part.lines(1)) + _size(part.body[:1])
                    while part.kept < len(part.body) and _size(part.body[:part.kept + 1]) <= room:
                        part.kept += 1
                    # Cut before an unindented line (a resource, a bullet) so none loses its indented details.
                    whole_items = [index for index in range(1, part.kept + 1)
                                   if index == len(part.body) or not part.body[index].startswith(" ")]
                    if whole_items:
                        part.kept = whole_items[-1]
                    elif part.kept == 1:  # only the heading of an item too long to show whole: nothing
                        part.kept = 0
                budget -= _size(part.lines(part.kept))
    out = _header(ordered, base)
    for diff in ordered:
        everything = [*parts[diff.stack][0], *parts[diff.stack][1]]
        body = [line for part in everything for line in part.lines(part.kept)]
        if not body and not everything:
            body = ["", "No change to the plan."]
        cuts = [cut for part in everything if (cut := part.cut()) is not None]
        out += ["", *_opening(diff), *body, *(_note(diff, base, cuts) if cuts else []), "", "</details>"]
    return "\n".join(out) + "\n"


# --- running it --------------------------------------------------------------------------------------------


def _failure(code: int, stderr: str) -> str:
    """The exit status and the end of stderr, without the progress lines (`plan-diff: <stack> at ...`, and the
    planner's `plan: <stack>: ...` that a planning error carries)."""
    lines = [line for line in stderr.splitlines()
             if not line.startswith(("plan-diff: ", "plan: "))][-ERROR_LINES:]
    text = "\n".join(lines)[-ERROR_CHARS:]
    return f"python -m tools.plan_diff exited {code}" + (f":\n{text}" if text else "")


def collect(stacks: Sequence[str], base: str, run: Callable[..., Any] = subprocess.run,
            root: Path = ROOT) -> list[StackDiff]:
    """Each stack's plan diff, in its own process (one failing leaves the others whole)."""
    diffs = []
    for stack in stacks:
        started = time.perf_counter()
        done = run([sys.executable, "-m", "tools.plan_diff", "--stack", stack, "--base", base, "--format", "json"],
                   cwd=root, capture_output=True, text=True, check=False)
        failure = None if done.returncode == 0 else _failure(done.returncode, done.stderr)
        production = is_production(stack, root)
        try:
            diff = StackDiff.from_json(stack, production, done.stdout, failure)
        except (ValueError, KeyError, TypeError):  # nothing (or no JSON) on stdout: the plan diff itself failed
            diff = StackDiff(stack, production, failure=failure or _failure(done.returncode, done.stderr))
        diffs.append(diff)
        print(f"pr-comment: {stack}: {diff.summary or 'no diff'}{' (failed)' if diff.failed else ''} in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return diffs


def main(argv: list[str] | None = None, run: Callable[..., Any] = subprocess.run) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pr_comment", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main")
    parser.add_argument("--out", required=True, type=Path, help="where to write the comment (markdown)")
    parser.add_argument("--stacks", nargs="+", help="these stacks only (default: every stack file at BASE and in "
                                                     "the working tree)")
    parser.add_argument("--limit", type=int, default=LIMIT, help=f"characters at most (default {LIMIT})")
    args = parser.parse_args(argv)
    try:
        stacks = args.stacks or stacks_to_diff(args.base)
    except subprocess.CalledProcessError as error:
        print(f"error: can't read stacks/ at {args.base!r}: {error.stderr.strip()}", file=sys.stderr)
        return 2
    diffs = collect(stacks, args.base, run)
    args.out.write_text(render(diffs, args.base, args.limit))
    print(f"failed={' '.join(diff.stack for diff in diffs if diff.failed)}")
    return 0
