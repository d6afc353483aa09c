"""Would a Swarm job run? The planned `docker:index/service:Service` and `network:Network` inputs of a Swarm stack
checked against what the real Swarm of `make swarm-test` (tests/swarm_engine) showed and the upstream rules:

- `swarm placement`: every `node.labels.<key>==<value>` constraint names a label docs/swarm.md tells sites to set (the
  node group's `nodeSelector`, else `gtp.dev.node-group=<group>`) in a key the manager accepts (no '/': measured,
  `key 'node.labels.gtp.dev/node-group' is invalid`), and `node.platform.arch` is the group's architecture;
- `swarm gpus`: each task's generic-resource reservation is the group's `gpusPerNode` of `cluster.swarm.
  gpuResourceName` (more than a server has: the task stays pending; fewer: another task could share the server);
- `swarm one task per server`: `maxReplicas: 1` (with the whole server's GPUs reserved, `swarm gpus`, no task of
  another service fits beside it either);
- `swarm rendezvous`: the head hosts the c10d store (`is_host=true`, its hostname the service name) and the workers
  don't, every service is attached to the job's overlay network, every worker's `--rdzv-endpoint` is the head's
  name and port, and the head restarts within the workers' rendezvous join timeout (its endpoint mode is not
  checked: the real Swarm formed the rendezvous with the head in `vip` mode as well as `dnsrr`);
- `swarm restart`: restart condition `on-failure` with at least one attempt, torchrun's `--max-restarts` equal to
  `elastic.maxRestarts`.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import cluster_targets
from stack_config.targets import ON_SWARM
from verify.plan_record import Plan, Resource
from verify.simulate.model import CheckResult, Finding

SERVICE = "docker:index/service:Service"
NETWORK = "docker:index/network:Network"
LABEL_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
JOIN_TIMEOUT_S = 600
"""torch's default rendezvous join timeout (torch 2.13 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:144
`"join": timedelta(seconds=600)`): a restarted head must be back within it or the workers give up."""
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}


def _seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value or "0s"))


def _torchrun(service: Resource) -> dict[str, str]:
    commands = service.inputs.get("taskSpec", {}).get("containerSpec", {}).get("commands") or []
    script = commands[2] if len(commands) > 2 else ""
    launch = script.split(" && exec ", 1)[-1]
    try:
        words = shlex.split(launch)
    except ValueError:
        words = []
    return dict(word[2:].split("=", 1) for word in words if word.startswith("--") and "=" in word)


def _job_group(plan: Plan, service: Resource) -> tuple[str | None, Any, Any]:
    config = plan.config
    labels = {item["label"]: item["value"] for item in service.inputs.get("labels", [])}
    workload = config.workloads.get(labels.get("gtp.dev/job", "")) if config is not None else None
    group_name = workload.node_group if workload is not None else None
    group = config.gpu_node_groups.get(group_name) if group_name else None
    return group_name, group, workload


def check(plan: Plan) -> list[CheckResult]:
    """The Swarm checks; none for a stack without Swarm services."""
    services = [r for r in plan.resources if r.type == SERVICE]
    if not services or plan.config is None or plan.config.cluster.mode not in ON_SWARM:
        return []
    config = plan.config
    swarm = config.cluster.swarm
    overlays = {r.inputs.get("name") for r in plan.resources if r.type == NETWORK
                and r.inputs.get("driver") == "overlay"}
    placement, gpus, one, rendezvous, restart = (CheckResult("swarm placement"), CheckResult("swarm gpus"),
                                                 CheckResult("swarm one task per server"),
                                                 CheckResult("swarm rendezvous"), CheckResult("swarm restart"))
    heads = {s.inputs.get("name"): s for s in services if {"label": "gtp.dev/role", "value": "head"}
             in s.inputs.get("labels", [])}
    for service in services:
        name = service.inputs.get("name", service.name)
        task = service.inputs.get("taskSpec", {})
        group_name, group, workload = _job_group(plan, service)
        if group is None or group_name is None:
            continue
        told = cluster_targets.for_config(config).node_selector(config, group_name)
        for constraint in task.get("placement", {}).get("constraints", []):
            key, _, value = constraint.partition("==")
            if key.startswith("node.labels."):
                label = key[len("node.labels."):]
                ok = LABEL_KEY.match(label) is not None and told.get(label) == value
                placement.record(ok, Finding(f"service {name}", f"constraint {constraint!r} needs a node label "
                                             f"sites are told to set ({told}) in a key the manager accepts "
                                             "(letters, digits, '.', '_', '-')",
                                             "use gpuNodeGroups.<group>.nodeSelector keys without '/'"))
            elif key == "node.platform.arch":
                ok = value == ARCH.get(group.architecture or "", "")
                placement.record(ok, Finding(f"service {name}", f"constraint {constraint!r} but group "
                                             f"'{group_name}' is {group.architecture}", "match the architecture"))
        reservation = task.get("resources", {}).get("reservation", {})
        wanted = reservation.get("genericResources", {}).get("discreteResourcesSpecs", [])
        stand_in = bool(swarm and swarm.cpu_stand_in)
        expected = [] if stand_in else [f"{swarm.gpu_resource_name}={group.gpus_per_node}"]
        gpus.record(wanted == expected, Finding(
            f"service {name}", f"reserves {wanted or 'no generic resource'}, but a '{group_name}' server "
            f"advertises {group.gpus_per_node} {swarm.gpu_resource_name}" + (" (a CPU stand-in reserves none)"
                                                                            if stand_in else ""),
            f"reserve {expected or 'none'}: more stays pending forever, fewer lets two tasks share a server"))
        # Tasks of one service: maxReplicas; of the head and a worker: the whole server's GPUs (`swarm gpus`).
        one.record(task.get("placement", {}).get("maxReplicas") == 1, Finding(
            f"service {name}", "may run two tasks on one server (maxReplicas is not 1)",
            "keep components/swarm_training.py's placement"))
        networks = [n.get("name") for n in task.get("networksAdvanceds", [])]
        rendezvous.record(any(n in overlays for n in networks), Finding(
            f"service {name}", f"is on {networks or 'no network'}, not on the job's overlay {sorted(overlays)}: "
            "it can't reach the head's store", "attach every service to the job's overlay network"))
        args = _torchrun(service)
        head_name = args.get("rdzv-endpoint", "").rsplit(":", 1)[0]
        head = heads.get(head_name)
        rendezvous.record(head is not None, Finding(
            f"service {name}", f"--rdzv-endpoint={args.get('rdzv-endpoint')} names no head service of the plan "
            f"({sorted(heads)})", "point it at <job>-head:29400"))
        if service in heads.values():
            # The head hosts the store because it says so (is_host=true); its endpoint mode does not matter for that:
            # `make swarm-test` formed the rendezvous with the head in `vip` mode too, so `dnsrr` is not checked.
            hostname = task.get("containerSpec", {}).get("hostname")
            rendezvous.record(hostname == name and args.get("rdzv-conf") == "is_host=true", Finding(
                f"service {name}", f"head: hostname {hostname!r}, {args.get('rdzv-conf')!r}: no task would host the "
                "c10d store the workers join", "hostname = the service name, --rdzv-conf=is_host=true"))
            delay = _seconds(task.get("restartPolicy", {}).get("delay", "5s"))
            rendezvous.record(delay < JOIN_TIMEOUT_S, Finding(
                f"service {name}", f"restarts after {delay:g} s, past the workers' {JOIN_TIMEOUT_S} s join timeout",
                "a shorter restart delay"))
        else:
            rendezvous.record(args.get("rdzv-conf") == "is_host=false", Finding(
                f"service {name}", f"worker: {args.get('rdzv-conf')!r}: a worker would host a second store",
                "--rdzv-conf=is_host=false"))
        policy = task.get("restartPolicy", {})
        restart.record(policy.get("condition") == "on-failure" and int(policy.get("maxAttempts", 0)) >= 1, Finding(
            f"service {name}", f"restart policy {policy}: a failed task would not come back (condition other than "
            "on-failure), or would come back forever (maxAttempts 0, which swarmkit ignores)",
            "condition on-failure, maxAttempts >= 1 (workloads.<name>.backoffLimit)"))
        if workload is not None and workload.elastic is not None:
            restart.record(args.get("max-restarts") == str(workload.elastic.max_restarts), Finding(
                f"service {name}", f"torchrun --max-restarts={args.get('max-restarts')}, but elastic.maxRestarts is "
                f"{workload.elastic.max_restarts}", "pass elastic.maxRestarts"))
    return [placement, gpus, one, rendezvous, restart]
