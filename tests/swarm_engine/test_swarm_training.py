"""Distributed training on a real three-node Swarm, from the planned services (issue 28 items 2-4).

The test stack (edge-swarm with a CPU model, one fake GPU per server, host-path storage, a plain overlay) is planned
by the real program and applied by tools.swarm_apply; torchrun forms one c10d rendezvous hosted by the head task
across the nodes, then two faults hit the running job: a worker server's daemon stops, and the head task is killed.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.swarm_engine.conftest import TIMINGS, client_for, plan_test_stack, resolved_for
from tools import swarm_apply
from tools.swarm_harness import TEST_JOB, Node, SwarmHarness
from trainer.checkpoint import scan

HEAD, WORKER = f"{TEST_JOB}-head", f"{TEST_JOB}-worker"
CHECKPOINTS = f"checkpoints/{TEST_JOB}"
MAX_STEPS = 40


@dataclass
class Watch:
    """Every trainer record of the job's containers on the nodes still up, each seen once, with when it was seen."""

    swarm: SwarmHarness
    down: set[str] = field(default_factory=set)
    seen: dict[tuple[str, int], tuple[float, dict[str, Any]]] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)

    def poll(self) -> list[dict[str, Any]]:
        fresh = []
        for node in self.swarm.nodes:
            if node.name in self.down:
                continue
            client = client_for(node)
            for container in client.containers(all=True, filters={"label": "com.docker.swarm.service.name"}):
                output = client.logs(container["Id"], stdout=True, stderr=True).decode(errors="replace")
                self.text[f"{node.name}/{container['Names'][0]}"] = output
                for index, line in enumerate(output.splitlines()):
                    key = (container["Id"], index)
                    if key in self.seen or not line.startswith("{"):
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    record["_node"], record["_container"] = node.name, container["Id"][:12]
                    self.seen[key] = (time.monotonic(), record)
                    fresh.append(record)
        return fresh

    def records(self, event: str) -> list[tuple[float, dict[str, Any]]]:
        return sorted((seen for seen in self.seen.values() if seen[1].get("event") == event), key=lambda s: s[0])

    def wait(self, what: str, check, timeout: float = 360) -> Any:
        # 360 s by default: a rank re-joining a restarted head may spend torch's store timeout twice (see
        # PLANTED_DEADLINE); measured, the head-kill recovery took 53-56 s in most runs and 112.5 s in one.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            result = check()
            if result:
                return result
            time.sleep(1)
        tails = "\n".join(f"--- {name}\n{text[-1500:]}" for name, text in self.text.items())
        pytest.fail(f"{what}: not within {timeout:g} s; the tasks' logs end:\n{tails}")

    def resumed_after(self, moment: float) -> tuple[float, list[dict[str, Any]]] | None:
        """When the job was first seen resuming from a checkpoint after `moment`, and the ranks' records of it."""
        later = [(seen, record) for seen, record in self.records("resumed") if seen > moment]
        return (later[0][0], [record for _, record in later]) if later else None

    def step_after(self, moment: float) -> float | None:
        """When the first training step completed after `moment` was seen."""
        later = [seen for seen, record in self.seen.values() if record.get("event") == "step" and seen > moment]
        return min(later) if later else None


def complete_checkpoints(shared: Path) -> list[int]:
    """Steps of the checkpoints the trainer acknowledged: a `step-<n>` directory with its `.complete` marker, read
    by the trainer's own scan. A directory without the marker is a save in flight (async) that a fault may cut
    short; counting it as acknowledged would demand a resume from a checkpoint that was never finished."""
    return [entry.step for entry in scan(shared / CHECKPOINTS) if entry.complete]


def task_nodes(swarm: SwarmHarness) -> dict[str, str]:
    """Running task → node hostname (from the manager)."""
    client = client_for(swarm.manager)
    names = {node["ID"]: node["Description"]["Hostname"] for node in client.nodes()}
    placed = {}
    for service in (HEAD, WORKER):
        for task in client.tasks(filters={"service": service, "desired-state": "running"}):
            if task["Status"]["State"] == "running":
                placed[f"{service}.{task['Slot']}"] = names.get(task["NodeID"], "?")
    return placed


def failed_tasks(swarm: SwarmHarness) -> list[str]:
    """The job's tasks that ended in failure or were rejected, with Swarm's error (`docker service ps`)."""
    client = client_for(swarm.manager)
    return [f"{service}.{task['Slot']}: {task['Status']['State']} {task['Status'].get('Err', '')}"
            for service in (HEAD, WORKER) for task in client.tasks(filters={"service": service})
            if task["Status"]["State"] in ("failed", "rejected")]


