"""Unit tests of components.image_spec: Docker's .dockerignore rules, the context digest and the image tag."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# importable only once REPO_ROOT is on sys.path (above), when this file runs outside the repository's pytest setup
from catalog import versions  # noqa: E402
from components import image_spec  # noqa: E402

TRAINER_CONTEXT = REPO_ROOT / "images" / "trainer"


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A copy of the real trainer build context (its .dockerignore included) plus typical clutter."""
    root = tmp_path / "context"
    shutil.copytree(TRAINER_CONTEXT, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "test_x.py").write_text("def test_x(): pass\n")
    return root


@pytest.mark.parametrize(
    ("pattern", "path", "ignored"),
    [
        # Docker anchors at the root: a bare `*.pyc` is top-level only (gitignore would match anywhere).
        ("*.pyc", "a.pyc", True),
        ("*.pyc", "pkg/a.pyc", False),
        ("**/*.pyc", "pkg/sub/a.pyc", True),
        ("**/*.pyc", "a.pyc", True),
        # A pattern matching a directory drops everything below it.
        ("tests", "tests/unit/test_a.py", True),
        ("tests", "pkg/tests/test_a.py", False),
        ("**/__pycache__", "pkg/__pycache__/m.cpython-311.pyc", True),
        ("/build", "build/lib/x.py", True),
        ("build/", "build/lib/x.py", True),
        ("pkg/*.py", "pkg/sub/x.py", False),
        ("pkg/**", "pkg/sub/x.py", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[ab].txt", "b.txt", True),
        ("[^ab].txt", "b.txt", False),
        ("*.py[cod]", "x.pyo", True),
    ],
)
def test_dockerignore_pattern_follows_docker_semantics(pattern: str, path: str, ignored: bool) -> None:
    assert image_spec.is_ignored(path, image_spec.parse_dockerignore(pattern)) is ignored


def test_later_exception_re_includes_and_last_match_wins() -> None:
    rules = image_spec.parse_dockerignore("# comment\n\n*.md\n!README.md\n")
    assert image_spec.is_ignored("NOTES.md", rules)
    assert not image_spec.is_ignored("README.md", rules)
    rules = image_spec.parse_dockerignore("!README.md\n*.md\n")
    assert image_spec.is_ignored("README.md", rules)


def test_context_files_follow_the_trainer_dockerignore(context: Path) -> None:
    (context / "trainer" / "__pycache__").mkdir(exist_ok=True)
    (context / "trainer" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    files = image_spec.context_files(context)
    assert "Dockerfile" in files
    assert "pyproject.toml" in files
    assert "requirements.lock" in files
    assert "trainer/__init__.py" in files
    assert not [f for f in files if f.startswith("tests/") or "__pycache__" in f or f.endswith(".pyc")]
    assert "requirements.in" not in files


def test_dockerfile_counts_even_when_ignored(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / ".dockerignore").write_text("Dockerfile\n")
    before = image_spec.image_tag(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM scratch\nLABEL a=b\n")
    assert image_spec.context_files(tmp_path) == [".dockerignore", "Dockerfile"]
    assert image_spec.image_tag(tmp_path) != before


def test_unchanged_context_keeps_its_tag(context: Path) -> None:
    tag = image_spec.image_tag(context)
    assert tag == image_spec.image_tag(context)
    assert tag.startswith("ctx-") and len(tag) == len("ctx-") + 16
    int(tag.removeprefix("ctx-"), 16)


def test_changing_an_included_file_changes_the_tag(context: Path) -> None:
    before = image_spec.image_tag(context)
    init = context / "trainer" / "__init__.py"
    init.write_text(init.read_text() + "\n# change\n")
    assert image_spec.image_tag(context) != before


def test_adding_or_renaming_an_included_file_changes_the_tag(context: Path) -> None:
    before = image_spec.image_tag(context)
    (context / "trainer" / "extra.py").write_text("X = 1\n")
    added = image_spec.image_tag(context)
    assert added != before
    (context / "trainer" / "extra.py").rename(context / "trainer" / "other.py")
    assert image_spec.image_tag(context) not in (before, added)


def test_executable_bit_changes_the_tag(context: Path) -> None:
    before = image_spec.image_tag(context)
    (context / "trainer" / "__init__.py").chmod(0o755)
    assert image_spec.image_tag(context) != before


def test_any_mode_change_pulumi_docker_would_rebuild_for_changes_the_tag(context: Path) -> None:
    # A checkout under umask 002 (group-writable files): pulumi-docker hashes fileMode.String() and rebuilds.
    path = context / "trainer" / "__init__.py"
    path.chmod(0o644)
    before = image_spec.image_tag(context)
    path.chmod(0o664)
    assert image_spec.image_tag(context) != before
    path.chmod(0o644)
    assert image_spec.image_tag(context) == before


@pytest.mark.parametrize(
    "ignored_file",
    ["tests/x.py", "trainer/__pycache__/x.cpython-311.pyc", "trainer/x.pyc", ".pytest_cache/v/x",
     "requirements.in", "build/lib/x.py", ".git/HEAD"],
)
def test_ignored_files_do_not_change_the_tag(context: Path, ignored_file: str) -> None:
    before = image_spec.image_tag(context)
    target = context / ignored_file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(target.read_text() + "changed\n" if target.exists() else "new\n")
    assert image_spec.image_tag(context) == before


def _leaves(node: object, path: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    return [path]


def _changed(node: dict, path: tuple) -> dict:
    copy = {key: (_changed(value, path[1:]) if key == path[0] and len(path) > 1 else value)
            for key, value in node.items()}
    if len(path) == 1:
        value = copy[path[0]]
        copy[path[0]] = (not value) if isinstance(value, bool) else f"{value}-changed"
    return copy


def test_every_image_input_feeds_the_tag(context: Path) -> None:
    # pulumi-docker rebuilds and pushes to the same name on any input change: each input must change the tag.
    inputs = image_spec.image_inputs(context, "linux/amd64", image_spec.build_args(
        vcs_revision="abc123", source_url="https://example.invalid/repo", net_variant="efa"))
    tag = image_spec.image_tag(context, inputs)
    leaves = _leaves(inputs)
    assert ("build", "args", "VCS_REVISION") in leaves and ("build", "args", "SOURCE_URL") in leaves
    assert ("build", "platform") in leaves and ("skip_push",) in leaves
    for leaf in leaves:
        assert image_spec.image_tag(context, _changed(inputs, leaf)) != tag, leaf
    assert image_spec.image_tag(context, inputs) == tag  # deterministic


def test_recorded_camel_case_inputs_give_the_same_tag(context: Path) -> None:
    inputs = image_spec.image_inputs(context, "linux/arm64", image_spec.build_args())
    recorded = {"build": {("builderVersion" if key == "builder_version" else key): value
                          for key, value in inputs["build"].items()},
                "buildOnPreview": False, "skipPush": False}
    assert image_spec.image_tag(context, recorded) == image_spec.image_tag(context, inputs)


def test_a_context_pulumi_docker_would_hash_differently_is_refused(context: Path) -> None:
    (context / "link.txt").symlink_to(context / "pyproject.toml")
    with pytest.raises(ValueError, match=r"symlinks in the build context are not supported .*: link\.txt"):
        image_spec.image_tag(context)
    (context / "link.txt").unlink()
    (context / "Dockerfile.dockerignore").write_text("*\n")
    with pytest.raises(ValueError, match=r"Dockerfile\.dockerignore is not supported"):
        image_spec.image_tag(context)


def test_build_args_come_from_versions() -> None:
    args = image_spec.build_args(vcs_revision="abc123", source_url="https://example.invalid/repo")
    assert args == {
        "BASE_IMAGE": versions.PYTORCH_BASE_IMAGE,
        "TRAINER_VERSION": versions.TRAINER_VERSION,
        "VCS_REVISION": "abc123",
        "SOURCE_URL": "https://example.invalid/repo",
        "NET_VARIANT": "default",
    }
    assert all(isinstance(value, str) for value in args.values())


# ---- OCI source/revision labels from git -------------------------------------------------------------------
@pytest.mark.parametrize(("remote", "url"), [
    ("git@github.com:example-org/gtp.git", "https://github.com/example-org/gtp"),
    ("https://user:secret-token@github.com/example-org/gtp.git", "https://github.com/example-org/gtp"),
    ("https://github.com/example-org/gtp", "https://github.com/example-org/gtp"),
])
def test_source_url_from_a_git_remote_never_carries_credentials(remote, url):
    assert image_spec.public_source_url(remote) == url


def _git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"})


def test_vcs_labels_come_from_git_and_env_overrides(tmp_path):
    assert image_spec.vcs_labels(tmp_path, {}) == ("unknown", "unknown")  # not a repository
    _git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("1")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-qm", "c")
    _git(tmp_path, "remote", "add", "origin", "git@github.com:example-org/gtp.git")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert image_spec.vcs_labels(tmp_path, {}) == (head, "https://github.com/example-org/gtp")
    (tmp_path / "f").write_text("2")
    assert image_spec.vcs_labels(tmp_path, {})[0] == head + "-dirty"
    assert image_spec.vcs_labels(tmp_path, {"GTP_VCS_REVISION": "abc", "GTP_SOURCE_URL": "https://x.invalid/r"}) == (
        "abc", "https://x.invalid/r")


def test_the_revision_label_is_the_newest_commit_that_changed_the_context(tmp_path):
    # Both labels feed the tag: a commit outside the context must keep the revision (and so the tag and the image).
    _git(tmp_path, "init", "-q")
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "f").write_text("1")
    _git(tmp_path, "add", "ctx")
    _git(tmp_path, "commit", "-qm", "image")
    image_commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                                  text=True, check=True).stdout.strip()
    (tmp_path / "other").write_text("x")
    _git(tmp_path, "add", "other")
    _git(tmp_path, "commit", "-qm", "elsewhere")
    assert image_spec.vcs_labels(tmp_path, {}, path="ctx")[0] == image_commit
    (tmp_path / "other").write_text("y")  # uncommitted, outside the context
    assert image_spec.vcs_labels(tmp_path, {}, path="ctx")[0] == image_commit
    (tmp_path / "ctx" / "f").write_text("2")
    assert image_spec.vcs_labels(tmp_path, {}, path="ctx")[0] == image_commit + "-dirty"
