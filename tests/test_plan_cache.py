"""The plan cache (verify/plan_cache.py): a hit is byte-identical to a fresh plan, and any input change misses.

Three kinds of evidence: the key moves with each kind of input (a synthetic tree, every kind changed in turn) and
stays put for what a plan never reads; a real plan, watched by an audit hook, opens no repository file and runs no
program that the key leaves out; and every committed stack, planned fresh and then restored, gives the same files
and the same lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from verify import plan_cache
from verify.plan import known_stacks

pytestmark = pytest.mark.program


ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"python": "3.11.9", "distributions": "d1", "helm": "/usr/bin/helm 100 1", "dot": "/usr/bin/dot 10 1"}


def _tree(root: Path) -> Path:
    files = {
        "Pulumi.yaml": "name: gtp\n",
        "__main__.py": "import stages\n",
        "stages/gpu.py": "PLUGIN = 'v0.17.4'\n",
        "stacks/Pulumi.dev.yaml": "config:\n  gtp:cluster: {mode: eks}\n",
        "vendor/charts/plugin/values.yaml": "image: {tag: v0.17.4}\n",
        "vendor/charts/plugin/templates/tests/test.yaml": "kind: Pod\n",
        "vendor/charts/plugin/README.md": "# plugin\n",
        "dashboards/gpu.json": "{}\n",
        "tests/test_gpu.py": "def test(): pass\n",
        "docs/gpu.md": "# GPUs\n",
        "build/plan/dev/resources.json": "{}\n",
        "stages/__pycache__/gpu.cpython-311.pyc": "bytecode",
        ".git/HEAD": "ref: refs/heads/main\n",
        "README.md": "# gtp\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _digest(root: Path, stack_file: Path | None = None, tools: dict[str, str] | None = None) -> str:
    return plan_cache.plan_key("dev", stack_file, root=root, tools=tools or TOOLS)


# Each input kind a plan reads: changing it must change the key.
READ = {
    "the stack file": ("stacks/Pulumi.dev.yaml", "config:\n  gtp:cluster: {mode: existing}\n"),
    "the program's code": ("stages/gpu.py", "PLUGIN = 'v0.17.5'\n"),
    "the entry point": ("__main__.py", "import stages  # changed\n"),
    "a vendored file": ("vendor/charts/plugin/values.yaml", "image: {tag: v0.17.5}\n"),
    "a chart's test template": ("vendor/charts/plugin/templates/tests/test.yaml", "kind: Job\n"),
    "a chart's README (helm's .Files)": ("vendor/charts/plugin/README.md", "# plugin, edited\n"),
    "a data file": ("dashboards/gpu.json", "{\"panels\": []}\n"),
    "the project file": ("Pulumi.yaml", "name: gtp2\n"),
    "a new module": ("components/new.py", "X = 1\n"),
}
# What no plan reads: changing it must not.
NOT_READ = {
    "a test": ("tests/test_gpu.py", "def test(): assert True\n"),
    "a doc": ("docs/gpu.md", "# GPUs, edited\n"),
    "an earlier plan's output": ("build/plan/dev/resources.json", "{\"stale\": true}\n"),
    "bytecode": ("stages/__pycache__/gpu.cpython-311.pyc", "other bytecode"),
    "git's own files": (".git/HEAD", "ref: refs/heads/other\n"),
    "the README": ("README.md", "# gtp, edited\n"),
}


@pytest.mark.parametrize("what", READ)
def test_a_change_to_any_input_misses(tmp_path: Path, what: str) -> None:
    root = _tree(tmp_path)
    before = _digest(root)
    name, text = READ[what]
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)
    assert _digest(root) != before, f"changing {what} ({name}) kept the key: a stale plan would be restored"


@pytest.mark.parametrize("what", NOT_READ)
def test_what_a_plan_never_reads_keeps_the_key(tmp_path: Path, what: str) -> None:
    root = _tree(tmp_path)
    before = _digest(root)
    name, text = NOT_READ[what]
    (root / name).write_text(text)
    assert _digest(root) == before, f"changing {what} ({name}) moved the key: needless misses"


def test_a_removed_input_misses(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = _digest(root)
    (root / "dashboards" / "gpu.json").unlink()
    assert _digest(root) != before


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_different_tool_misses(tmp_path: Path, tool: str) -> None:
    root = _tree(tmp_path)
    assert _digest(root, tools={**TOOLS, tool: TOOLS[tool] + "-other"}) != _digest(root)


def test_a_stack_file_outside_the_tree_is_keyed_by_its_content(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo")
    outside = tmp_path / "variant" / "Pulumi.dev.yaml"
    outside.parent.mkdir()
    outside.write_text("config:\n  gtp:cluster: {mode: eks}\n")
    # The same text as the committed stack file: the same plan (the program reads the file, not its path).
    assert _digest(root, outside) == _digest(root)
    outside.write_text("config:\n  gtp:cluster: {mode: swarm}\n")
    assert _digest(root, outside) != _digest(root)


def test_the_real_tool_identity_follows_the_environment_helm_and_dot(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    base = plan_cache.tool_identity()
    assert base["python"] == sys.version and len(base["distributions"]) == 64
    monkeypatch.setenv("GTP_REPOSITORY_URL", "https://example.invalid/repo")
    assert plan_cache.tool_identity() != base, "an environment variable the program reads is not in the key"
    monkeypatch.delenv("GTP_REPOSITORY_URL")
    fake_helm = tmp_path / "helm"
    fake_helm.write_text("#!/bin/sh\n")
    monkeypatch.setattr("verify.helm.helm_binary", lambda: str(fake_helm))
    assert plan_cache.tool_identity()["helm"] != base["helm"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot`: the plan writes no SVG, so it is another plan
    assert plan_cache.tool_identity()["dot"] == "absent"


def test_the_cache_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GTP_PLAN_CACHE", "off")
    assert plan_cache.cache_dir() is None
    monkeypatch.setenv("GTP_PLAN_CACHE", str(tmp_path))
    assert plan_cache.cache_dir() == tmp_path
    monkeypatch.delenv("GTP_PLAN_CACHE")
    assert plan_cache.cache_dir() == ROOT / "build" / "plan-cache"


def test_pruning_keeps_the_newest_entries(tmp_path: Path) -> None:
    for index in range(5):
        entry = tmp_path / f"{index:064x}"
        entry.mkdir()
        os.utime(entry, (1000 + index, 1000 + index))
    (tmp_path / "old.yaml").write_text("a render")
    os.utime(tmp_path / "old.yaml", (10, 10))
    (tmp_path / ".staging-x").mkdir()
    plan_cache.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".staging-x", f"{3:064x}", f"{4:064x}"]


AUDIT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    opened, written, ran = set(), set(), []
    def hook(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            mode = args[1] if isinstance(args[1], str) else ""
            writes = any(letter in mode for letter in "wax+") or bool((args[2] or 0) & (os.O_WRONLY | os.O_RDWR))
            if writes:
                written.add(path)
            elif path not in written:
                opened.add(path)
        elif event == "subprocess.Popen":
            ran.append([os.fsdecode(a) for a in args[1]])
    sys.addaudithook(hook)
    from verify.plan import plan_one
    code = plan_one(sys.argv[1], out=Path(sys.argv[2]), quiet=True)
    print(json.dumps({"code": code, "opened": sorted(opened), "ran": ran}))
""")


