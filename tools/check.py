"""`make check`: every offline scanner over every stack, with zero unexplained findings.

1. The offline plan of each stack (which itself validates every object of its rendered cluster: kubernetes-validate
   on built-in kinds, the installed CRDs' schemas on custom resources; and runs the policy pack on every resource).
2. Checkov on each stack's whole rendered cluster (`cluster.yaml`: its own objects, the Helm charts', the
   operators'), with every PyTorchJob / ElasticJob / ScaledJob replica template re-emitted as a `PodTemplate`
   (Checkov silently skips custom kinds), and on the Dockerfile. Findings in third-party objects that no chart
   value fixes are accepted per object and check, each with its reason, in `checkov-accepted.yaml` (applied as
   Checkov's `checkov.io/skipN` annotations on the scanned copy); an entry naming no object fails the check.
3. the vendored charts and operator manifests against their SHA-256 digests (tools/vendor.py);
   import-linter's layer contracts (`.importlinter`, ARCHITECTURE.md);
4. hadolint on the Dockerfile; yamllint on stack files, Pulumi.yaml and workflows; zizmor and actionlint on
   the workflows.

Every suppression lives in the repo with a one-line reason: `.checkov.yaml`, `checkov-accepted.yaml`,
`.yamllint.yaml`, and inline comments in the Dockerfile and workflows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

import workload_kinds
from tools.plan import known_stacks
from tools.plan_record import COMPUTED, ROOT

BIN = Path(sys.executable).parent


ACCEPTED_FINDINGS = ROOT / "checkov-accepted.yaml"


def object_key(obj: Mapping[str, Any]) -> str:
    """`Kind namespace/name` (`Kind name` when cluster-scoped): how checkov-accepted.yaml names an object."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{obj.get('kind')} {namespace + '/' if namespace else ''}{metadata.get('name')}"


def load_accepted(path: Path = ACCEPTED_FINDINGS) -> dict[str, dict[str, str]]:
    """checkov-accepted.yaml as object → {check id: one-line reason}. The file is a list of entries
    `{objects: [Kind namespace/name, ...], checks: {CKV_K8S_n: reason}}`; a malformed entry is an error naming
    its key path."""
    entries = yaml.safe_load(path.read_text()) or []
    if not isinstance(entries, list):
        raise ValueError(f"{path.name}: expected a list of {{objects, checks}} entries, got {type(entries).__name__}")
    accepted: dict[str, dict[str, str]] = {}
    for index, entry in enumerate(entries):
        where = f"{path.name}[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"objects", "checks"}:
            raise ValueError(f"{where}: expected exactly the keys 'objects' and 'checks', got {entry!r}")
        objects, checks = entry["objects"], entry["checks"]
        if not isinstance(objects, list) or not objects or not all(isinstance(o, str) and " " in o for o in objects):
            raise ValueError(f"{where}.objects: expected a non-empty list of 'Kind namespace/name', got {objects!r}")
        if not isinstance(checks, dict) or not checks:
            raise ValueError(f"{where}.checks: expected a mapping of check id to its reason, got {checks!r}")
        for check, reason in checks.items():
            if not str(check).startswith("CKV_") or not isinstance(reason, str) or not reason.strip() \
                    or "\n" in reason.strip():
                raise ValueError(f"{where}.checks.{check}: expected CKV_... with a one-line reason, got {reason!r}")
        for key in objects:
            for check, reason in checks.items():
                if check in accepted.setdefault(key, {}):
                    raise ValueError(f"{where}: {key} {check} is accepted twice")
                accepted[key][check] = reason.strip()
    return accepted


def apply_accepted(documents: Sequence[dict[str, Any]], accepted: Mapping[str, Mapping[str, str]]) -> set[str]:
    """Annotate each accepted object with Checkov's per-resource skips (`checkov.io/skipN: CHECK=reason`, after
    any it carries already); returns the keys that matched an object."""
    used = set()
    for document in documents:
        key = object_key(document)
        if key not in accepted:
            continue
        used.add(key)
        annotations = document.setdefault("metadata", {}).setdefault("annotations", {}) or {}
        document["metadata"]["annotations"] = annotations
        number = 1 + sum(1 for name in annotations if name.startswith("checkov.io/skip"))
        for check, reason in accepted[key].items():
            annotations[f"checkov.io/skip{number}"] = f"{check}={reason}"
            number += 1
    return used


def checkov_cluster(stack_dir: Path) -> list[dict[str, Any]]:
    """Every object of the stack's rendered cluster (`cluster.yaml`: its own objects, the charts', the
    operators'), plus a PodTemplate per replica template of each training custom resource."""
    from tools.cluster import load

    documents = [item.obj for item in load((stack_dir / "cluster.yaml").read_text())]
    for document in documents:
        _pin_computed_images(document)
        # Pulumi auto-names some objects (e.g. the readiness Job, so a change can replace it
        # create-before-delete); Checkov 3.3 crashes on an object without a name.
        document.setdefault("metadata", {}).setdefault("name", f"{document['kind'].lower()}-autonamed")
    return documents + pod_templates_for_checkov(documents)


