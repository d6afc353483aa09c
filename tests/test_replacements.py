"""The replacement table covers every custom resource type a committed stack registers."""

from __future__ import annotations

import json

from tests.conftest import ROOT
from verify.plan import known_stacks
from verify.replacements import REPLACE_ON, forcing


def _golden_types() -> set[str]:
    types = set()
    for stack in known_stacks(ROOT):
        path = ROOT / "tests" / "golden" / stack / "resources.json"
        assert path.exists(), f"no golden plan for stack {stack}"
        types |= {r["type"] for r in json.loads(path.read_text())["resources"] if r["custom"]}
    return types


def test_every_type_in_any_plan_has_an_entry() -> None:
    types = _golden_types()
    assert "aws:eks/nodeGroup:NodeGroup" in types and "docker:index/service:Service" in types
    missing = sorted(types - set(REPLACE_ON))
    assert not missing, f"add these types to verify/replacements.py REPLACE_ON: {missing}"


def test_node_group_instance_types_force_replacement() -> None:
    assert forcing("aws:eks/nodeGroup:NodeGroup", ["inputs.instanceTypes[0]", "inputs.scalingConfig.maxSize"]) \
        == ["instanceTypes[0]"]
    assert forcing("aws:ec2/launchTemplate:LaunchTemplate", ["inputs.userData"]) == []
    assert forcing("kubernetes:core/v1:ConfigMap", ["inputs.metadata.namespace"]) == ["metadata.namespace"]
    # a prefix match is on path segments, not characters
    assert forcing("aws:iam/role:Role", ["inputs.namePrefixx", "inputs.pathology"]) == []
