"""The docs stay true: the config reference is generated from the config models, the plan-diff and destroy
sections say what the tools do, the README stays short, and every link and docs/ path points somewhere real."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, clone_working_tree
from tools.config_reference import render

DOCS = ROOT / "docs"
CONFIG_REFERENCE = DOCS / "config-reference.md"
PLAN_AND_REVIEW = DOCS / "plan-and-review.md"
"""Where "Reviewing a change" and its plan-diff examples live."""
DEPLOY = DOCS / "deploy.md"


def test_docs_contain_the_current_config_reference() -> None:
    assert render() in CONFIG_REFERENCE.read_text(), "run `python -m tools.config_reference --update`"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found (the docs example's edit no longer applies)"
    path.write_text(text.replace(old, new))


def _bump_device_plugin_chart(clone: Path) -> None:
    """The NVIDIA device plugin chart bumped as a bump PR does it: the pin (catalog/versions.py), the vendored
    directory and the compatibility rows re-verified at the new version. The vendored 0.20.0 chart copied as 0.21.0
    stands for the new release, and its ClusterRole lets the plugin list pods, standing for an upstream RBAC change."""
    _edit(clone / "catalog" / "versions.py", '"nvidia-device-plugin", "0.20.0")', '"nvidia-device-plugin", "0.21.0")')
    _edit(clone / "catalog" / "compatibility.py", '{"NVIDIA_DEVICE_PLUGIN": "0.20.0"}',
          '{"NVIDIA_DEVICE_PLUGIN": "0.21.0"}')
    charts = clone / "vendor" / "charts"
    (charts / "nvidia-device-plugin-0.20.0").rename(charts / "nvidia-device-plugin-0.21.0")
    _edit(charts / "nvidia-device-plugin-0.21.0" / "Chart.yaml", 'version: "0.20.0"\nappVersion: "0.20.0"',
          'version: "0.21.0"\nappVersion: "0.21.0"')
    _edit(charts / "nvidia-device-plugin-0.21.0" / "templates" / "role.yml",
          'resources: ["pods"]\n    verbs: ["get"]', 'resources: ["pods"]\n    verbs: ["get", "list"]')


def _replace_reserved_group(clone: Path) -> None:
    """prod's reserved H100 group (a capacity reservation, deleteBeforeReplace) moved to p5en.48xlarge."""
    _edit(clone / "stacks" / "Pulumi.prod.yaml", "instanceTypes: [p5.48xlarge]", "instanceTypes: [p5en.48xlarge]")


PLAN_DIFF_EXAMPLES = {"chart-bump": _bump_device_plugin_chart, "reserved-group-replacement": _replace_reserved_group}
"""The plan-diff examples docs/plan-and-review.md's "Reviewing a change" shows: name → the edit of a clone that
produces it."""


def _docs_example(text: str, name: str) -> re.Match[str]:
    start = text.index("## Reviewing a change")
    end = text.find("\n## ", start)
    found = re.compile(rf"<!-- plan-diff example: {name} -->\n```\n(.*?)\n```\n", re.S).search(
        text, start, end if end >= 0 else len(text))
    assert found, f"{PLAN_AND_REVIEW.name}'s 'Reviewing a change' has no block after <!-- plan-diff example: {name} -->"
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLAN_DIFF_EXAMPLES))
def test_docs_plan_diff_examples_are_what_plan_diff_prints(tmp_path: Path, name: str) -> None:
    """The plan-diff examples are the tool's output: `python -m tools.plan_diff --stack prod --base HEAD` in
    a clone of the working tree after the example's edit. UPDATE_GOLDEN=1 writes them into docs/plan-and-review.md."""
    clone = tmp_path / "clone"
    clone_working_tree(clone)
    PLAN_DIFF_EXAMPLES[name](clone)
    result = subprocess.run([sys.executable, "-m", "tools.plan_diff", "--stack", "prod", "--base", "HEAD"],
                            cwd=clone, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("plan-diff: prod at ")]) == 2
    output = result.stdout.rstrip("\n")
    path = PLAN_AND_REVIEW
    text = path.read_text()
    found = _docs_example(text, name)
    if os.environ.get("UPDATE_GOLDEN") and found.group(1) != output:
        path.write_text(text[:found.start(1)] + output + text[found.end(1):])
        found = _docs_example(path.read_text(), name)
    assert found.group(1) == output, f"{path.name}'s {name} example is stale; run with UPDATE_GOLDEN=1:\n{output}"


def test_docs_examples_show_what_reviewers_must_see() -> None:
    """The committed examples show the delete-before-replace with its workloads and the chart's images and RBAC."""
    text = PLAN_AND_REVIEW.read_text()
    replacement = _docs_example(text, "reserved-group-replacement").group(1)
    assert replacement.splitlines()[1] == "destructive changes:"
    assert "h100-nodes  replace, DELETE BEFORE REPLACE" in replacement
    assert "runs there now: PyTorchJob training-prod/gpt-pretrain" in replacement
    bump = _docs_example(text, "chart-bump").group(1)
    assert "release nvidia-device-plugin/nvidia-device-plugin (" in bump
    assert "~ image  DaemonSet nvidia-device-plugin/nvidia-device-plugin  " in bump and "+ rbac  ClusterRole" in bump
    assert "destructive" not in bump