@pytest.mark.slow
@pytest.mark.parametrize(("stack", "must_run"), [("dev", "helm"), ("edge-swarm", "dot")])
def test_the_key_covers_every_file_a_real_plan_reads(tmp_path: Path, stack: str, must_run: str) -> None:
    """A real plan under an audit hook: each repository file it opens is one of the key's inputs, and each program
    it runs is one the key identifies (helm, dot). A new reader of a file outside the key fails here."""
    out = tmp_path / "plan"
    result = subprocess.run([sys.executable, "-c", AUDIT, stack, str(out)], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "GTP_PLAN_CACHE": "off"}, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["code"] == 0, result.stderr[-3000:]
    keyed = {os.path.realpath(path) for path in plan_cache.input_files(ROOT)}
    root = os.path.realpath(ROOT)
    derived = tuple(os.path.join(root, prefix) for prefix in plan_cache.DERIVED_CACHES)
    # The Python installation: its version and the installed distributions are in the key, wherever it lives (a
    # `make setup` venv is `.venv` inside the repository).
    prefixes = tuple(os.path.realpath(prefix) + os.sep for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    # Files read before this run wrote them (a file it wrote first is its own output, not an input).
    read = {path for path in record["opened"] if path.startswith(root + os.sep) and os.path.isfile(path)
            and "__pycache__" not in path and not path.startswith(derived) and not path.startswith(prefixes)}
    assert read, "the audit hook saw no file of the repository opened: it watched nothing"
    assert read - keyed == set(), "a plan read files the cache key leaves out (verify/plan_cache.py input_files)"
    # Outside the repository: only the interpreter's own files (its version and the installed distributions are
    # in the key) and the plan's scratch under the temporary directory (helm's values files).
    outside = {path for path in record["opened"] if not path.startswith(root + os.sep) and os.path.isfile(path)}
    scratch = os.path.realpath(tempfile.gettempdir()) + os.sep
    assert {path for path in outside if not path.startswith((*prefixes, scratch))} == set(), \
        "a plan read a file outside the repository and the Python installation: the key can't see it"
    programs = {Path(command[0]).name for command in record["ran"]}
    assert programs <= {"helm", "dot"}, f"a plan ran {programs - {'helm', 'dot'}}: add it to plan_cache's identity"
    assert must_run in programs, f"the plan never ran {must_run}: the audit saw too little to mean anything"


def _run_plan(out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "tools.plan", "--all", "--quiet", "--out", str(out)], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "GTP_PLAN_CACHE": str(cache)},
                            check=False)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    return result


