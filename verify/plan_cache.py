"""A content-addressed cache of whole plans: `make plan` of an unchanged stack restores its files in milliseconds.

A plan (verify.plan.plan_one: the program under mocks, the Helm renders, the operator manifests, the simulation, the
validators and the policy pack, the cost and the picture) is a pure function of what it reads: the stack file, the
repository's code and data (`__main__.py`, every package, `vendor/`, `stacks/`, `dashboards/`, `images/`, `policy/`,
`conventions/`...), the tools it runs (the Python interpreter and every installed distribution, `helm`, Graphviz's
`dot`) and the `GTP_*` / `PULUMI_*` environment. The key is a SHA-256 over exactly those; an entry holds the plan's
files in `<out>/<stack>/` (PLAN_FILES), what it printed (stdout and stderr, in order) and its exit code. A hit writes
the same files and prints the same lines, byte for byte, after one line that says it is a hit.

What is not in the key, and why it can't change a plan: `.git` (the plan pins the image labels' revision to
"unknown", verify/plan.py), `build/` (outputs; the mirror lock the offline stage reads is `vendor/` or the stack's
own), `tests/`, `docs/`, `benchmarks/`, `.github/`, `.ci/` and the top-level Markdown files (nothing the program
imports or opens; a chart's README.md is in), virtualenvs and bytecode. tests/test_plan_cache.py holds the planner
to that: it records every file a real plan opens (an audit hook) and fails on any repository file outside the key,
on any file outside the repository and the Python installation, and on any program but helm and dot. One input is
left out knowingly: the fonts Graphviz lays overview.svg out with (a new font package moves the picture's text,
not the plan; `--no-cache` redraws it).

One stage is cached on its own, because a changed stack usually leaves it unchanged: each Helm release's render
(`helm template` output), keyed by helm, the chart directory's files, the release's name, namespace and values and
the Kubernetes version (`helm_render_key`), so the plan of an edited stack, a plan-diff's head and a submitted job
run helm only for the releases the change touched.

`--no-cache` (or GTP_PLAN_CACHE=off) plans from scratch and stores nothing; GTP_PLAN_CACHE=<dir> moves the cache.
It lives under `build/plan-cache/` (`plans/`: whole plans and plan-diff bases; `helm/`: renders), keeps the newest
ENTRIES_KEPT plans and HELM_RENDERS_KEPT renders, and is safe to delete at any time.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMAT = 1
"""Bumped when an entry's layout or the key's recipe changes: old entries then simply miss."""
ENTRIES_KEPT = 64
HELM_RENDERS_KEPT = 512
PLAN_FILES = ("resources.json", "manifests.yaml", "cost.json", "cluster.yaml", "simulation.json", "overview.dot",
              "overview.svg", "policy-facts.json", "policy-pack-config.json")
"""Every file verify.plan.plan_and_check writes into `<out>/<stack>/` (what an entry stores and a hit restores;
tests/test_plan_cache.py fails on a plan that writes one more)."""
PLANS, HELM = "plans", "helm"
OUTPUT_FILE = "output.json"
DIRECTORY = "\u0000plan-directory\u0000"
"""Stands for `<out>/<stack>` in a stored output."""
TOP_SKIPPED_DIRS = frozenset({"build", "tests", "docs", "benchmarks", ".github", ".ci"})
"""Top-level directories no plan reads (see the module docstring). Only at the top: a chart's `templates/tests/` is
one of its templates."""
SKIPPED_DIRS = frozenset({".git", ".venv", ".venv-checkov", "__pycache__", ".pytest_cache", "node_modules",
                          ".mypy_cache", ".ruff_cache", ".idea", ".vscode"})
"""Directory names pruned wherever they appear: version control, virtualenvs, bytecode and tool caches."""
SKIPPED_SUFFIXES = (".pyc", ".egg-info")
ROOT_DOCS = ".md"
"""Markdown at the top of the tree (README, ARCHITECTURE, SECURITY) is for people; elsewhere it counts: a chart's
README.md is one of the chart's files (`.Files` in its templates)."""
DERIVED_CACHES = ("build/cache/", "build/kueue/", "build/offline/", "build/plan-cache/")
"""Files under `build/` a plan reads without them being inputs: each is named by the SHA-256 of its source or of its
content, derived from inputs in the key: a vendored manifest's parse (verify/render.py `_parsed`), a Helm render of
this cache (`helm_render_key`), the stack's derived Kueue and offline operator manifests (components/kueue.py
`kueue_manifest`, rewritten whenever the text differs)."""
NOT_READ_ENV = frozenset({"GTP_PLAN_CACHE", "GTP_VCS_REVISION", "GTP_SOURCE_URL"})
"""The cache's own setting, and what verify.plan.run overwrites before the program runs (the image labels)."""
TOOLS = ("dot",)
"""Executables on PATH a plan runs besides helm (found as verify.helm.helm_binary finds it)."""


