"""Submit a one-off training job through a stack's queue, without adding it to the stack.

    python -m tools.submit --stack dev --workload experiment.yaml --trainer-image <repo>@sha256:<digest> \\
        | kubectl create -f -

`experiment.yaml` is one entry of `gtp:workloads`, in the same schema, keyed by the job's name:

    lr-sweep-3:
      kind: pytorchjob
      nodeGroup: g6
      image: <registry>/<team>/train@sha256:<64 hex>    # or our trainer: model, maxSteps, ...
      command: ["-m", "team.train", "--lr", "3e-4"]

Why a renderer and not a second API: the job is checked by exactly the rules the stack's own workloads pass
(the stack is planned with the entry added, under mocks, with every config rule, the validators and the
whole-cluster simulation), and it is built by the same workload kind from the same pod shape, so it runs as the
stack's jobs do — restricted security context, shm, storage, tolerations, EFA, and the Kueue queue label. It
prints only the objects the entry adds (the job, a TrainJob's runtime, its same-job NetworkPolicy); nothing in
the stack changes, so `pulumi up` never sees or deletes it. `kubectl create` (not `apply`) refuses a name that
already exists rather than changing a running job.

Requires Kueue on the stack (`kueue.enabled`): the queue is what admits a job the stack doesn't declare (the
namespace quota then equals the node groups' capacity, components/training_namespace.py). Kinds whose objects
are more than Kubernetes objects (`scaledjob` creates an SQS queue; `swarm`) can't be submitted this way.

Only what the deployed stack runs: the stack as it stands must install the kind's operators, serve its CRDs and
have its Kueue integration enabled (the kinds of its own workloads and `kueue.submitKinds`); otherwise the
submit is refused, one line per missing part, and prints nothing. Sizes the entry leaves out (`cpu`, `memory`,
`shmSize`, and `gpuResource: shared` on a group that shares its GPUs) are derived from its node group
(stack_config/derived.py `submit_defaults`) and said on stderr.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import pulumi
import yaml

import workload_kinds
from catalog import versions
from components.kueue import CONFIG_KEY, CONFIG_MAP
from stack_config import WorkloadConfig
from stack_config.derived import installed_parts, kueue_enabled, submit_defaults
from stack_config.source import YamlFileError, load_yaml_file
from verify import render as cluster
from verify.plan import COMPUTED, ROOT, plan_and_check, run

SUBMITTABLE = tuple(name for name in workload_kinds.CONFIGURABLE if workload_kinds.KINDS[name].traits.kueue_admits)
"""Kinds Kueue admits (their `kueue_integration`), whose whole workload is Kubernetes objects (ElasticJob: no Kueue
integration)."""


STACKS = ROOT / "stacks"
"""Where the stack files are (`Pulumi.<stack>.yaml`)."""


class SubmitError(Exception):
    """The entry can't be submitted (the message says why and what to do)."""


def _object_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))