def start_job(swarm: SwarmHarness, resources: list[dict[str, Any]], timeout: float = 240,
              timed: bool = True) -> Watch:
    """Apply the planned job and wait for one rendezvous across the three nodes: three ranks training, on three
    different nodes, one task per server. Fails (pytest.fail or DidNotConverge) otherwise."""
    client = client_for(swarm.manager)
    started = time.monotonic()
    swarm_apply.apply(client, resources, resolved_for(resources))
    if timed:
        TIMINGS["apply and converge"] = round(time.monotonic() - started, 1)
    placed = task_nodes(swarm)
    print(f"\ntasks on nodes: {placed}")
    assert len(set(placed.values())) == 3, placed  # one task per server, on three servers
    watch = Watch(swarm)

    def training() -> bool:
        failed = failed_tasks(swarm)
        if failed:  # nothing fails before the first step unless something is wrong: no need to wait out the timeout
            pytest.fail(f"a task failed before the job trained: {failed}")
        return len({r["rank"] for _, r in watch.records("step")}) == 3

    watch.wait("three ranks training", training, timeout)
    ranks = {record["rank"]: f"{record['_node']} ({record['node']})" for _, record in watch.records("step")}
    print(f"first step at world size 3 after {time.monotonic() - started:.1f} s: rank → node {ranks}")
    assert len({node.split()[0] for node in ranks.values()}) == 3, ranks
    if timed:
        TIMINGS["apply to first step"] = round(time.monotonic() - started, 1)
    return watch


def remove_job(swarm: SwarmHarness) -> None:
    """Remove the job's services and network, wait until no task container is left, empty the shared directory."""
    client = client_for(swarm.manager)
    for service in client.services(filters={"label": f"gtp.dev/job={TEST_JOB}"}):
        client.remove_service(service["ID"])
    deadline = time.monotonic() + 60
    while any(client_for(node).containers(all=True, filters={"label": "com.docker.swarm.service.name"})
              for node in swarm.nodes if node.engine.process) and time.monotonic() < deadline:
        time.sleep(1)
    for node in swarm.nodes:
        for container in client_for(node).containers(all=True, filters={"label": "com.docker.swarm.service.name"}):
            client_for(node).remove_container(container["Id"], force=True)
    for network in client.networks(names=[f"{TEST_JOB}-net"]):
        client.remove_network(network["Id"])
    shutil.rmtree(swarm.shared / "checkpoints", ignore_errors=True)


# How long a planted defect may take to fail a task. A rank that cannot reach the c10d store fails only after torch's
# store timeout (`read_timeout`, 60 s by default: torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py:148
# at 2.13.0), and the store client may spend it twice: its connect loop (torch/csrc/distributed/c10d/TCPStore.cpp,
# `TCPStore::TCPStore`) retries a connect that timed out after a random backoff, the next connect again with the
# whole timeout. Measured here: torchrun with no store at a closed loopback port exits after 96 s; from apply to the
# first failed task 78-91 s in warm CI runs, 129-131 s with the cluster test's cold Go build on the same two cores,
# past 150 s once (the log then held the first connect's "retrying" warning). The wait ends at the first failed task,
# so a generous deadline costs nothing when the defect fails as it should.
PLANTED_DEADLINE = 360


def _head_not_host(spec: dict[str, Any]) -> None:
    # Nobody hosts the c10d store. (The head in `vip` instead of `dnsrr` mode is no defect: measured, the job forms
    # its rendezvous and trains either way, the head hosting the store because is_host says so.)
    if spec["name"].endswith("-head"):
        commands = spec["task_spec"]["container_spec"]["commands"]
        commands[2] = commands[2].replace("is_host=true", "is_host=false")


def _worker_off_overlay(spec: dict[str, Any]) -> None:
    if spec["name"].endswith("-worker"):
        spec["task_spec"]["networks_advanceds"] = []


def _two_gpus(spec: dict[str, Any]) -> None:
    # A node advertises one (fake) GPU.
    spec["task_spec"]["resources"]["reservation"]["generic_resources"] = {"discrete_resources_specs": ["NVIDIA-GPU=2"]}


