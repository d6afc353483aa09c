"""`make check`: every offline scanner over every stack, with zero unexplained findings.

1. The offline plan of each stack (which itself runs kubernetes-validate on built-in kinds, the upstream CRD
   schemas on custom resources, and the policy pack on every resource).
2. Checkov over each stack's WHOLE cluster (`build/plan/<stack>/cluster.yaml`: the stack's objects, every vendored
   chart rendered with the stack's values, every vendored operator manifest), one file per source under
   `build/check/<stack>/`, with every PyTorchJob / ElasticJob / ScaledJob replica template re-emitted as a
   `PodTemplate` (Checkov silently skips custom kinds); and Checkov on the Dockerfile.
3. the vendored charts and operator manifests against their SHA-256 digests (tools/vendor.py);
   import-linter's layer contracts (`.importlinter`, ARCHITECTURE.md);
4. hadolint on the Dockerfile; yamllint on stack files, Pulumi.yaml and workflows; zizmor and actionlint on
   the workflows;
5. the Python quality gate: ruff (ruff.toml), basedpyright in pyright's basic mode (pyrightconfig.json; a finding
   not in .basedpyright/baseline.json fails) and vulture (dead code; vulture_whitelist.py names what a framework
   calls).

Every suppression lives in the repo with a one-line reason: `checkov-accepted.yaml` (per object and check ID:
the cluster findings that no chart value can fix; a listed finding that no longer occurs fails the check too),
`checkov.io/skipN` annotations on the stack's own objects, `.yamllint.yaml`, and inline comments in the Dockerfile
and workflows.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import workload_kinds
from verify.plan import known_stacks
from verify.plan_record import COMPUTED, ROOT, dicts_in
from verify.render import CLUSTER_SCOPED, ClusterObject
from verify.render import load as load_cluster

BIN = Path(sys.executable).parent


ACCEPTED_FILE = ROOT / "checkov-accepted.yaml"
# What vulture reads: the platform's code, the tests (what a test calls counts as used, and the tests' own helpers
# are checked too) and the whitelist.
VULTURE_PATHS = ("__main__.py", "catalog", "cluster_targets", "components", "conventions", "policy", "stack_config",
                 "stages", "tools", "verify", "workload_kinds", "images/trainer/trainer", "benchmarks", "tests",
                 "vulture_whitelist.py")
CHECK_ID = re.compile(r"^CKV2?_K8S_[0-9]+$")


# Known limit of Checkov 3.3: its graph check CKV2_K8S_6 (a pod no NetworkPolicy selects) connects a policy to
# pods of every namespace, so one NetworkPolicy anywhere in the cluster passes every pod. It proves nothing about
# the charts' namespaces; tests/test_checkov_cluster.py's real run shows it (a pod in `node` passes because of a
# policy in `apps`).
def checkov_documents(objects: Iterable[ClusterObject]) -> dict[str, list[dict[str, Any]]]:
    """The cluster's objects as Checkov gets them, by source (`stack`, `chart ... release ns/name`, `operator
    <file>`): each source's objects plus a PodTemplate per replica template of each training custom resource."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for item in objects:
        document = copy.deepcopy(item.obj)
        _pin_computed_images(document)
        # Pulumi auto-names some objects (e.g. the readiness Job, so a change can replace it
        # create-before-delete); Checkov 3.3 crashes on an object without a name.
        document.setdefault("metadata", {}).setdefault("name", f"{document['kind'].lower()}-autonamed")
        by_source.setdefault(item.source, []).append(document)
    return {source: documents + pod_templates_for_checkov(documents) for source, documents in by_source.items()}


def source_file_name(source: str) -> str:
    """`chart vendor/charts/keda-2.20.2 release keda/keda` -> `chart-keda-2.20.2-keda-keda.yaml`."""
    words = source.split()
    if words[0] == "chart" and len(words) == 4:
        words = ["chart", Path(words[1]).name, words[3]]
    elif words[0] == "operator" and len(words) == 2:
        words = ["operator", Path(words[1]).stem]
    return re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(words)).strip("-") + ".yaml"


def write_checkov_inputs(stack: str, plan_dir: Path, check_dir: Path) -> dict[Path, tuple[str, str]]:
    """Write `<check_dir>/<stack>/<source>.yaml` from the stack's `cluster.yaml`; file -> (stack, source)."""
    out = check_dir / stack
    out.mkdir(parents=True, exist_ok=True)
    files: dict[Path, tuple[str, str]] = {}
    for source, documents in checkov_documents(load_cluster((plan_dir / "cluster.yaml").read_text())).items():
        path = out / source_file_name(source)
        if path in files:
            raise ValueError(f"two sources of stack {stack} map to the same Checkov file {path.name}: "
                             f"{files[path][1]!r} and {source!r}")
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        files[path.resolve()] = (stack, source)
    return files


@dataclass(frozen=True)
class CheckovFinding:
    stack: str
    source: str
    key: str
    """`<kind>/<namespace>/<name>`, or `<kind>/<name>` for a cluster-scoped kind."""
    check_id: str
    check_name: str

    def describe(self) -> str:
        return f"{self.stack}: {self.key} {self.check_id} ({self.check_name}) from {self.source}"


def object_key(resource: str) -> str:
    """Checkov's `Kind.namespace.name` (namespace `default` for a cluster-scoped kind) as the accepted-findings
    key. Kinds and namespaces never contain a dot, names may."""
    kind, namespace, name = resource.split(".", 2)
    return f"{kind}/{name}" if kind in CLUSTER_SCOPED else f"{kind}/{namespace}/{name}"


def parse_checkov_report(report: Any, files: Mapping[Path, tuple[str, str]]) -> list[CheckovFinding]:
    """Failed checks of Checkov's `--output json` report (one framework: a dict; several: a list of them)."""
    reports = report if isinstance(report, list) else [report]
    findings = []
    for one in reports:
        if not isinstance(one, Mapping) or "results" not in one:
            # With nothing to scan Checkov prints an empty summary instead of a report.
            continue
        for failed in one["results"].get("failed_checks") or []:
            path = Path(failed["file_abs_path"]).resolve()
            if path not in files:
                raise ValueError(f"Checkov reported {failed['check_id']} on {path}, a file this run did not write")
            stack, source = files[path]
            findings.append(CheckovFinding(stack, source, object_key(failed["resource"]), failed["check_id"],
                                           failed.get("check_name") or ""))
    return findings


def load_accepted(path: Path) -> dict[str, dict[str, str]]:
    """`checkov-accepted.yaml`: `<kind>/<namespace>/<name>` (or `<kind>/<name>`) -> {check ID: one-line reason}."""
    data = yaml.safe_load(path.read_text()) if path.exists() else None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: expected a mapping of object keys to {{check ID: reason}}, got "
                         f"{type(data).__name__}")
    accepted: dict[str, dict[str, str]] = {}
    for key, checks in data.items():
        if not isinstance(key, str) or key.count("/") not in (1, 2) or not all(key.split("/")):
            raise ValueError(f"{path.name}: key {key!r} is not <kind>/<namespace>/<name> or <kind>/<name>")
        if not isinstance(checks, dict) or not checks:
            raise ValueError(f"{path.name}: {key}: expected a non-empty mapping of check IDs to reasons, "
                             f"got {checks!r}")
        for check_id, reason in checks.items():
            if not isinstance(check_id, str) or not CHECK_ID.match(check_id):
                raise ValueError(f"{path.name}: {key}: {check_id!r} is not a Kubernetes Checkov check ID "
                                 "(CKV_K8S_<n> or CKV2_K8S_<n>)")
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
                raise ValueError(f"{path.name}: {key}.{check_id}: the reason must be one non-empty line, "
                                 f"got {reason!r}")
        accepted[key] = {str(check_id): str(reason) for check_id, reason in checks.items()}
    return accepted


def judge(findings: Iterable[CheckovFinding], accepted: Mapping[str, Mapping[str, str]],
          report_stale: bool = True) -> tuple[list[CheckovFinding], list[str]]:
    """(findings no entry explains, entries `<key> <check ID>` that explain no finding). Stale entries are only
    reported when every stack was scanned (an entry may be for an object only another stack has)."""
    unexplained = []
    used: set[tuple[str, str]] = set()
    for finding in findings:
        if finding.check_id in accepted.get(finding.key, {}):
            used.add((finding.key, finding.check_id))
        else:
            unexplained.append(finding)
    stale = [f"{key} {check_id}" for key, checks in accepted.items() for check_id in checks
             if (key, check_id) not in used] if report_stale else []
    return unexplained, stale


def checkov_env() -> dict[str, str]:
    # Checkov must not phone home (no network here, nor in CI): skip its update check and policy mapping.
    return {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE"}


def run_checkov_json(checkov: str, directory: Path, config_file: Path = ROOT / ".checkov.yaml") -> Any:
    """Checkov's JSON report on every Kubernetes manifest under `directory` (exit 1 = findings, judged by us)."""
    command = [checkov, "--framework", "kubernetes", "--directory", str(directory), "--skip-download", "--quiet",
               "--output", "json", "--config-file", str(config_file)]
    result = subprocess.run(command, cwd=directory, check=False, env=checkov_env(), capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"checkov exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise RuntimeError(f"checkov printed no JSON report ({error}): {result.stdout[:500]!r}") from None


def checkov_cluster(checkov: str, stacks: Sequence[str], all_stacks: bool,
                    accepted_file: Path = ACCEPTED_FILE) -> bool:
    """Checkov over every listed stack's cluster; False (with every reason printed) on any unexplained finding or
    stale accepted entry."""
    name = "checkov cluster"
    print(f"--- {name}: {', '.join(stacks)} (accepted findings: {accepted_file.name})", flush=True)
    check_dir = ROOT / "build" / "check"
    if check_dir.exists():
        shutil.rmtree(check_dir)  # only this run's files: Checkov scans the whole directory
    files: dict[Path, tuple[str, str]] = {}
    for stack in stacks:
        plan_dir = ROOT / "build" / "plan" / stack
        if (plan_dir / "cluster.yaml").exists():
            files.update(write_checkov_inputs(stack, plan_dir, check_dir))
    accepted = load_accepted(accepted_file)
    findings = parse_checkov_report(run_checkov_json(checkov, check_dir), files) if files else []
    unexplained, stale = judge(findings, accepted, report_stale=all_stacks)
    for stack in stacks:
        count = sum(1 for finding in findings if finding.stack == stack)
        print(f"    {stack}: {count} findings, {sum(1 for f in unexplained if f.stack == stack)} unexplained")
    for finding in unexplained:
        print(f"    UNEXPLAINED {finding.describe()}")
    for entry in stale:
        print(f"    STALE {accepted_file.name}: {entry} matches no finding any more: remove it")
    ok = not unexplained and not stale
    print(f"--- {name}: {'ok' if ok else 'FAILED'}", flush=True)
    return ok


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
            # A cluster-scoped holder (Trainer's ClusterTrainingRuntime) has no namespace: Checkov then says default.
            namespace = {"namespace": metadata["namespace"]} if metadata.get("namespace") else {}
            documents.append({
                "apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": f"{metadata.get('name')}-{str(role).lower()}", **namespace,
                             "annotations": {"gtp.dev/source": f"{obj['kind']}/{metadata.get('name')}"}},
                "template": template,
            })
    return documents


# What a "<computed>" image becomes for Checkov. The real value is the pushed image's `repository@sha256:`
# reference by construction (TrainingImage.image_ref is docker.Image.repo_digest), which the policy pack
# checks on the plan; Checkov can only judge a concrete string, so it gets one of the same shape.
COMPUTED_IMAGE = "registry.invalid/gtp/trainer@sha256:" + "0" * 64


def _pin_computed_images(node: object) -> None:
    for mapping in dicts_in(node):
        if mapping.get("image") == COMPUTED:
            mapping["image"] = COMPUTED_IMAGE


def run(name: str, command: list[str]) -> bool:
    print(f"--- {name}: {' '.join(command)}", flush=True)
    result = subprocess.run(command, cwd=ROOT, check=False, env=checkov_env())
    ok = result.returncode == 0
    print(f"--- {name}: {'ok' if ok else f'FAILED (exit {result.returncode})'}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkov", default=str(ROOT / ".venv-checkov" / "bin" / "checkov"))
    parser.add_argument("--stacks", nargs="*", default=None, help="default: every stack file")
    args = parser.parse_args(argv)
    if os.sep in args.checkov:  # a path: Checkov runs from other directories, so make it absolute
        args.checkov = str(Path(args.checkov).absolute())
    stacks = args.stacks or known_stacks(ROOT)
    results: dict[str, bool] = {}
    names = " ".join(stacks)
    results[f"plan {names}"] = run(f"plan {names}", [sys.executable, "-m", "tools.plan", "--quiet",
                                                     *(arg for stack in stacks for arg in ("--stack", stack))])
    try:
        results["checkov cluster"] = checkov_cluster(args.checkov, stacks,
                                                     all_stacks=set(stacks) >= set(known_stacks(ROOT)))
    except (OSError, RuntimeError, ValueError) as error:  # no cluster.yaml, Checkov crashed, a bad accepted file
        print(f"--- checkov cluster: FAILED: {error}", flush=True)
        results["checkov cluster"] = False
    checkov_flags = ["--skip-download", "--compact", "--quiet", "--config-file", str(ROOT / ".checkov.yaml")]
    results["checkov Dockerfile"] = run("checkov Dockerfile", [args.checkov, "--framework", "dockerfile", "--file",
                                                               "images/trainer/Dockerfile", *checkov_flags])
    results["vendored components"] = run("vendored components", [sys.executable, "-m", "tools.vendor", "check"])
    results["import contracts"] = run("import contracts", [str(BIN / "lint-imports"), "--no-cache"])
    results["hadolint"] = run("hadolint", [str(BIN / "hadolint"), "images/trainer/Dockerfile"])
    results["yamllint"] = run("yamllint", [str(BIN / "yamllint"), "--strict", "-c", ".yamllint.yaml", "stacks",
                                           "Pulumi.yaml", ".github/workflows", "policy/PulumiPolicy.yaml",
                                           ACCEPTED_FILE.name])
    results["zizmor"] = run("zizmor", [str(BIN / "zizmor"), "--offline", ".github/workflows"])
    workflows = sorted(map(str, (ROOT / ".github" / "workflows").glob("*.yml")))
    results["actionlint"] = run("actionlint", [str(BIN / "actionlint"), *workflows])
    results["ruff"] = run("ruff", [str(BIN / "ruff"), "check", "--no-cache", "."])
    results["types"] = run("types", [str(BIN / "basedpyright")])
    results["dead code"] = run("dead code", [str(BIN / "vulture"), *VULTURE_PATHS, "--min-confidence", "60"])
    failed = [name for name, ok in results.items() if not ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
