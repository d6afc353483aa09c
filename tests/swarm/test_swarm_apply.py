"""tools.swarm_apply: edge-swarm's planned network and services translated into Engine API calls as the provider's
upstream does, and every field it does not translate (or cannot know) refused rather than dropped."""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import pytest

from tests.conftest import plan_stack
from tools import swarm_apply
from verify.plan import render

IMAGE = "gtp-trainer:unit"


def planned() -> list[dict[str, Any]]:
    import json

    return json.loads(render(plan_stack("edge-swarm"))[0])["resources"]


def head_inputs() -> dict[str, Any]:
    return copy.deepcopy(next(r for r in planned() if r["name"] == "job-swarm-finetune-head")["inputs"])


RESOLVED = {"taskSpec.containerSpec.image": IMAGE, "auth": None}


def test_a_planned_service_becomes_the_engine_api_spec() -> None:
    kwargs, converge = swarm_apply.service_create(head_inputs(), RESOLVED)
    assert kwargs["name"] == "swarm-finetune-head"
    assert kwargs["labels"] == {"gtp.dev/job": "swarm-finetune", "gtp.dev/role": "head"}
    assert kwargs["mode"] == {"Replicated": {"Replicas": 1}}
    assert kwargs["endpoint_spec"] == {"Mode": "dnsrr"}
    assert kwargs["update_config"] == {"Parallelism": 0, "FailureAction": "pause", "Order": "stop-first"}
    task = kwargs["task_template"]
    container = task["ContainerSpec"]
    assert container["Image"] == IMAGE and container["Command"][:2] == ["sh", "-c"]
    assert "GLOO_SOCKET_IFNAME=eth0" in container["Env"]  # {K: V} → ["K=V"]
    assert container["ReadOnly"] is True and container["Init"] is True and container["CapabilityDrop"] == ["ALL"]
    assert container["StopGracePeriod"] == 600 * 10**9  # Go duration "600s" in nanoseconds
    assert {"Type": "tmpfs", "Target": "/dev/shm", "Source": "", "TmpfsOptions": {"SizeBytes": 16 * 2**30}} \
        in container["Mounts"]
    assert task["Placement"] == {"Constraints": ["node.labels.gtp.dev.node-group==gpu", "node.platform.arch==x86_64"],
                                 "MaxReplicas": 1}
    assert task["Resources"]["Reservations"]["GenericResources"] == [
        {"DiscreteResourceSpec": {"Kind": "NVIDIA-GPU", "Value": 4}}]
    assert task["RestartPolicy"] == {"Condition": "on-failure", "Delay": 10 * 10**9, "MaxAttempts": 3,
                                     "Window": 120 * 10**9}
    assert task["Networks"] == [{"Target": "swarm-finetune-net", "Aliases": []}]
    assert converge == {"delay": 5 * 10**9, "timeout": 900 * 10**9}


def test_a_planned_network_becomes_the_engine_api_call() -> None:
    network = next(r for r in planned() if r["type"] == swarm_apply.NETWORK_TYPE)["inputs"]
    assert swarm_apply.network_create(network) == {
        "name": "swarm-finetune-net", "labels": {"gtp.dev/job": "swarm-finetune"}, "driver": "overlay",
        "options": {"encrypted": ""}, "attachable": True}


def test_an_untranslated_field_is_refused_not_dropped() -> None:
    inputs = head_inputs()
    inputs["taskSpec"]["logDriver"] = {"name": "json-file"}
    with pytest.raises(swarm_apply.Untranslated, match=r"^taskSpec\.logDriver: not translated by tools.swarm_apply"):
        swarm_apply.service_create(inputs, RESOLVED)


def test_a_computed_image_is_refused_unless_resolved() -> None:
    with pytest.raises(swarm_apply.Untranslated,
                       match=r"^taskSpec\.containerSpec\.image: the plan holds <computed>"):
        swarm_apply.service_create(head_inputs(), {"auth": None})


def test_registry_credentials_are_refused_unless_resolved() -> None:
    with pytest.raises(swarm_apply.Untranslated, match=r"^auth: the plan holds \[secret\]"):
        swarm_apply.service_create(head_inputs(), {"taskSpec.containerSpec.image": IMAGE})


def test_a_bad_duration_is_refused() -> None:
    inputs = head_inputs()
    inputs["taskSpec"]["restartPolicy"]["delay"] = "ten seconds"
    with pytest.raises(swarm_apply.Untranslated, match=r"^taskSpec\.restartPolicy\.delay: 'ten seconds' is not a Go "
                                                       "duration"):
        swarm_apply.service_create(inputs, RESOLVED)


def test_apply_creates_nothing_when_a_field_is_refused() -> None:
    class Client:
        calls: ClassVar[list[str]] = []

        def create_network(self, **kwargs):
            self.calls.append("network")

        def create_service(self, **kwargs):
            self.calls.append("service")
            return {"ID": "x"}

    resources = planned()
    client = Client()
    with pytest.raises(swarm_apply.Untranslated):
        swarm_apply.apply(client, resources, {"job-swarm-finetune-head:auth": None}, log=lambda line: None)
    assert client.calls == []
