"""A corpus of invalid stack files (tests/config_corpus/): realistic mistakes, several with independent problems.

Each file starts with `# stack: <name>` (the stack it is a broken copy of) and one `# expect: <key path>` line per
problem it holds (and no other); `# says: <text>` lines are message lines (`key.path: message` start) that must
appear verbatim. Planning it must exit 2, name every expected key path, print no traceback and register nothing.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from tests.conftest import ROOT
from verify import plan as gtp_plan

CORPUS = ROOT / "tests" / "config_corpus"
FILES = sorted(CORPUS.glob("*.yaml"))


def says(path: Path) -> list[str]:
    return [line.split(": ", 1)[1] for line in path.read_text().splitlines() if line.startswith("# says: ")]


def header(path: Path) -> tuple[str, list[str]]:
    stack, expected = "", []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# stack: "):
            stack = line.split(": ", 1)[1]
        elif line.startswith("# expect: "):
            expected.append(line.split(": ", 1)[1])
    return stack, expected


def test_the_corpus_is_large_and_every_file_says_what_it_expects() -> None:
    assert len(FILES) >= 60
    for path in FILES:
        stack, expected = header(path)
        assert stack and expected, path.name
    assert sum(len(header(path)[1]) >= 2 for path in FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
@pytest.mark.program
def test_an_invalid_stack_file_exits_2_with_every_key_path_and_registers_nothing(path: Path, tmp_path: Path) -> None:
    from stack_config import ConfigError

    stack, expected = header(path)
    partial = gtp_plan.Plan(project="gtp", stack=stack)
    with pytest.raises(ConfigError) as caught:
        gtp_plan.run(stack, stack_file=path, into=partial)
    assert partial.resources == []
    paths = [problem.path for problem in caught.value.problems]
    # every expected key path, and no other: a problem the file doesn't hold would be a spurious one
    assert sorted(set(paths)) == sorted(set(expected)), paths
    # The CLI's answer: exit 2, one `key.path: message` line per problem, no traceback, nothing written.
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = gtp_plan.plan_one(stack, stack_file=path, out=tmp_path / "out", quiet=True)
    assert code == 2
    assert "Traceback" not in stderr.getvalue()
    for key in expected:
        assert f"  - {key}: " in stderr.getvalue()
    for text in says(path):
        assert f"  - {text}" in stderr.getvalue()
    assert not (tmp_path / "out").exists()