def cache_dir() -> Path | None:
    """Where entries live, or None when the cache is off (GTP_PLAN_CACHE=off)."""
    setting = os.environ.get("GTP_PLAN_CACHE", "")
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    return Path(setting) if setting else ROOT / "build" / "plan-cache"


def input_files(root: Path = ROOT) -> list[Path]:
    """Every file of `root` a plan may read, sorted: the tree minus TOP_SKIPPED_DIRS, SKIPPED_DIRS and
    SKIPPED_SUFFIXES (dot-files count: the image stage reads `.dockerignore`)."""
    found = []
    for directory, subdirs, files in os.walk(root):
        at_top = Path(directory) == root
        subdirs[:] = sorted(name for name in subdirs
                            if name not in SKIPPED_DIRS and not name.endswith(SKIPPED_SUFFIXES)
                            and not (at_top and name in TOP_SKIPPED_DIRS))
        found.extend(Path(directory, name) for name in files
                     if not name.endswith(SKIPPED_SUFFIXES) and not (at_top and name.endswith(ROOT_DOCS)))
    return sorted(found)


def _file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _executable_identity(path: str | None) -> str:
    """A binary by path, size and modification time: hashing helm's 50 MB on every plan would cost more than the
    rest of the key; replacing it (a new version, `make setup`) changes the size or the time."""
    if path is None:
        return "absent"
    stat = os.stat(path)
    return f"{os.path.realpath(path)} {stat.st_size} {stat.st_mtime_ns}"


def tool_identity() -> dict[str, str]:
    """The interpreter, every installed distribution's version, the binaries a plan runs, the environment it reads."""
    from verify.helm import helm_binary

    try:
        helm: str | None = helm_binary()
    except FileNotFoundError:
        helm = None
    distributions = sorted(f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions())
    identity = {"python": sys.version, "distributions": hashlib.sha256("\n".join(distributions).encode()).hexdigest(),
                "helm": _executable_identity(helm)}
    identity.update({tool: _executable_identity(shutil.which(tool)) for tool in TOOLS})
    identity.update({name: value for name, value in sorted(os.environ.items())
                     if name.startswith(("GTP_", "PULUMI_")) and name not in NOT_READ_ENV})
    return identity


def _digest(recipe: dict) -> str:
    return hashlib.sha256(json.dumps({"format": FORMAT, **recipe}, sort_keys=True).encode()).hexdigest()


def plan_key(stack: str, stack_file: Path | None = None, root: Path = ROOT,
             tools: dict[str, str] | None = None) -> str:
    """The key of planning `stack` (from `stack_file`, else `root/stacks/Pulumi.<stack>.yaml`) with `root`'s code."""
    path = (stack_file or root / "stacks" / f"Pulumi.{stack}.yaml").resolve()
    files = {str(file.relative_to(root)): _file_digest(file) for file in input_files(root)}
    # The stack file by content wherever it is (a --stack-file outside the tree; the committed one is also in files).
    stack_digest = _file_digest(path) if path.is_file() else "absent"
    return _digest({"stack": stack, "stack_file": stack_digest, "files": files,
                    "tools": tool_identity() if tools is None else tools})


@dataclass
class Recorder(io.TextIOBase):
    """Passes writes on to `target` and keeps them, tagged with the stream, in order across both streams."""

    name: str
    target: io.TextIOBase
    chunks: list[list[str]] = field(default_factory=list)

    def write(self, text: str) -> int:
        self.chunks.append([self.name, text])
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()


@contextlib.contextmanager
def recording() -> Iterator[list[list[str]]]:
    """Everything written to sys.stdout and sys.stderr inside the block, as [stream, text] pairs in order."""
    chunks: list[list[str]] = []
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = Recorder("stdout", stdout, chunks)
    sys.stderr = Recorder("stderr", stderr, chunks)
    try:
        yield chunks
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def clear_outputs(directory: Path) -> None:
    """The plan files in `<out>/<stack>/` are exactly the last plan's: one an earlier plan wrote and this one doesn't
    (an overview.svg when `dot` is gone) would contradict it. Other files there (`make cluster-test`'s
    cluster-run.json) are not the plan's to remove."""
    for name in PLAN_FILES:
        (directory / name).unlink(missing_ok=True)


