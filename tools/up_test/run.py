"""`make up-test`: a test stack deployed by the real Pulumi CLI and kubernetes provider onto the real test cluster.

Per test stack (tools/up_test/stacks.py), on a fresh cluster and fresh state:
1. the site: the test cluster (tools/cluster_test: etcd, kube-apiserver, controller-manager, scheduler, kwok), the
   stack's kwok nodes with the labels the README tells sites to apply, a PersistentVolume per claim (the site's
   storage driver's part) and the site's RuntimeClasses; every object then in the cluster is the baseline;
2. `pulumi preview`, then `pulumi up` to completion (the readiness gate included); the engine's state against the
   offline plan (tools/up_test/differences.py);
3. a second `pulumi up --expect-no-changes`: it must change nothing;
4. `pulumi preview --policy-pack` with the plan's policy config: no violation; then the same with a planted
   violation (tools/up_test/step.py PLANTS): the preview must fail naming the policy;
5. the one-line changes, in turn: each real preview's steps must be what `make plan-diff` predicts
   (verify/plan_diff.py `PlanDiff` on the offline plans before and after), then `pulumi up`;
6. `pulumi up --expect-no-changes` with an input planted that changes on every run: it must fail, having updated
   only what the plant touched;
7. `pulumi destroy`: every object that was not in the baseline must be gone (finalizers included).
The report (build/up-test/<stack>/report.json) has each phase's time, the built binaries' checksums, each step's
summary and resource steps, and every difference between the offline plan (the mocks) and what the engine recorded
in its state (the providers' inputs), by kind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tools.cluster_test.control_plane import ROOT, Cluster
from tools.up_test import differences, pulumi_home
from tools.up_test.stacks import STACKS, TestStack, derive, stack_file_text, with_change

STATE = ROOT / "build" / "up-test"
NOISE = {"Event", "Lease", "EndpointSlice", "Endpoints", "ComponentStatus", "Binding", "TokenReview",
         "SelfSubjectReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview", "SubjectAccessReview",
         "LocalSubjectAccessReview", "TokenRequest"}
"""Kinds not compared before and after (written by controllers on their own, or not listable objects)."""


STEP_TIMEOUT = 900
"""Seconds one CLI command may take (the provider's own awaits time out at 10 minutes)."""


class StepFailed(RuntimeError):
    pass


class UpTest:
    def __init__(self, test: TestStack, log=print):
        self.test, self.log = test, log
        self.state = STATE / test.name
        self.work = self.state / "project"
        self.home = self.state / "pulumi-home"
        self.env: dict[str, str] = {}
        self.report: dict[str, Any] = {"stack": test.name, "source": test.source, "timings_s": {},
                                       "differences_from_source": test.differences, "steps": {}}
        # Jobs' pods complete (kwok's pod-complete stage): the readiness gate's Job stands for its check passing on
        # the GPU node, which `pulumi up` waits for (the provider awaits a Job's completion).
        self.cluster = Cluster(self.state / "cluster", stages=("pod/fast/pod-complete.yaml",))

    # --- the site --------------------------------------------------------------------------------------------
    def site(self) -> None:
        from tools.cluster_test import nodes as kwok_nodes
        from tools.cluster_test.api import Api
        from tools.cluster_test.run import provisioned_volumes, site
        from verify.render import load

        objects = load((self.plan_dir / "cluster.yaml").read_text())
        groups, runtime_classes = site(self.test.name, objects, stack_file=self.plan_file)
        storage = site_storage_classes(objects)
        api = Api(self.cluster)
        api.discover()
        for node in kwok_nodes.node_objects(groups):
            self._apply(api, node)
        for name, handler in sorted(runtime_classes.items()):
            self._apply(api, {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                              "handler": handler})
        for storage_class in storage:
            self._apply(api, storage_class.obj)
        for _claim, volume in provisioned_volumes([*objects, *storage]):
            self._apply(api, volume.obj)
        self.cluster.kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=60s")

    @staticmethod
    def _apply(api, obj: dict[str, Any]) -> None:
        message = api.apply(obj)
        if message:
            raise RuntimeError(f"the site's {obj['kind']} {obj['metadata']['name']} refused: {message}")

    def objects(self) -> set[str]:
        """Every object in the cluster, as `Kind namespace/name` (NOISE left out)."""
        listing = self.cluster.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
        found = json.loads(self.cluster.kubectl("get", ",".join(listing), "-A", "-o", "json").stdout)["items"]
        out = set()
        for item in found:
            if item["kind"] in NOISE:
                continue
            meta = item["metadata"]
            out.add(f"{item['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " "))
        return out

    # --- the project and its state ---------------------------------------------------------------------------
    @property
    def stack_file(self) -> Path:
        return self.work / "stacks" / f"Pulumi.{self.test.name}.yaml"

    @property
    def plan_dir(self) -> Path:
        return ROOT / "build" / "plan" / self.test.name

    def project(self) -> None:
        """The project folder the CLI runs in: the repository's entries as symlinks, so that every path the program
        and the provider resolve against the project folder (vendored charts and manifests: the Helm release's
        `chart` is a relative path, resolved by the provider in its working directory, the project folder) is
        the repository's, build/ included: the program writes derived operator manifests under ROOT/build and
        hands the provider their project-relative paths); and a stacks/ folder of its own holding only the test
        stack's file (stackConfigDir)."""
        self.work.mkdir(parents=True, exist_ok=True)
        for entry in ROOT.iterdir():
            if entry.name != "stacks":
                (self.work / entry.name).symlink_to(entry)
        (self.work / "stacks").mkdir()
        for entry in (ROOT / "stacks").iterdir():
            if not entry.name.startswith("Pulumi."):
                (self.work / "stacks" / entry.name).symlink_to(entry)
        backend = self.state / "backend"
        backend.mkdir(parents=True, exist_ok=True)
        self.report["checksums_sha256"] = pulumi_home.checksums(pulumi_home.install(self.home))
        self.env = pulumi_home.environment(self.home, backend)
        self.cli("stack", "init", self.test.name)
        salt = (yaml.safe_load(self.stack_file.read_text()) or {}).get("encryptionsalt")
        self.write_config(derive(self.test), salt)
        for key in self.test.secrets:
            value = self.cluster.admin.read_text() if key == "kubeconfig" else "up-test-throwaway"
            self.cli("config", "set", "--secret", f"gtp:{key}", value)

    def write_config(self, config: dict[str, Any], salt: str | None = None) -> None:
        """The stack file with `config`, keeping the salt and the secrets' ciphertexts the CLI wrote."""
        current = yaml.safe_load(self.stack_file.read_text()) if self.stack_file.exists() else {}
        current = current or {}
        secrets = {key.split(":", 1)[1]: value["secure"] for key, value in (current.get("config") or {}).items()
                   if isinstance(value, dict) and set(value) == {"secure"}}
        self.stack_file.write_text(stack_file_text(config, salt or current.get("encryptionsalt"), secrets))

    def cli(self, *args: str) -> str:
        done = subprocess.run([str(self.home / "bin" / "pulumi"), *args, "--non-interactive"], cwd=self.work,
                              env={**os.environ, **self.env}, capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            raise StepFailed(f"pulumi {' '.join(args[:2])}: {done.stderr.strip()[-3000:]}")
        return done.stdout

    def step(self, label: str, op: str, **options: Any) -> dict[str, Any]:
        """One CLI command in its own process (tools/up_test/step.py); its result, also kept in the report."""
        out = self.state / "steps" / f"{label}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        spec = {"work_dir": str(self.work), "stack": self.test.name, "op": op, "env": self.env, "out": str(out),
                **options}
        spec_file = out.with_suffix(".spec.json")
        spec_file.write_text(json.dumps(spec))
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "tools.up_test.step", str(spec_file)], cwd=ROOT,
                                   start_new_session=True)
        try:
            process.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        finally:
            # The CLI and its provider plugins are the step's children: nothing of a step outlives it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        seconds = round(time.monotonic() - started, 1)
        result = json.loads(out.read_text()) if out.exists() else {"ok": False, "error": "the step wrote nothing"}
        self.report["timings_s"][label] = seconds
        self.report["steps"][label] = {k: v for k, v in result.items() if k not in ("stdout",)}
        outcome = "ok" if result.get("ok") else "failed" if options.get("plant") else "FAILED"
        self.log(f"up-test: {self.test.name}: {label}: {outcome} in {seconds} s "
                 f"{json.dumps(result.get('summary', {}), sort_keys=True)}")
        return result

    # --- offline plans (the mocks) ---------------------------------------------------------------------------
    @property
    def plan_file(self) -> Path:
        return self.plan_dir / f"Pulumi.{self.test.name}.yaml"

    def offline_plan(self, config: dict[str, Any]) -> dict[str, Any]:
        """`make plan` of the test stack with `config` (secrets as the plan's placeholders) into build/plan/<stack>/:
        resources.json's document."""
        from verify.plan import plan_one

        self.plan_dir.mkdir(parents=True, exist_ok=True)
        self.plan_file.write_text(stack_file_text(config, secrets={key: f"v1:placeholder-{key}"
                                                                   for key in self.test.secrets}))
        status = plan_one(self.test.name, stack_file=self.plan_file, quiet=True)
        if status == 2:
            raise StepFailed(f"the offline plan refused the test stack's config ({self.plan_file})")
        return json.loads((self.plan_dir / "resources.json").read_text())

    # --- the sequence ----------------------------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        started = time.monotonic()
        timings = self.report["timings_s"]
        self.cluster.clean()
        shutil.rmtree(self.state, ignore_errors=True)
        base_plan = self.offline_plan(derive(self.test))
        timings["offline plan"] = round(time.monotonic() - started, 1)
        self.cluster.start()
        self.site()
        baseline = self.objects()
        timings["cluster and site"] = round(time.monotonic() - started - timings["offline plan"], 1)
        self.project()
        self.require(self.step("preview", "preview"), "preview")
        up = self.require(self.step("up", "up"), "up")
        found = differences.compare(base_plan, self.exported())
        self.report["mock_vs_real"] = differences.summary(found)
        self.require(self.step("up-no-change", "up", expect_no_changes=True), "the second up (no change)")
        runner = pulumi_home.policy_runner(self.home, ROOT / "policy", Path(sys.executable))
        policy = {"policy_packs": [str(runner)],
                  "policy_pack_configs": [str(self.plan_dir / "policy-pack-config.json")]}
        self.require(self.step("preview-policy", "preview", **policy), "preview with the policy pack")
        self.refuse(self.step("preview-policy-planted", "preview", plant="policy-violation", **policy),
                    "the preview with a planted policy violation", needle="k8s-no-host-namespaces")
        config, plan = derive(self.test), base_plan
        self.report["changes"] = []
        for index, (key, value) in enumerate(self.test.changes, 1):
            config = with_change(config, (key, value))
            head_plan = self.offline_plan(config)
            self.write_config(config)
            preview = self.require(self.step(f"preview-change-{index}", "preview"), f"the preview of change {index}")
            self.report["changes"].append({"key": key, "value": value,
                                           **compare_change(plan, head_plan, preview["steps"])})
            self.require(self.step(f"up-change-{index}", "up"), f"the up with change {index}")
            plan = head_plan
        planted = self.refuse(self.step("up-planted-change", "up", expect_no_changes=True, plant="changing-input"),
                              "the no-change up with an input planted that changes on every run",
                              needle="no changes were expected")
        self.report["planted_change_steps"] = sorted({f"{s['op']} {s['type']}" for s in planted["steps"]
                                                      if s["op"] != "same"})
        self.require(self.step("destroy", "destroy"), "destroy")
        self.report["left_after_destroy"] = self.left_behind(baseline)
        self.report["outputs"] = up.get("outputs", {})
        timings["total"] = round(time.monotonic() - started, 1)
        problems = [d.line() for d in found if d.kind == differences.UNEXPLAINED]
        problems += [f"change {change['key']} = {change['value']!r}: the real preview is not what `make plan-diff` "
                     f"predicts: {change['real']} vs {change['predicted']}"
                     for change in self.report["changes"] if not change["agree"]]
        if self.report["planted_change_steps"] != ["update kubernetes:core/v1:Namespace"]:
            problems.append("the planted change's up changed more than the Namespaces it touched: "
                            f"{self.report['planted_change_steps']}")
        problems += [f"left after destroy: {left}" for left in self.report["left_after_destroy"]]
        self.report["problems"] = problems
        return self.report

    def require(self, result: dict[str, Any], what: str) -> dict[str, Any]:
        if not result.get("ok"):
            raise StepFailed(f"{what} failed:\n{result.get('error', '')}")
        return result

    def refuse(self, result: dict[str, Any], what: str, needle: str) -> dict[str, Any]:
        """A step that must fail, for the reason `needle` names (a planted mistake the check exists to catch)."""
        if result.get("ok"):
            raise StepFailed(f"{what} passed: the check does not catch what was planted")
        if needle not in result.get("error", ""):
            raise StepFailed(f"{what} failed, but not naming {needle!r}:\n{result.get('error', '')}")
        return result

    def exported(self) -> dict[str, Any]:
        """The engine's state: `pulumi stack export` (each resource's inputs, as the provider got them)."""
        return json.loads(self.cli("stack", "export"))

    def left_behind(self, baseline: set[str], timeout: float = 90.0) -> list[str]:
        """Objects that were not in the baseline, once the garbage collector and the namespaces' finalizers had
        their time."""
        deadline = time.monotonic() + timeout
        while True:
            left = sorted(self.objects() - baseline)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(2)


