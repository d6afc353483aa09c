"""Offline runner: the same rules over the plan the lead's `make plan` writes, no Pulumi engine needed.

    python -m policy.gtp_policy.offline build/plan/<stack>/resources.json \
        --facts build/plan/<stack>/policy-facts.json
        → prints one line per violation; exit 1 if any mandatory violation, 2 on unreadable input.

    python -m policy.gtp_policy.offline --pack-config build/plan/<stack>/policy-facts.json
        → prints the `--policy-pack-config` JSON for `pulumi preview --policy-pack policy` (facts per policy).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .graph import StackIndex
from .model import Facts, Rule, Violation, format_message
from .registry import POLICIES


def _facts(facts: Facts | Mapping[str, Any]) -> Facts:
    return facts if isinstance(facts, Facts) else Facts.from_mapping(facts)


def run_rule(rule: Rule, resources: Sequence[Mapping[str, Any]], facts: Facts,
             index: StackIndex | None = None) -> list[Violation]:
    violations = []
    if rule.scope == "resource":
        for record in resources:
            if not rule.judges(record):
                continue
            for finding in rule.check(record, facts) or ():
                violations.append(Violation(rule.name, record.get("urn"),
                                            format_message(rule.name, record, finding), rule.enforcement))
    else:
        if not rule.upstream:  # the stack without the objects of upstream manifests (Rule.upstream)
            index = StackIndex([record for record in resources if rule.judges(record)])
        for finding in rule.check(index or StackIndex(resources), facts) or ():
            urn = finding.record.get("urn") if finding.record is not None else None
            violations.append(Violation(rule.name, urn, format_message(rule.name, finding.record, finding),
                                        rule.enforcement))
    return violations


def run_policies(resources: list[dict], facts: Facts | Mapping[str, Any],
                 policies: Iterable[Rule] = POLICIES) -> list[Violation]:
    """Every violation of every policy, in policy order then resource order."""
    resolved = _facts(facts)
    index = StackIndex(resources)
    violations: list[Violation] = []
    for rule in policies:
        violations.extend(run_rule(rule, resources, resolved, index))
    return violations


def pack_config(facts: Facts | Mapping[str, Any], policies: Iterable[Rule] = POLICIES) -> dict:
    """The `--policy-pack-config` document: the engine hands config to each policy by its name."""
    resolved = _facts(facts).to_mapping()
    return {rule.name: dict(resolved) for rule in policies}


def load_resources(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    resources = data.get("resources") if isinstance(data, Mapping) else data
    if not isinstance(resources, list):
        raise ValueError(f"{path}: expected {{\"resources\": [...]}}")
    return resources


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policy.gtp_policy.offline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("resources", nargs="?", type=Path, help="build/plan/<stack>/resources.json")
    parser.add_argument("--facts", type=Path, help="build/plan/<stack>/policy-facts.json")
    parser.add_argument("--pack-config", type=Path, metavar="FACTS",
                        help="print the --policy-pack-config JSON for these facts and exit")
    args = parser.parse_args(argv)
    try:
        if args.pack_config:
            print(json.dumps(pack_config(json.loads(args.pack_config.read_text())), indent=2, sort_keys=True))
            return 0
        if args.resources is None or args.facts is None:
            parser.error("resources.json and --facts are required")
        resources = load_resources(args.resources)
        facts = Facts.from_mapping(json.loads(args.facts.read_text()))
    except (OSError, ValueError) as error:
        print(f"policy: {error}", file=sys.stderr)
        return 2
    violations = run_policies(resources, facts)
    for violation in violations:
        print(violation)
    mandatory = sum(v.enforcement == "mandatory" for v in violations)
    print(f"policy: {len(POLICIES)} policies, {len(resources)} resources, stack {facts.stack!r}: "
          f"{mandatory} mandatory and {len(violations) - mandatory} advisory violation(s)",
          file=sys.stderr)
    return 1 if mandatory else 0


if __name__ == "__main__":
    sys.exit(main())