def restore(entry: Path, directory: Path) -> int:
    """Write the entry's files into `directory`, replay its output; its exit code."""
    recorded = json.loads((entry / OUTPUT_FILE).read_text())
    clear_outputs(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in recorded["files"]:
        shutil.copyfile(entry / "files" / name, directory / name)
    for stream, text in recorded["output"]:
        (sys.stdout if stream == "stdout" else sys.stderr).write(text.replace(DIRECTORY, str(directory)))
    os.utime(entry)  # newest use: pruning keeps the entries in use
    return int(recorded["code"])


def _store_entry(root: Path, digest: str, fill: Callable[[Path], None]) -> None:
    """Make entry `root/digest` with `fill(folder)`, atomically: it is filled in a staging folder and renamed, so a
    concurrent plan of the same key wins or loses the rename whole and a reader never sees half an entry."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        fill(staging)
        try:
            os.rename(staging, root / digest)
        except OSError:  # the same key stored meanwhile: identical by construction
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    prune(root)


def store(root: Path, key: str, stack: str, directory: Path, chunks: list[list[str]], code: int) -> None:
    """Save the plan just written into `directory` under `key`."""

    def fill(staging: Path) -> None:
        (staging / "files").mkdir()
        names = sorted(name for name in PLAN_FILES if (directory / name).is_file())
        for name in names:
            shutil.copyfile(directory / name, staging / "files" / name)
        # The output names the directory it wrote ("wrote build/plan/dev/..."): stored as a placeholder, so a hit
        # with another --out names its own.
        output = [[stream, text.replace(str(directory), DIRECTORY)] for stream, text in chunks]
        (staging / OUTPUT_FILE).write_text(json.dumps({"stack": stack, "code": code, "files": names,
                                                       "output": output, "stored": time.time()}))

    _store_entry(root, key, fill)


def prune(root: Path, keep: int = ENTRIES_KEPT) -> None:
    """Keep the `keep` most recently used entries of `root` (directories or files; staging ones are left alone)."""
    entries = sorted((child for child in root.iterdir() if not child.name.startswith(".")),
                     key=lambda child: child.stat().st_mtime, reverse=True)
    for stale in entries[keep:]:
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def cached_plan(stack: str, plan, *, stack_file: Path | None, out: Path, quiet: bool) -> int:
    """`plan(stack, stack_file=..., out=..., quiet=...)` (verify.plan.plan_one) through the cache."""
    cache = cache_dir()
    directory = out / stack
    if cache is None:
        return plan(stack, stack_file=stack_file, out=out, quiet=quiet)
    root = cache / PLANS
    started = time.perf_counter()
    key = plan_key(stack, stack_file, tools={**tool_identity(), "quiet": str(quiet)})
    entry = root / key
    if (entry / OUTPUT_FILE).is_file():
        print(f"plan: {stack}: inputs unchanged (key {key[:12]}): the plan below is restored from "
              f"{entry} in {time.perf_counter() - started:.2f} s", file=sys.stderr, flush=True)
        return restore(entry, directory)
    clear_outputs(directory)
    with recording() as chunks:
        code = plan(stack, stack_file=stack_file, out=out, quiet=quiet)
    store(root, key, stack, directory, chunks, code)
    return code


def tree_key(tree: str, stack: str) -> str:
    """The key of planning `stack` at a git tree object (`git rev-parse <commit>^{tree}`): a commit's checkout holds
    exactly its tree's files, so the tree's hash names every repository input, and the tools do the rest."""
    return _digest({"kind": "git-tree", "tree": tree, "stack": stack, "tools": tool_identity()})


DOCUMENT_FILE = "document.json"


def _cached(*parts: str) -> Path | None:
    """The cache file at `parts` (its use recorded, so pruning keeps it), or None: cache off, or no such entry."""
    cache = cache_dir()
    path = None if cache is None else cache.joinpath(*parts)
    if path is None or not path.is_file():
        return None
    # The entry is what pruning sorts: a file right under its kind's folder (a render), else the folder holding it.
    os.utime(path if len(parts) == 2 else path.parent)
    return path


def load_document(digest: str) -> tuple[bool, object]:
    """(found, the stored plan document or None for "no such stack") under `digest`; (False, None) on a miss."""
    path = _cached(PLANS, digest, DOCUMENT_FILE)
    return (False, None) if path is None else (True, json.loads(path.read_text())["document"])


def store_document(digest: str, document: object) -> None:
    """Store a plan document (verify.plan_diff.plan_tree's) under `digest`."""
    cache = cache_dir()
    if cache is not None:
        _store_entry(cache / PLANS, digest, lambda staging: (staging / DOCUMENT_FILE).write_text(
            json.dumps({"document": document, "stored": time.time()})))


def helm_render_key(helm: str, chart: Path, name: str, namespace: str, kubernetes_version: str,
                    values: str, include_crds: bool = True) -> str:
    """What `helm template` reads: the binary, every file of the chart directory, the release's name, namespace and
    values, the Kubernetes version it renders for (capabilities), and whether it includes the charts' crds/."""
    files = {str(path.relative_to(chart)): _file_digest(path) for path in sorted(chart.rglob("*")) if path.is_file()}
    return _digest({"kind": "helm-render", "helm": _executable_identity(helm), "chart": files, "name": name,
                    "namespace": namespace, "kubernetes": kubernetes_version, "values": values,
                    **({} if include_crds else {"crds": False})})


def load_helm_render(digest: str) -> str | None:
    path = _cached(HELM, f"{digest}.yaml")
    return None if path is None else path.read_text()


def store_helm_render(digest: str, text: str) -> None:
    cache = cache_dir()
    if cache is None:
        return
    root = cache / HELM
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".{digest}.{os.getpid()}.partial"
    partial.write_text(text)
    os.replace(partial, root / f"{digest}.yaml")
    prune(root, HELM_RENDERS_KEPT)