def test_docs_destroy_section_matches_the_cli() -> None:
    text = DEPLOY.read_text()
    for flag in ("--yes", "--timeout-minutes"):
        assert flag in text and flag in (ROOT / "tools" / "destroy.py").read_text()
    assert "named `bench-*`" in text and "--show-secrets" in text


# --- the README stays short, and the docs point somewhere real --------------------------------------------------

README_MAX_LINES = 200
"""The project's rule: a short README (what it is, the two commands, where to go); the rest lives in docs/."""
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
DOCS_PATH = re.compile(r"(?<![\w./-])docs/([\w.-]+)\.md(?!:\d)")
"""A path into our docs/: one level deep (upstream citations such as `docs/operator-guides/installation.md` are
deeper), not an upstream file cited by line (`docs/parameters.md:10-16`)."""
CODE_FILES = ("*.py", "*.yaml", "*.yml", "Makefile")
CODE_ROOTS = ("Makefile", "Pulumi.yaml", "__main__.py", ".github", ".ci", "benchmarks", "catalog", "cluster_targets",
              "components", "conventions", "images", "policy", "stack_config", "stacks", "stages", "tools",
              "verify", "workload_kinds")
"""Where the repository's code, stacks, Makefile and workflows live (tests/ builds fake trees with docs/ paths of
their own; vendor/ is upstream's)."""


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """Markdown without fenced blocks and inline code: what can hold a link or a heading."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation other than '-' and '_' dropped, spaces → '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return "".join(char for char in text if char.isalnum() or char in "-_ ").replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Every heading's anchor in `path`, with GitHub's `-1`, `-2` suffixes for repeated ones."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        anchor = base = github_anchor(heading)
        count = 0
        while anchor in found:
            count += 1
            anchor = f"{base}-{count}"
        found.add(anchor)
    return found


def test_github_anchor_follows_githubs_rule() -> None:
    assert github_anchor("Edge on k3s / Jetson") == "edge-on-k3s--jetson"
    assert (github_anchor("The real path: `pulumi up` and `pulumi destroy`")
            == "the-real-path-pulumi-up-and-pulumi-destroy")
    assert github_anchor("Teams' own jobs") == "teams-own-jobs"
    assert github_anchor("`workloads.<name>.elastic`") == "workloadsnameelastic"
    assert github_anchor("Queue consumer (`trainer.queue`)") == "queue-consumer-trainerqueue"


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into a topic file under docs/ "
        "and link it from README's 'Where to go'")


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    broken = []
    for path in _markdown_files():
        for target in LINK.findall(_prose(path.read_text())):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            where = f"{path.relative_to(ROOT)}: ]({target})"
            if not linked.exists():
                broken.append(f"{where}: no {file}")
            elif anchor and (linked.is_dir() or linked.suffix != ".md" or anchor not in _anchors(linked)):
                broken.append(f"{where}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_the_link_check_catches_a_broken_file_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Edge on k3s / Jetson\n\n```\n# not a heading\n```\n")
    assert _anchors(page) == {"title", "edge-on-k3s--jetson"}
    assert LINK.findall(_prose("see [a](x.md#y), `[b](not-a-link.md)` and\n```\n[c](z.md)\n```\n")) == ["x.md#y"]


def _code_files() -> list[Path]:
    found = []
    for name in CODE_ROOTS:
        path = ROOT / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [file for pattern in CODE_FILES for file in path.rglob(pattern)
                      if ".venv" not in file.parts and "__pycache__" not in file.parts]
    found += sorted((ROOT / ".ci").glob("*"))
    return sorted(set(found))


def test_every_docs_path_the_code_names_exists() -> None:
    files = _code_files()
    assert ROOT / "tools" / "config_reference.py" in files and ROOT / "Makefile" in files
    assert any(file.parent.name == "workflows" for file in files)
    assert any(file.parent.name == "stacks" for file in files)
    missing = sorted({f"{file.relative_to(ROOT)}: docs/{name}.md"
                      for file in files if file.is_file()
                      for name in DOCS_PATH.findall(file.read_text(errors="replace"))
                      if not (DOCS / f"{name}.md").is_file()})
    assert not missing, "\n".join(missing)
    assert DOCS_PATH.findall("docs/edge.md, `docs/parameters.md:10-16`, kubeflow docs/operator-guides/x.md") == ["edge"]


def test_readme_lists_the_current_simulation_checks() -> None:
    """README's list of checks is generated from the check modules' docstrings (tools/check_list.py)."""
    from tools import check_list

    assert check_list.render() in (ROOT / "README.md").read_text(), "run `python -m tools.check_list --update`"
    assert check_list.render().count("\n") == len(check_list.CHECKS)


def test_a_check_module_without_a_docstring_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import verify.simulate.queries as queries
    from tools import check_list

    monkeypatch.setattr(queries, "__doc__", None)
    with pytest.raises(ValueError, match=r"verify/simulate/queries.py has no docstring"):
        check_list.render()
