"""The GitHub Actions runner of each stack, from its declared deployer (`cluster.deployer.runnerLabels`).

``python -m tools.deployer dev prod`` prints, for `$GITHUB_OUTPUT`, one ``<stack>=<JSON labels>`` line per stack
and ``matrix=<JSON>`` (``{"include": [{"stack": ..., "runs-on": [...], "region": ...}, ...]}``), so a workflow's
jobs run where the stack's Kubernetes API can be reached: ``runs-on: ${{ fromJSON(needs.runners.outputs.dev) }}``.
``<stack>_region=<region>`` lines carry the stack's `region`: the AWS credentials of a job are for its stack's
region, not one repository-wide `AWS_REGION` (dev and prod live in different regions).
``--template bench`` reads `stacks/templates/bench.yaml` instead (the reaper runs where bench stacks are deployed).

Each stack file is parsed and validated exactly as the program does (a deployer that can't reach the API is
already a config error). ``--require-real`` (the workflows that deploy, preview and destroy) also fails while a
label is a placeholder: a job on a label no runner has would wait in the queue instead of failing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stack_config import ConfigError
from stack_config.placeholders import EXAMPLE_LABEL
from stack_config.source import load_yaml_file
from stages.config import parse_stack_config
from verify.plan import ROOT, stack_config

TEMPLATES = Path("stacks") / "templates"


class DeployerError(Exception):
    """A stack whose runner can't be named; the message says which key to fix."""


def stack_runner(stack: str, root: Path = ROOT) -> tuple[list[str], str]:
    """The stack's runner labels and its region."""
    project, config, secrets = stack_config(root, stack)
    raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{project}:")}
    parsed = parse_stack_config(raw, project=project, stack=stack, secret_keys=[s.split(":", 1)[1] for s in secrets])
    deployer = parsed.cluster.deployer
    if deployer is None or not deployer.runner_labels:
        raise DeployerError(f"{stack}: cluster.deployer.runnerLabels is not set: CI has no runner to run it on")
    return list(deployer.runner_labels), parsed.region


def template_region(name: str, root: Path = ROOT) -> str:
    """The template's `gtp:region` as written (every stack made from it deploys there)."""
    path = root / TEMPLATES / f"{name}.yaml"
    region = ((load_yaml_file(path) or {}).get("config") or {}).get("gtp:region")
    if not isinstance(region, str):
        raise DeployerError(f"{path.relative_to(root)}: gtp:region is not set")
    return region


def template_labels(name: str, root: Path = ROOT) -> list[str]:
    """A template is not a stack (its values are filled in by `tools.bench_stack`): read the labels as written."""
    path = root / TEMPLATES / f"{name}.yaml"
    document = load_yaml_file(path)
    try:
        labels = document["config"]["gtp:cluster"]["deployer"]["runnerLabels"]
    except (KeyError, TypeError):
        raise DeployerError(f"{path.relative_to(root)}: gtp:cluster.deployer.runnerLabels is not set") from None
    if not isinstance(labels, list) or not labels or not all(isinstance(label, str) for label in labels):
        raise DeployerError(f"{path.relative_to(root)}: gtp:cluster.deployer.runnerLabels must be a list of labels, "
                            f"not {labels!r}")
    return labels


def outputs(labels: dict[str, list[str]], regions: dict[str, str]) -> list[str]:
    """`$GITHUB_OUTPUT` lines: labels and region per stack, and the matrix of all of them."""
    lines = [f"{name}={json.dumps(value)}" for name, value in labels.items()]
    lines += [f"{name}_region={regions[name]}" for name in labels]
    matrix = {"include": [{"stack": name, "runs-on": value, "region": regions[name]}
                          for name, value in labels.items()]}
    return [*lines, f"matrix={json.dumps(matrix)}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.deployer", description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", nargs="*", help="stacks (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--template", action="append", default=[], help="a template in stacks/templates/")
    parser.add_argument("--require-real", action="store_true",
                        help="fail while any label is a placeholder (an example label no runner carries)")
    args = parser.parse_args(argv)
    if not args.stacks and not args.template:
        parser.error("name at least one stack or --template")
    labels: dict[str, list[str]] = {}
    regions: dict[str, str] = {}
    try:
        for stack in args.stacks:
            labels[stack], regions[stack] = stack_runner(stack, ROOT)
        for template in args.template:
            labels[template], regions[template] = template_labels(template, ROOT), template_region(template, ROOT)
    except (ConfigError, DeployerError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.require_real:
        stand_ins = [f"{name}: {label!r}" for name, values in labels.items() for label in values
                     if EXAMPLE_LABEL.search(label)]
        if stand_ins:
            print("error: placeholder runner label(s) — register a runner that can reach the stack's API and put its "
                  f"label in cluster.deployer.runnerLabels: {', '.join(stand_ins)}", file=sys.stderr)
            return 2
    print("\n".join(outputs(labels, regions)))
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