def pod_templates_for_checkov(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each replica template of every workload kind's custom resource (PyTorchJob, ElasticJob, ScaledJob...) as a
    `PodTemplate` document: Checkov skips custom kinds, but scans PodTemplates with its pod policies."""
    documents = []
    for obj in objects:
        kind = workload_kinds.kind_of_resource(obj)
        if kind is None:
            continue
        metadata = obj.get("metadata") or {}
        for role, template in sorted(kind.pod_templates(obj).items()):
            if not isinstance(template, Mapping):
                continue
            documents.append({
                "apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": f"{metadata.get('name')}-{str(role).lower()}",
                             "namespace": metadata.get("namespace"),
                             "annotations": {"gtp.dev/source": f"{obj['kind']}/{metadata.get('name')}"}},
                "template": template,
            })
    return documents


# What a "<computed>" image becomes for Checkov. The real value is the pushed image's `repository@sha256:`
# reference by construction (TrainingImage.image_ref is docker.Image.repo_digest), which the policy pack
# checks on the plan; Checkov can only judge a concrete string, so it gets one of the same shape.
COMPUTED_IMAGE = "registry.invalid/gtp/trainer@sha256:" + "0" * 64


def _pin_computed_images(node: object) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and value == COMPUTED:
                node[key] = COMPUTED_IMAGE
            else:
                _pin_computed_images(value)
    elif isinstance(node, list):
        for item in node:
            _pin_computed_images(item)


def run(name: str, command: list[str]) -> bool:
    print(f"--- {name}: {' '.join(command)}", flush=True)
    # Checkov must not phone home (no network here, nor in CI): skip its update check and policy mapping.
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE"}
    result = subprocess.run(command, cwd=ROOT, check=False, env=env)
    ok = result.returncode == 0
    print(f"--- {name}: {'ok' if ok else f'FAILED (exit {result.returncode})'}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkov", default=str(ROOT / ".venv-checkov" / "bin" / "checkov"))
    parser.add_argument("--stacks", nargs="*", default=None, help="default: every stack file")
    args = parser.parse_args(argv)
    stacks = args.stacks or known_stacks(ROOT)
    results: dict[str, bool] = {}
    check_dir = ROOT / "build" / "check"
    check_dir.mkdir(parents=True, exist_ok=True)
    # Every stack in one process (`python -m tools.plan --stack a --stack b ...`): imports and schemas load once.
    names = " ".join(stacks)
    results[f"plan {names}"] = run(f"plan {names}", [sys.executable, "-m", "tools.plan", "--quiet",
                                                     *(arg for stack in stacks for arg in ("--stack", stack))])
    accepted = load_accepted()
    used: set[str] = set()
    for stale in check_dir.glob("*.yaml"):
        stale.unlink()
    for stack in stacks:
        if (ROOT / "build" / "plan" / stack / "cluster.yaml").exists():
            documents = checkov_cluster(ROOT / "build" / "plan" / stack)
            used |= apply_accepted(documents, accepted)
            if documents:
                (check_dir / f"{stack}.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    unused = sorted(set(accepted) - used)
    results["accepted Checkov findings"] = not unused
    print(f"--- accepted Checkov findings ({ACCEPTED_FINDINGS.name}): "
          + (f"FAILED: no object of any stack's cluster.yaml is {', '.join(unused)}" if unused else "ok"), flush=True)
    checkov_env = ["--skip-download", "--compact", "--quiet", "--config-file", str(ROOT / ".checkov.yaml")]
    results["checkov cluster"] = run("checkov cluster", [args.checkov, "--framework", "kubernetes",
                                                             "--directory", str(check_dir), *checkov_env])
    results["checkov Dockerfile"] = run("checkov Dockerfile", [args.checkov, "--framework", "dockerfile", "--file",
                                                               "images/trainer/Dockerfile", *checkov_env])
    results["vendored components"] = run("vendored components", [sys.executable, "-m", "tools.vendor", "check"])
    results["import contracts"] = run("import contracts", [str(BIN / "lint-imports"), "--no-cache"])
    results["hadolint"] = run("hadolint", [str(BIN / "hadolint"), "images/trainer/Dockerfile"])
    results["yamllint"] = run("yamllint", [str(BIN / "yamllint"), "--strict", "-c", ".yamllint.yaml", "stacks",
                                           "Pulumi.yaml", ".github/workflows", "policy/PulumiPolicy.yaml",
                                           ACCEPTED_FINDINGS.name])
    results["zizmor"] = run("zizmor", [str(BIN / "zizmor"), "--offline", ".github/workflows"])
    results["actionlint"] = run("actionlint", [str(BIN / "actionlint"), *sorted(map(str, (ROOT / ".github" / "workflows").glob("*.yml")))])
    failed = [name for name, ok in results.items() if not ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
