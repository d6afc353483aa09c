"""Build the test cluster's binaries from their Go modules (tools/cluster_test/gomod/<component>/go.mod).

Each component is its own Go module so that minimal version selection does not unify one component's
dependencies with another's (Kubernetes 1.34's staging modules vs Kueue's k8s.io/* v0.36). The Go build and
module caches and the built binaries live outside the clone, under `$GTP_GO_CACHE` (default /var/tmp/gtp-go), so
a second clone or CI run on the same machine reuses them: a binary is rebuilt only when its key (the module's
go.mod + go.sum, the package, the flags and the Go version) changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from catalog import versions

GOMOD = Path(__file__).resolve().parent / "gomod"
DEFAULT_CACHE = "/var/tmp/gtp-go"
CACHE_ENV = "GTP_GO_CACHE"

KUBERNETES_TAG = versions.CLUSTER_TEST_KUBERNETES
_MINOR = KUBERNETES_TAG.split(".")[1]
_K8S_LD = " ".join(
    f"-X {pkg}.{key}={value}"
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    for key, value in (("gitVersion", KUBERNETES_TAG), ("gitMajor", "1"), ("gitMinor", _MINOR),
                       ("gitTreeState", "clean")))


@dataclass(frozen=True)
class Generated:
    """A module whose `main` package embeds files that its own `go generate` step writes (they are not in the
    module's zip): the build copies the module out of the module cache (read-only, and `-overlay` may not replace
    files under GOMODCACHE), runs the upstream generator there, and builds with the copy replacing the module."""

    module: str
    version: str
    folder: str
    """The package folder, in the module, holding the generator and the embedded files."""
    generator: str
    """The upstream generator's file in `folder` (run with `go run`, unchanged)."""
    env: tuple[tuple[str, str], ...] = ()
    """What the generator reads from the environment (the upstream Makefile's variables)."""


@dataclass(frozen=True)
class Binary:
    component: str
    """The Go module's folder under gomod/."""
    name: str
    package: str
    ldflags: str = ""
    generated: Generated | None = None


MODULES: dict[str, tuple[str, str]] = {
    "kubernetes": ("k8s.io/kubernetes", versions.CLUSTER_TEST_KUBERNETES),
    "etcd": ("go.etcd.io/etcd/server/v3", versions.CLUSTER_TEST_ETCD),
    "kwok": ("sigs.k8s.io/kwok", versions.KWOK_VERSION),
    "kueue": ("sigs.k8s.io/kueue", versions.KUEUE_VERSION),
    "training-operator": ("github.com/kubeflow/training-operator", versions.TRAINING_OPERATOR_VERSION),
    "jobset": ("sigs.k8s.io/jobset", versions.JOBSET_VERSION),
    "trainer": ("github.com/kubeflow/trainer/v2", versions.KUBEFLOW_TRAINER_VERSION),
    "pulumi": ("github.com/pulumi/pulumi/pkg/v3", versions.PULUMI_CLI_VERSION),
    "pulumi-kubernetes": ("github.com/pulumi/pulumi-kubernetes/provider/v4",
                          versions.PULUMI_KUBERNETES_PROVIDER_MODULE),
}
"""Go module folder → (the upstream module it builds, the version catalog/versions.py pins)."""