def render(stack: str, entry: dict[str, Any], *, trainer_image: str | None = None) -> str:
    """The objects `entry` ({name: workload}) adds to `stack`, as a multi-document YAML for `kubectl create`."""
    if not isinstance(entry, dict) or len(entry) != 1 or not isinstance(next(iter(entry.values())), dict):
        raise SubmitError("the workload file must hold exactly one entry: `<name>: {kind: ..., nodeGroup: ...}`")
    name, workload = next(iter(entry.items()))
    stack_file = STACKS / f"Pulumi.{stack}.yaml"
    if not stack_file.exists():
        raise SubmitError(f"no stack file {stack_file}")
    document = load_yaml_file(stack_file)
    config = document.setdefault("config", {})
    workloads = config.setdefault("gtp:workloads", {})
    if name in workloads:
        raise SubmitError(f"workload {name!r} is one of stack {stack!r}'s own: pick another name")
    kind = workload.get("kind", WorkloadConfig.model_fields["kind"].default)
    if kind not in SUBMITTABLE or (workload.get("autoscaling") or {}).get("mode", "none") != "none":
        raise SubmitError(f"kind {kind!r} with autoscaling can't be submitted: only {', '.join(SUBMITTABLE)} "
                          "without autoscaling (add other kinds to the stack's workloads)")
    if workload.get("image") is None and not trainer_image:
        raise SubmitError("the job runs our trainer: pass --trainer-image <repo>@sha256:<digest> (the stack's "
                          "image: `pulumi stack output imageRef`)")
    if trainer_image:
        # Substituted before planning, so the image goes through every check a stack's own image does (by digest,
        # signed where the policy pack requires it): the stack runs it instead of building one.
        config["gtp:image"] = {**(config.get("gtp:image") or {}), "build": False, "reference": trainer_image}
    # As an apply would run it: a stage that refuses only at apply (an unpinned base image) refuses here too.
    before = _run(stack, document, "as it stands", known_outputs=True)
    if not kueue_enabled(before.config):
        raise SubmitError(f"stack {stack!r} runs no Kueue, so nothing admits a job it doesn't declare (its quota is "
                          "sized for its own workloads): add the job to the stack's workloads instead")
    # What the cluster serves is what the stack as it stands deployed: the variant below would install whatever the
    # entry's kind needs, and `pulumi up` never runs for a submit.
    deployed = Deployed.of(before)
    lacking = deployed.lacks(kind)
    if lacking:
        runnable = [other for other in SUBMITTABLE if not deployed.lacks(other)]
        fix = (f"add a {kind} workload to the stack's workloads or {kind!r} to kueue.submitKinds (pulumi up), or "
               + (f"submit kind {' or '.join(runnable)}, which {stack} runs" if runnable
                  else f"run it elsewhere: {stack} runs no kind a submit can use"))
        raise SubmitError(f"stack {stack!r} as deployed can't run kind {kind!r}: {len(lacking)} problem(s):\n"
                          + "\n".join(f"  - stack {stack!r} {problem}; {fix}" for problem in lacking))
    defaults = submit_defaults(before.config, workload)
    if defaults:
        print(f"submit: {name}: " + ", ".join(f"{key} {value}" for key, value in defaults.items())
              + f" (derived from node group {workload.get('nodeGroup')!r}: its node's share; set them in the file "
                "to choose)", file=sys.stderr)
    workload = {**workload, **defaults}
    workloads[name] = workload
    with tempfile.TemporaryDirectory() as scratch:
        variant = Path(scratch) / f"Pulumi.{stack}.yaml"
        variant.write_text(yaml.safe_dump(document, sort_keys=False))
        # The whole plan of the stack with the job in it: config rules, validators, policy pack and the cluster
        # simulation (admitted, scheduled, queued within the quota, volumes writable), exactly as `make plan`
        # checks it. Its Helm releases are the stack's own, so their renders come from the plan cache.
        try:
            code, after = plan_and_check(stack, stack_file=variant, out=Path(scratch) / "plan", quiet=True,
                                         raise_config_errors=True, write=False)
        except pulumi.RunError as error:  # a ConfigError, or a stage's refusal (e.g. an unpinned base image)
            raise SubmitError(f"stack {stack!r} with workload {name!r} can't be planned: {error}") from None
        if code != 0:
            raise SubmitError(f"stack {stack!r} with workload {name!r} does not plan clean (the lines above say "
                              "why)")
        old = {_object_key(obj) for obj in before.kubernetes_objects()}
        added = [obj for obj in after.kubernetes_objects() if _object_key(obj) not in old]
        # An object the preview knows whole is the object an apply creates, under the same key; one holding a
        # value only an apply knows (another resource's output, or a name computed from one) is planned again
        # as an apply would, so that `kubectl create` gets real values and the keys compare like with like.
        if any(_unknown(obj) for obj in added):
            applied = _run(stack, document, f"with workload {name!r}", variant, known_outputs=True)
            added = [obj for obj in applied.kubernetes_objects() if _object_key(obj) not in old]
    if not added:
        raise SubmitError(f"workload {name!r} adds no Kubernetes object to stack {stack!r}")
    return yaml.safe_dump_all(added, sort_keys=False, default_flow_style=False, width=120)