def site_storage_classes(objects: list[Any]) -> list[Any]:
    """The StorageClasses an adopted cluster's site already has: each one a claim of the stack names that the
    stack's own objects do not create (an edge site's `nfs-client`), with a stand-in provisioner; the harness binds
    each claim of it to a PersistentVolume, as the site's driver would."""
    from verify.render import ClusterObject

    created = {item.name for item in objects if item.kind == "StorageClass"}
    named = {str((item.obj.get("spec") or {}).get("storageClassName") or "") for item in objects
             if item.kind == "PersistentVolumeClaim"}
    return [ClusterObject(source="up-test harness (the site's storage class)", obj={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "site-storage.up-test.gtp.dev", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        for name in sorted(named - created - {""})]


def compare_change(base: dict[str, Any], head: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """`make plan-diff`'s prediction (verify/plan_diff.py PlanDiff) against the real preview's steps: per URN
    created, deleted, updated, replaced, or replaced with the old one deleted first (the engine's
    `delete-replaced` step before its `create-replacement`), vs the engine's."""
    from verify.plan_diff import PlanDiff

    diff = PlanDiff(base, head)
    predicted = {**dict.fromkeys(diff.added, "create"), **dict.fromkeys(diff.removed, "delete"),
                 **{urn: "update" for urn, _ in diff.changed}}
    for urn in diff.replaced:
        predicted[urn] = REPLACE_DELETE_FIRST if urn in diff.delete_first else "replace"
    ops: dict[str, list[str]] = {}
    for step in steps:
        if step["op"] not in ("same", "read", "refresh"):
            ops.setdefault(step["urn"], []).append(step["op"])
    real = {}
    for urn, seen in ops.items():
        replaced = [op for op in seen if op in ("replace", "create-replacement", "delete-replaced")]
        if not replaced:
            real[urn] = seen[0]
        elif "delete-replaced" in seen and ("create-replacement" not in seen or
                                            seen.index("delete-replaced") < seen.index("create-replacement")):
            real[urn] = REPLACE_DELETE_FIRST
        else:
            real[urn] = "replace"
    return {"predicted": predicted, "real": real, "agree": predicted == real}


REPLACE_DELETE_FIRST = "replace, delete first"


def main(stacks: list[str], log=print) -> int:
    status = 0
    for name in stacks or sorted(STACKS):
        test = UpTest(STACKS[name], log=log)
        try:
            report = test.execute()
        except (StepFailed, RuntimeError) as error:
            log(f"up-test: {name}: {error}")
            report, status = test.report, 1
        finally:
            left = test.cluster.stop()
        report["left_processes"] = left
        (test.state / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
        for kind, entry in report.get("mock_vs_real", {}).items():
            log(f"up-test: {name}: mock vs real: {len(entry['differences'])} x {kind}")
        problems = [*report.get("problems", []), *(f"left behind: {item}" for item in left)]
        for problem in problems:
            log(f"up-test: {name}: PROBLEM: {problem}")
        status = 1 if problems else status
        log(f"up-test: {name}: {'passed' if status == 0 else 'FAILED'}; phases (s): "
            f"{json.dumps(report['timings_s'])}; report {test.state / 'report.json'}")
    return status