BINARIES: tuple[Binary, ...] = (
    Binary("etcd", "etcd", "go.etcd.io/etcd/server/v3"),
    Binary("kubernetes", "kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", _K8S_LD),
    Binary("kubernetes", "kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager", _K8S_LD),
    Binary("kubernetes", "kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", _K8S_LD),
    Binary("kubernetes", "kubectl", "k8s.io/kubernetes/cmd/kubectl", _K8S_LD),
    Binary("kwok", "kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    Binary("kueue", "kueue", "sigs.k8s.io/kueue/cmd/kueue",
           f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={versions.KUEUE_VERSION}"),
    Binary("training-operator", "training-operator",
           "github.com/kubeflow/training-operator/cmd/training-operator.v1"),
    Binary("jobset", "jobset", "sigs.k8s.io/jobset"),
    Binary("trainer", "trainer-controller-manager", "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"),
    # The Pulumi CLI and the kubernetes provider, as their Makefiles build them: the version stamped with -X
    # (pulumi/pulumi Makefile's PULUMI_VERSION ldflag; pulumi-kubernetes's `VERSION` for its generator and ldflag).
    Binary("pulumi", "pulumi", "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
           f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={versions.PULUMI_CLI_VERSION}"),
    Binary("pulumi-kubernetes", "pulumi-resource-kubernetes",
           "github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes",
           "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version="
           f"{versions.PULUMI_KUBERNETES_PROVIDER}",
           Generated("github.com/pulumi/pulumi-kubernetes/provider/v4", versions.PULUMI_KUBERNETES_PROVIDER_MODULE,
                     "cmd/pulumi-resource-kubernetes", "generate.go",
                     (("VERSION", versions.PULUMI_KUBERNETES_PROVIDER),))),
)
"""Every binary the harness can build, in build order (the cheap control plane first)."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def go_env() -> dict[str, str]:
    """The environment every `go` command runs in: caches outside the clone, the local toolchain only. Every core
    may compile (`-p` = the machine's CPUs): builds run under `nice -n 19`, so whatever else runs (.ci/run starts
    this build beside the test suites) keeps the CPU it asks for and the build takes only what is left."""
    root = cache_root()
    env = dict(os.environ)
    env.update(GOCACHE=str(root / "build"), GOMODCACHE=str(root / "mod"), GOTOOLCHAIN="local",
               GOFLAGS=f"-buildvcs=false -mod=readonly -p={os.cpu_count() or 1}")
    return env


def _go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True,
                          env=go_env()).stdout.strip()


def key(binary: Binary, go_version: str) -> str:
    """The cache key: what the binary is built from."""
    digest = hashlib.sha256()
    for part in ((GOMOD / binary.component / "go.mod").read_bytes(), (GOMOD / binary.component / "go.sum").read_bytes(),
                 binary.package.encode(), binary.ldflags.encode(), go_version.encode(),
                 *([repr(binary.generated).encode()] if binary.generated else [])):
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def path_of(binary: Binary, go_version: str | None = None) -> Path:
    return cache_root() / "bin" / f"{binary.name}-{key(binary, go_version or _go_version())}" / binary.name


def build(names: list[str] | None = None, *, log=print) -> dict[str, Path]:
    """Build (or find in the cache) the named binaries (all by default); name → path. Prints each build's time."""
    go_version = _go_version()
    wanted = [b for b in BINARIES if not names or b.name in names or b.component in names]
    found: dict[str, Path] = {}
    for binary in wanted:
        target = path_of(binary, go_version)
        if target.exists():
            log(f"cluster-test: {binary.name}: cached ({target})")
            found[binary.name] = target
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        started = time.monotonic()
        extra = generate(binary, target.parent) if binary.generated else []
        command = ["nice", "-n", "19", "go", "build", *extra, "-ldflags", f"-s -w {binary.ldflags}".strip(),
                   "-o", str(partial), binary.package]
        done = subprocess.run(command, cwd=GOMOD / binary.component, env=go_env(), capture_output=True, text=True,
                              check=False)
        seconds = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"go build {binary.package} (module gomod/{binary.component}) failed after "
                               f"{seconds:.0f} s:\n{done.stderr[-4000:]}")
        partial.replace(target)
        for scratch in ("module", "build.mod", "build.sum"):  # generate()'s; the binary is all that is kept
            path = target.parent / scratch
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        log(f"cluster-test: {binary.name}: built in {seconds:.1f} s ({target})")
        found[binary.name] = target
    return found


def _go(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["nice", "-n", "19", "go", *args], cwd=cwd, env={**go_env(), **(env or {})},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"go {' '.join(args[:3])} (in {cwd}) failed:\n{done.stderr[-4000:]}")
    return done.stdout


def generate(binary: Binary, work: Path) -> list[str]:
    """Run a module's own generator (`Generated`) and return the `go build` flags that build with its output.

    The module comes from the module cache, where `go mod download` checked it against gomod/<component>/go.sum;
    the copy (under `work`) gets the generated files and replaces the module through a go.mod of the build's
    own (`-modfile`: the committed go.mod and go.sum stay as they are). The generator runs from a folder inside
    gomod/<component> (its imports resolve in that module: `go run` takes files of the main module only)."""
    spec = binary.generated
    assert spec is not None
    folder = GOMOD / binary.component
    module_dir = Path(json.loads(_go("mod", "download", "-json", f"{spec.module}@{spec.version}", cwd=folder))["Dir"])
    copy = work / "module"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(module_dir, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the module cache's files are read-only
    scratch = folder / ".generate"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(copy / spec.folder, scratch)
    before = set(scratch.iterdir())
    _go("run", spec.generator, cwd=scratch, env=dict(spec.env))
    for made in set(scratch.iterdir()) - before:
        shutil.copy2(made, copy / spec.folder / made.name)
    shutil.rmtree(scratch)
    modfile = work / "build.mod"
    shutil.copy2(folder / "go.mod", modfile)
    shutil.copy2(folder / "go.sum", work / "build.sum")
    _go("mod", "edit", f"-modfile={modfile}", f"-replace={spec.module}={copy}", cwd=folder)
    return ["-modfile", str(modfile)]


def located(names: list[str]) -> dict[str, Path]:
    """The named binaries' cached paths; raises naming what is missing (run `build` first)."""
    go_version = _go_version()
    paths = {b.name: path_of(b, go_version) for b in BINARIES if b.name in names}
    missing = sorted(name for name, path in paths.items() if not path.exists())
    if missing:
        raise RuntimeError(f"not built: {', '.join(missing)} — run `python -m tools.cluster_test build`")
    return paths


def prune(keep: dict[str, Path]) -> None:
    """Remove cached binaries of other keys (older go.mod versions) for the names kept."""
    for name, path in keep.items():
        for other in (cache_root() / "bin").glob(f"{name}-*"):
            if other != path.parent:
                shutil.rmtree(other, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover - `python -m tools.cluster_test build` is the entry point
    build(sys.argv[1:] or None)