@pytest.mark.parametrize(("plant", "static", "real"), [
    (_head_not_host, "swarm rendezvous: service swarm-finetune-head: head: hostname 'swarm-finetune-head', "
                     "'is_host=false'", "a task failed before the job trained: ['swarm-finetune-"),
    (_worker_off_overlay, "swarm rendezvous: service swarm-finetune-worker: is on no network",
     "a task failed before the job trained: ['swarm-finetune-"),
    (_two_gpus, "swarm gpus: service swarm-finetune-head: reserves ['NVIDIA-GPU=2']",
     "did not converge after 30 s; its tasks: ['slot 1: pending no suitable node (insufficient resources on 3 "
     "nodes)'"),
], ids=lambda value: value.__name__[1:] if callable(value) else "")
def test_a_planted_defect_in_the_swarm_component_fails_the_real_run(swarm: SwarmHarness, tmp_path: Path,
                                                                      monkeypatch, plant, static: str,
                                                                      real: str) -> None:
    """The component's service spec with one defect, planned by the same program and applied to the same Swarm:
    the simulation names it, and the job does not form its rendezvous (the cheap first phase of the real test,
    with a short deadline)."""
    from components import swarm_training

    original = swarm_training.service_spec

    def planted(*args, **kwargs):
        spec = original(*args, **kwargs)
        plant(spec)
        return spec

    monkeypatch.setattr(swarm_training, "service_spec", planted)
    misses: list[str] = []
    resources = plan_test_stack(tmp_path, swarm.shared, misses=misses, max_steps=60, converge_timeout_seconds=30)
    assert any(miss.startswith(static) for miss in misses), misses
    try:
        with pytest.raises((pytest.fail.Exception, swarm_apply.DidNotConverge, AssertionError)) as caught:
            start_job(swarm, resources, timeout=PLANTED_DEADLINE, timed=False)
        print(f"planted {plant.__name__[1:]}: the real run failed: {str(caught.value)[:1500]}")
        assert real in str(caught.value)
    finally:
        remove_job(swarm)


def test_training_runs_across_three_nodes_and_survives_both_faults(swarm: SwarmHarness, tmp_path: Path) -> None:
    resources = plan_test_stack(tmp_path, swarm.shared, max_steps=MAX_STEPS)
    started = time.monotonic()
    # 1. One rendezvous across the three nodes: world size 3, ranks on three different nodes.
    watch = start_job(swarm, resources)

    # 2. A worker server's daemon stops mid-run: the job goes on at >= minNodes (2).
    watch.wait("a first checkpoint", lambda: complete_checkpoints(swarm.shared))
    # A worker's server that is not the (single) manager: losing the manager would be losing the Swarm itself.
    victim: Node = swarm.node_of(next(node for task, node in sorted(task_nodes(swarm).items())
                                      if task.startswith(WORKER) and node != swarm.manager.name))
    fault = time.monotonic()
    swarm.stop_node(victim)
    watch.down.add(victim.name)
    acknowledged = complete_checkpoints(swarm.shared)
    resumed_at, resumed = watch.wait("a resume after the worker node stopped", lambda: watch.resumed_after(fault))
    recovered = watch.wait("a step after the worker node stopped", lambda: watch.step_after(resumed_at))
    TIMINGS["fault 1 (worker node stops): to next step"] = round(recovered - fault, 1)
    print(f"worker node {victim.name} stopped: resumed from step {resumed[0]['step']} at world size "
          f"{resumed[0]['world_size']}, next completed step {recovered - fault:.1f} s after the fault")
    # No acknowledged checkpoint lost: the job went on from the newest one written before the fault (or later).
    assert resumed and resumed[0]["step"] >= max(acknowledged) and resumed[0]["world_size"] >= 2, (resumed,
                                                                                                   acknowledged)
    watch.wait("a newer checkpoint", lambda: max(complete_checkpoints(swarm.shared) or [0]) >= max(acknowledged) + 4)

    # 3. The head task is killed: Swarm restarts it, the workers re-join, training resumes from a checkpoint.
    before = complete_checkpoints(swarm.shared)
    head_node = swarm.node_of(task_nodes(swarm)[f"{HEAD}.1"])
    head_client = client_for(head_node)
    head_container = head_client.containers(filters={"label": f"com.docker.swarm.service.name={HEAD}"})[0]["Id"]
    fault = time.monotonic()
    head_client.kill(head_container)
    resumed_at, resumed = watch.wait("a resume after the head was killed", lambda: watch.resumed_after(fault))
    recovered = watch.wait("a step after the head was killed", lambda: watch.step_after(resumed_at))
    TIMINGS["fault 2 (head task killed): to next step"] = round(recovered - fault, 1)
    print(f"head task killed: resumed from step {resumed[0]['step']}, next completed step {recovered - fault:.1f} s "
          "later")
    assert resumed[0]["step"] >= max(before), (resumed, before)  # the newest complete checkpoint, none lost

    # 4. The job finishes at maxSteps and its final checkpoint is complete.
    done = watch.wait("the job done", lambda: [r for _, r in watch.records("done")], timeout=300)
    TIMINGS["training in all"] = round(time.monotonic() - started, 1)
    assert done[-1]["step"] == MAX_STEPS, done
    assert MAX_STEPS in complete_checkpoints(swarm.shared), complete_checkpoints(swarm.shared)
    print(f"done at step {done[-1]['step']}, world size {done[-1].get('world_size')}; checkpoints "
          f"{complete_checkpoints(swarm.shared)}")
