"""The stack file itself, read strictly: duplicate keys (which YAML loaders silently resolve to the last one, so a
second `train:` would replace a node group) and the line of every key path (to list problems in file order).

The Pulumi CLI reads the same file, with the same last-one-wins rule, so the config stage checks the file before
anything is registered.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stack_config.problems import Problem

NAMESPACE = "gtp"


@dataclass(frozen=True)
class StackSource:
    """What the stack file says beyond its values: duplicate-key problems and the line (1-based) of each key path."""

    problems: tuple[Problem, ...] = ()
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def duplicated(self) -> list[str]:
        """Key paths written twice: their value is the last one, which may not be the one meant."""
        return [problem.path for problem in self.problems if problem.message.startswith("duplicate key ")]

    def line_of(self, path: str) -> int:
        """The line of `path` or of its nearest ancestor in the file; after every line when it isn't there."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return 10**9


class YamlFileError(ValueError):
    """A file that is not valid YAML; the message is `file:line:col: what`, the offending line and a caret."""


def yaml_error_text(name: str, text: str, error: yaml.YAMLError) -> str:
    """`name:line:col: not valid YAML: <problem>` (1-based, as editors count), then the offending line with a caret
    under the column, so a user can fix the file without reading PyYAML's traceback."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        problem += f" ({context} at line {context_mark.line + 1})"
    if any(word in problem for word in ("block", "mapping values are not allowed", "indentation")):
        problem += "; is the indentation right?"
    if mark is None:
        return f"{name}: not valid YAML: {problem}"
    lines = text.splitlines()
    shown = lines[mark.line] if mark.line < len(lines) else ""
    return (f"{name}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {problem}\n"
            f"    {shown}\n    {' ' * mark.column}^")


def load_yaml_file(path: Path) -> Any:
    """The YAML document of `path`, or `YamlFileError` naming the file, line and column (FileNotFoundError when the
    file is missing)."""
    text = path.read_text()
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise YamlFileError(yaml_error_text(_shown(path), text, error)) from None


def _shown(path: Path) -> str:
    """The path as the user would type it: relative to the current directory when under it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_stack_source(path: Path) -> StackSource:
    """Duplicate keys and key lines of the `gtp:` namespace of a stack file (an absent file says nothing)."""
    try:
        text = path.read_text()
    except OSError:
        return StackSource()
    return stack_source(text, str(path))


def stack_source(text: str, name: str = "<stack file>") -> StackSource:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        return StackSource((Problem("config", yaml_error_text(name, text, error)),))
    problems: list[Problem] = []
    lines: dict[str, int] = {}
    if not isinstance(root, yaml.MappingNode):
        return StackSource()
    for key, value in _pairs(root, "", problems, top=True):
        if key == "config" and isinstance(value, yaml.MappingNode):
            for full, node in _pairs(value, "config", problems, namespace=True):
                if full.startswith(NAMESPACE + ":"):
                    _walk(node, full[len(NAMESPACE) + 1:], lines, problems)
    return StackSource(tuple(problems), lines)


def _pairs(node: yaml.MappingNode, path: str, problems: list[Problem], *, top: bool = False,
           namespace: bool = False) -> Iterator[tuple[str, yaml.Node]]:
    seen: dict[str, int] = {}
    for key_node, value in node.value:
        key = str(key_node.value)
        line = key_node.start_mark.line + 1
        shown = key[len(NAMESPACE) + 1:] if namespace and key.startswith(NAMESPACE + ":") else key
        child = shown if top or namespace else f"{path}.{shown}"
        if key in seen:
            problems.append(Problem(child, f"duplicate key {key!r} (lines {seen[key]} and {line}): YAML keeps only the "
                                           "last one, so the first would be silently lost; merge them into one"))
            continue
        seen[key] = line
        yield key, value


def _walk(node: yaml.Node, path: str, lines: dict[str, int], problems: list[Problem]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, _value in node.value:
            lines.setdefault(f"{path}.{key_node.value}", key_node.start_mark.line + 1)
        for key, value in _pairs(node, path, problems):
            _walk(value, f"{path}.{key}", lines, problems)
            lines[f"{path}.{key}"] = min(lines[f"{path}.{key}"], value.start_mark.line + 1)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, f"{path}[{index}]", lines, problems)