def _plan_lines(stderr: str, out: Path) -> list[str]:
    """The plan's own lines: without the cache's hit lines and the run's total time, with the output folder named
    neutrally."""
    total = f"plan: {len(known_stacks(ROOT))} stacks in"
    return [line.replace(str(out), "<out>") for line in stderr.splitlines()
            if "inputs unchanged (key" not in line and not line.startswith(total)]


@pytest.mark.slow
def test_a_hit_is_byte_identical_to_a_fresh_plan_on_every_committed_stack(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fresh = _run_plan(tmp_path / "fresh", cache)
    assert "inputs unchanged" not in fresh.stderr, "the first plan of an empty cache was a hit"
    restored = _run_plan(tmp_path / "restored", cache)
    stacks = known_stacks(ROOT)
    hits = [line for line in restored.stderr.splitlines() if "inputs unchanged (key" in line]
    assert len(hits) == len(stacks), restored.stderr[-3000:]
    assert restored.returncode == fresh.returncode
    for stack in stacks:
        planned, cached = tmp_path / "fresh" / stack, tmp_path / "restored" / stack
        names = sorted(path.name for path in planned.iterdir())
        assert names and names == sorted(path.name for path in cached.iterdir()), stack
        for name in names:
            assert (planned / name).read_bytes() == (cached / name).read_bytes(), f"{stack}/{name} differs"
    assert _plan_lines(restored.stderr, tmp_path / "restored") == _plan_lines(fresh.stderr, tmp_path / "fresh")


@pytest.mark.slow
def test_a_helm_render_is_reused_and_any_input_of_it_renders_again(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The one stage cached on its own: a release rendered before is not rendered again; a release whose values,
    name or Kubernetes version differ is (helm runs)."""
    from tests.conftest import plan_stack
    from verify import render as cluster

    monkeypatch.setenv("GTP_PLAN_CACHE", str(tmp_path))
    plan = plan_stack("dev")
    release = dict(plan.by_type(cluster.HELM_RELEASE)[0].inputs)
    version = plan.config.kubernetes_version
    rendered = cluster.render_releases([release], version)
    assert rendered and len(list((tmp_path / plan_cache.HELM).glob("*.yaml"))) == 1

    def no_helm(command, *args, **kwargs):
        raise AssertionError(f"helm ran: {command[:3]}")

    monkeypatch.setattr(cluster.subprocess, "Popen", no_helm)
    assert cluster.render_releases([release], version) == rendered, "a restored render differs from helm's"
    for changed, other_version in (({**release, "values": {**(release.get("values") or {}), "x": 1}}, version),
                                   ({**release, "name": release["name"] + "-b"}, version),
                                   (release, "1.33")):
        with pytest.raises(AssertionError, match="helm ran"):
            cluster.render_releases([changed], other_version)


def test_a_hit_restores_the_plan_files_and_output_and_leaves_other_records(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture) -> None:
    """cached_plan around a stand-in planner: the miss plans and stores, the hit plans nothing and gives the same
    files, lines and exit code; a stale plan file is removed, a record that is not the plan's (cluster-run.json)
    is left alone."""
    monkeypatch.setenv("GTP_PLAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_cache, "plan_key", lambda stack, stack_file, tools: "k" * 64)
    out = tmp_path / "plan"
    (out / "dev").mkdir(parents=True)
    (out / "dev" / "overview.svg").write_text("a picture of an older plan")
    (out / "dev" / "cluster-run.json").write_text("{}")
    calls = []

    def planner(stack: str, *, stack_file: Path | None, out: Path, quiet: bool) -> int:
        calls.append(stack)
        (out / stack / "resources.json").write_text('{"resources": []}\n')
        print("a tree")
        print(f"plan: {stack}: wrote {out / stack}", file=sys.stderr)
        return 1

    assert plan_cache.cached_plan("dev", planner, stack_file=None, out=out, quiet=False) == 1
    fresh = capsys.readouterr()
    assert not (out / "dev" / "overview.svg").exists(), "a stale plan file outlived the plan that replaced it"
    other = tmp_path / "other"
    assert plan_cache.cached_plan("dev", planner, stack_file=None, out=other, quiet=False) == 1
    hit = capsys.readouterr()
    assert calls == ["dev"], "the hit planned again"
    assert (other / "dev" / "resources.json").read_text() == '{"resources": []}\n'
    assert hit.out == fresh.out == "a tree\n"
    assert hit.err.splitlines()[1:] == [f"plan: dev: wrote {other / 'dev'}"], hit.err  # its own --out, named
    assert "inputs unchanged" in hit.err.splitlines()[0]
    assert plan_cache.cached_plan("dev", planner, stack_file=None, out=out, quiet=False) == 1
    assert (out / "dev" / "cluster-run.json").read_text() == "{}", "a hit removed a record that is not the plan's"