class Deployed:
    """What a stack's cluster serves as its plan stands: operators installed, CRDs, Kueue integrations enabled."""

    def __init__(self, operators: frozenset[str], crds: set[tuple[str, str]], integrations: list[str]) -> None:
        self.operators, self.crds, self.integrations = operators, crds, integrations

    @classmethod
    def of(cls, plan: Any) -> Deployed:
        objects = cluster.render_cluster(plan)
        crds = {(obj.obj["spec"]["group"], obj.obj["spec"]["names"]["kind"]) for obj in objects
                if obj.kind == "CustomResourceDefinition"}
        integrations: list[str] = []
        for obj in objects:  # the manager's configuration as the derived Kueue manifest carries it
            if obj.kind == "ConfigMap" and obj.name == CONFIG_MAP:
                integrations = list((yaml.safe_load(obj.obj["data"][CONFIG_KEY]).get("integrations") or {})
                                    .get("frameworks") or [])
        return cls(installed_parts(plan.config), crds, integrations)

    def lacks(self, name: str) -> list[str]:
        """What kind `name` needs that the stack lacks, one phrase each (empty: it can run here)."""
        kind = workload_kinds.KINDS[name]
        assert isinstance(kind, workload_kinds.KubernetesWorkloadKind)
        problems = [f"installs no {operator} ({_operator_source(operator)}), which kind {name!r} needs"
                    for operator in sorted(kind.operators - self.operators)]
        for group, crd_kind, crd_name in _kind_crds(kind):
            if (group, crd_kind) not in self.crds:
                problems.append(f"serves no {crd_kind}: its {crd_kind} CRD ({crd_name}) is absent")
        if kind.kueue_integration not in self.integrations:
            problems.append(f"has a Kueue that admits no {kind.kueue_integration} (enabled: "
                            f"{', '.join(self.integrations) or 'none'})")
        return problems


def _operator_source(operator: str) -> str:
    manifest = versions.OPERATOR_MANIFESTS.get(operator)
    return Path(manifest).name if manifest else operator


def _kind_crds(kind: workload_kinds.KubernetesWorkloadKind) -> list[tuple[str, str, str]]:
    """(group, kind, CRD name) of the kind's resource and template kinds, from the manifests of its operators."""
    wanted = {kind.resource_kind, *kind.template_kinds}
    return sorted((obj.obj["spec"]["group"], obj.obj["spec"]["names"]["kind"], obj.name)
                  for operator in kind.operators if operator in versions.OPERATOR_MANIFESTS
                  for obj in cluster.render_operator(versions.OPERATOR_MANIFESTS[operator])
                  if obj.kind == "CustomResourceDefinition" and obj.obj["spec"]["names"]["kind"] in wanted)


def _unknown(value: Any) -> bool:
    """Whether a planned value holds a preview's marker for what only an apply knows."""
    if isinstance(value, dict):
        return any(_unknown(item) for item in value.values())
    if isinstance(value, list):
        return any(_unknown(item) for item in value)
    return value == COMPUTED


def _run(stack: str, document: dict[str, Any], what: str, stack_file: Path | None = None,
         known_outputs: bool = False) -> Any:
    """The stack's plan (`document`, or its file; as an apply would see it with `known_outputs`), or a SubmitError
    saying why the program refused."""
    with tempfile.TemporaryDirectory() as scratch:
        if stack_file is None:
            stack_file = Path(scratch) / f"Pulumi.{stack}.yaml"
            stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        try:
            return run(stack, stack_file=stack_file, known_outputs=known_outputs)
        except pulumi.RunError as error:  # a ConfigError, or a stage's refusal (e.g. an unpinned base image)
            raise SubmitError(f"stack {stack!r} {what} can't be planned: {error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.submit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--workload", required=True, type=Path, help="YAML file: one `<name>: {...}` entry")
    parser.add_argument("--trainer-image", help="our trainer's image by digest (jobs without their own `image`)")
    args = parser.parse_args(argv)
    try:
        entry = load_yaml_file(args.workload)
        sys.stdout.write(render(args.stack, entry, trainer_image=args.trainer_image))
    except (SubmitError, OSError, YamlFileError) as error:
        print(f"submit: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
