"""What Kueue does on admission (issue 26): flavors are matched on the pod's nodeSelector *and* required node
affinity restricted to the flavor's label keys, the flavor's own tolerations count, and the admitted pods carry the
flavor's node labels and tolerations before they are scheduled (verify/simulate/queue.py)."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import plan_stack
from verify import render as gtp_cluster
from verify.render import ClusterObject
from verify.simulate import queue, simulate

GROUP = "gtp.dev/node-group"


def _pod(expressions: list[list[dict[str, Any]]] | None = None, selector: dict[str, str] | None = None,
         tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if expressions is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in expressions]}}}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"spec": spec}


def _flavor(labels: dict[str, str], taints: list[dict[str, str]] | None = None,
            tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"spec": {"nodeLabels": labels, "nodeTaints": taints or [], "tolerations": tolerations or []}}


def test_required_node_affinity_decides_the_flavor_like_the_node_selector() -> None:
    pod = _pod([[{"key": GROUP, "operator": "In", "values": ["a100"]}]])
    assert queue._flavor_selector_misses(_flavor({GROUP: "a100"}), pod) == []
    misses = queue._flavor_selector_misses(_flavor({GROUP: "h100"}), pod)
    assert misses and "flavor nodeLabels {'gtp.dev/node-group': 'h100'}" in misses[0]
    assert queue._flavor_selector_misses(_flavor({GROUP: "h100"}), _pod(selector={GROUP: "a100"}))


def test_only_the_flavors_keys_count_and_an_emptied_term_matches_any_flavor() -> None:
    other_key = _pod([[{"key": "zone", "operator": "In", "values": ["b"]}]])
    assert queue.flavor_selector(other_key, {GROUP}) == {"spec": {}}
    assert queue._flavor_selector_misses(_flavor({GROUP: "h100"}), other_key) == []
    either = _pod([[{"key": GROUP, "operator": "In", "values": ["a100"]}],
                   [{"key": "zone", "operator": "In", "values": ["b"]}]])
    assert queue._flavor_selector_misses(_flavor({GROUP: "h100"}), either) == []


def test_the_flavors_own_tolerations_tolerate_its_taints() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert queue._flavor_selector_misses(_flavor({GROUP: "a"}, [taint]), _pod())[0].startswith("untolerated")
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert queue._flavor_selector_misses(_flavor({GROUP: "a"}, [taint], [toleration]), _pod()) == []


def test_admitted_pods_carry_the_flavors_labels_and_tolerations() -> None:
    toleration = {"key": "dedicated", "operator": "Exists"}
    injected = queue.inject_flavor(_pod(selector={"a": "1"}), _flavor({GROUP: "h100"}, tolerations=[toleration]))
    assert injected["spec"]["nodeSelector"] == {"a": "1", GROUP: "h100"}
    assert injected["spec"]["tolerations"] == [toleration]


def test_a_flavor_label_no_node_carries_is_caught_after_injection() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    assert simulate(plan, objects)["ok"]
    changed = []
    for item in objects:
        if item.kind == "ResourceFlavor":
            body = copy.deepcopy(item.obj)
            body["spec"]["nodeLabels"]["gtp.dev/rack"] = "r1"
            item = ClusterObject(item.source, body)
        changed.append(item)
    report = simulate(plan, changed)
    scheduled = report["checks"]["scheduled"]["findings"]
    assert any("gtp.dev/rack" in f["rule"] for f in scheduled), scheduled


def test_a_quota_at_or_under_what_the_daemonsets_leave_passes_and_more_fails() -> None:
    plan = plan_stack("dev")
    objects = gtp_cluster.render_cluster(plan)
    assert simulate(plan, objects)["checks"]["queued"]["findings"] == []
    raised = []
    for item in objects:
        if item.kind == "ClusterQueue":
            body = copy.deepcopy(item.obj)
            for flavor in body["spec"]["resourceGroups"][0]["flavors"]:
                for resource in flavor["resources"]:
                    if resource["name"] == "cpu":
                        resource["nominalQuota"] = "7840m"  # the allocatable of 2 g6.xlarge, DaemonSets included
            item = ClusterObject(item.source, body)
        raised.append(item)
    findings = simulate(plan, raised)["checks"]["queued"]["findings"]
    assert any("its DaemonSets take 380m per node" in f["rule"] for f in findings), findings
