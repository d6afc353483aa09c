"""The GPU readiness gate's check: wait until every node group advertises the GPU capacity it should.

This file is shipped verbatim in a ConfigMap and run inside the cluster as ``python3 /gate/check.py
/gate/expectations.json`` by the `GpuReadiness` Job, with the training image. It must therefore use the
Python 3 standard library only (no kubernetes client, no yaml) and keep working on any Python >= 3.8.

Expectations (written by `components.gpu_readiness.readiness_expectations`) look like::

    {"timeoutSeconds": 900, "pollSeconds": 10,
     "groups": [{"name": "h100", "selector": {"gtp.dev/node-group": "h100"}, "minNodes": 2,
                 "resources": {"nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 64}}],
     "skipped": [{"name": "a100", "reason": "minSize is 0: no node is guaranteed to exist"}]}

A group is ready when its Ready nodes (matching every selector label) together advertise at least the
expected amount of every resource in `status.allocatable`. `missing()` is the pure decision and is unit
tested with fake node lists; `main()` polls the API server with the pod's service-account token.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Mapping

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _labels_match(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def _ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _quantity(value: Any) -> int:
    """Extended resources (GPUs, EFA devices) are whole numbers; anything unreadable counts as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def missing(nodes: List[Mapping[str, Any]], expectations: Mapping[str, Any]) -> List[str]:
    """What is not advertised yet, one line per (node group, resource); empty when every group is ready."""
    problems = []
    for group in expectations.get("groups", []):
        selector = group.get("selector") or {}
        matching = [node for node in nodes if _labels_match(node, selector) and _ready(node)]
        where = ",".join(f"{key}={value}" for key, value in sorted(selector.items()))
        for resource, wanted in sorted((group.get("resources") or {}).items()):
            have = sum(_quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource))
                       for node in matching)
            if have < wanted:
                problems.append(f"node group '{group['name']}' ({where}): {resource} is {have} of {wanted} "
                                f"expected on {len(matching)} Ready node(s) (minSize {group.get('minNodes')})")
    return problems


def likely_cause(nodes: List[Mapping[str, Any]], expectations: Mapping[str, Any]) -> str:
    """The stack's hint (`noGpuHint`) when some group has Ready nodes that advertise no GPU at all: the nodes are
    there, so the device plugin registered nothing (on k3s: it ran without the NVIDIA runtime)."""
    for group in expectations.get("groups", []):
        selector = group.get("selector") or {}
        matching = [node for node in nodes if _labels_match(node, selector) and _ready(node)]
        gpu = [name for name in group.get("resources") or {} if name.startswith("nvidia.com/gpu")]
        if matching and gpu and all(
                _quantity(((node.get("status") or {}).get("allocatable") or {}).get(name)) == 0
                for node in matching for name in gpu):
            return (f"likely cause: node group '{group['name']}' has {len(matching)} Ready node(s) and no GPU "
                    f"advertised: {expectations.get('noGpuHint') or 'the device plugin registered nothing'}")
    return ""


def skipped_lines(expectations: Mapping[str, Any]) -> List[str]:
    return [f"node group '{entry['name']}' not checked: {entry['reason']}" for entry in expectations.get("skipped", [])]


def list_nodes() -> List[Dict[str, Any]]:
    """GET /api/v1/nodes with the mounted service-account token, verified against the cluster CA."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = f"[{host}]"  # IPv6 service address
    with open(os.path.join(SERVICE_ACCOUNT_DIR, "token")) as handle:
        token = handle.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"))
    request = urllib.request.Request(f"https://{host}:{port}/api/v1/nodes",
                                     headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as response:  # noqa: S310 (in-cluster API)
        return json.load(response).get("items", [])


def log(message: str) -> None:
    print(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "message": message}), flush=True)


def main(argv: List[str]) -> int:
    with open(argv[1] if len(argv) > 1 else "/gate/expectations.json") as handle:
        expectations = json.load(handle)
    timeout = float(expectations.get("timeoutSeconds", 900))
    poll = float(expectations.get("pollSeconds", 10))
    for line in skipped_lines(expectations):
        log(line)
    deadline = time.monotonic() + timeout
    problems = ["the API server was not reached yet"]
    nodes: List[Dict[str, Any]] = []
    while True:
        try:
            nodes = list_nodes()
            problems = missing(nodes, expectations)
        except (OSError, urllib.error.URLError, ValueError) as error:
            # Transient API errors (a control-plane update, a throttled request) must not fail the gate.
            problems = [f"listing nodes failed: {error}"]
        if not problems:
            log(f"GPU capacity ready for {len(expectations.get('groups', []))} node group(s)")
            return 0
        if time.monotonic() >= deadline:
            log(f"GPU readiness gate failed after {timeout:g}s; still missing:")
            for line in problems:
                log(f"  {line}")
            cause = likely_cause(nodes, expectations)
            if cause:
                log(cause)
            log("check the device-plugin pods in the device-plugin namespace, the node labels "
                "(nvidia.com/device-plugin.config) and that the node groups reached minSize")
            return 1
        log("waiting: " + "; ".join(problems))
        time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
