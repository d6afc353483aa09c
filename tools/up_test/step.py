"""One real Pulumi CLI command on a test stack, in its own Python process: `python -m tools.up_test.step SPEC`.

The CLI (`pulumi preview|up|destroy`, built from github.com/pulumi/pulumi/pkg/v3) runs the project's own
`__main__.py` through the Python SDK's Automation API as an *inline* program: the SDK serves the language runtime
in this process (pulumi/automation/_server.py `LanguageServer`, Pulumi's own code) and passes its address to the
CLI as `--client`, which then runs the program there instead of loading a `pulumi-language-python` plugin
(pkg/cmd/pulumi/operations/io.go `readProjectForUpdate` and pkg/engine/plugin_host.go `clientLanguageRuntimeHost`
at v3.274.0). That plugin is the one part of the real path not obtainable here (docs/real-pulumi.md). Everything
else is the real engine: the resource monitor, diffs, ordering, the provider plugin, the state file, the policy
analyzer.

SPEC is a JSON file: {"work_dir", "stack", "op": "preview"|"up"|"destroy", "env": {...},
"expect_no_changes": bool, "policy_packs": [...], "policy_pack_configs": [...], "plant": PLANTS key or null,
"out": path}. The result (the
command's summary, every resource step the engine reported, stdout) is written to `out` as JSON.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

PLANTED_ANNOTATION = "up-test.gtp.dev/planted-at"
PLANTS = {
    "changing-input": "every Namespace gets an annotation holding the current time: an input that changes on every "
                      "run, the class of bug the no-change `up` must catch (a timestamp in a build arg)",
    "policy-violation": "every Job's pod spec sets hostNetwork: true, which the pack's k8s-no-host-namespaces "
                        "forbids outside the device-plugin namespace",
}
"""Mistakes the harness plants into the program (a stack transformation, nothing committed changes) to show that
the check meant to catch each one fails: planted → why."""


def _merge(value: Any, update: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """`update` applied to a mapping input, whether given plainly or as an Output."""
    if isinstance(value, dict) or value is None:
        return update(dict(value or {}))
    import pulumi

    return pulumi.Output.from_input(value).apply(lambda plain: update(dict(plain or {})))


def planted(plant: str, type_: str, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The resource's inputs with `plant` (a PLANTS key) applied, or None where it does not touch this resource."""
    if plant == "changing-input" and type_ == "kubernetes:core/v1:Namespace":
        stamp = str(time.time_ns())
        return {**props, "metadata": _merge(props.get("metadata"), lambda meta: {
            **meta, "annotations": {**(meta.get("annotations") or {}), PLANTED_ANNOTATION: stamp}})}
    if plant == "policy-violation" and type_ == "kubernetes:batch/v1:Job":
        def host_network(spec: dict[str, Any]) -> dict[str, Any]:
            template = dict(spec.get("template") or {})
            template["spec"] = _merge(template.get("spec"), lambda pod: {**pod, "hostNetwork": True})
            return {**spec, "template": template}
        return {**props, "spec": _merge(props.get("spec"), host_network)}
    if plant not in PLANTS:
        raise ValueError(f"unknown plant {plant!r}; known: {', '.join(PLANTS)}")
    return None


def program(work_dir: Path, plant: str | None) -> Callable[[], None]:
    """The project's program, as `pulumi up` runs it: in the project folder `work_dir` (the test stack's, whose
    entries are the repository's), `__main__.py` as __main__; with the mistake `plant` (a PLANTS key) planted."""

    def run_program() -> None:
        os.chdir(work_dir)
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        if plant is not None:
            import pulumi

            mistake = plant

            def transformation(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
                props = planted(mistake, args.type_, dict(args.props))
                return None if props is None else pulumi.ResourceTransformationResult(props, args.opts)

            # Every resource of the stack inherits its parents' transformations: all of them are constructed after
            # this line.
            pulumi.runtime.register_stack_transformation(transformation)
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    return run_program


def _steps(events: list[Any]) -> list[dict[str, Any]]:
    """The engine's resource steps (`ResourcePreEvent`: what it decided per resource, before doing it), in the order
    it reported them."""
    steps = []
    for event in events:
        pre = getattr(event, "resource_pre_event", None)
        if pre is None or pre.metadata is None:
            continue
        meta = pre.metadata
        steps.append({"urn": meta.urn, "type": meta.type, "op": getattr(meta.op, "value", str(meta.op)),
                      "diffs": list(meta.diffs or []),
                      "replace_keys": [key for key, diff in (meta.detailed_diff or {}).items()
                                       if "replace" in str(getattr(diff.diff_kind, "value", diff.diff_kind))]})
    return steps


def run(spec: dict[str, Any]) -> dict[str, Any]:
    from pulumi import automation as auto

    os.environ.update(spec["env"])
    workspace = auto.LocalWorkspace(work_dir=spec["work_dir"],
                                    program=program(Path(spec["work_dir"]), spec.get("plant")),
                                    pulumi_command=auto.PulumiCommand(root=str(Path(spec["env"]["PULUMI_HOME"]))),
                                    env_vars=spec["env"])
    stack = auto.Stack.select(spec["stack"], workspace)
    events: list[Any] = []
    output: list[str] = []
    started = time.monotonic()
    result: dict[str, Any] = {"op": spec["op"]}
    try:
        if spec["op"] == "preview":
            done = stack.preview(on_event=events.append, on_output=output.append, diff=True,
                                 expect_no_changes=spec.get("expect_no_changes", False),
                                 policy_packs=spec.get("policy_packs"),
                                 policy_pack_configs=spec.get("policy_pack_configs"))
            result["summary"] = dict(done.change_summary)
        elif spec["op"] == "up":
            done = stack.up(on_event=events.append, on_output=output.append, diff=True,
                            expect_no_changes=spec.get("expect_no_changes", False),
                            policy_packs=spec.get("policy_packs"),
                            policy_pack_configs=spec.get("policy_pack_configs"))
            result["summary"] = dict(done.summary.resource_changes or {})
            result["outputs"] = {key: (None if value.secret else value.value) for key, value in done.outputs.items()}
        elif spec["op"] == "destroy":
            done = stack.destroy(on_event=events.append, on_output=output.append)
            result["summary"] = dict(done.summary.resource_changes or {})
        else:
            raise ValueError(f"unknown op {spec['op']!r}")
        result["ok"] = True
    except auto.errors.CommandError as error:
        result["ok"] = False
        result["error"] = str(error)[-6000:]
    result["seconds"] = round(time.monotonic() - started, 1)
    result["steps"] = _steps(events)
    result["stdout"] = "".join(line if line.endswith("\n") else line + "\n" for line in output)[-20000:]
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    result = run(spec)
    Path(spec["out"]).write_text(json.dumps(result, indent=1) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
