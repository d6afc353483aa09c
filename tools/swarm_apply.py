"""Apply a plan's `docker:index/network:Network` and `docker:index/service:Service` inputs to a real Swarm through
the Docker Engine API (the `docker` SDK), translating each input field as the pinned provider does.

A stand-in for `pulumi up` with pulumi-docker 5.2.0, which cannot be built here (docs/spikes/control-plane-and-pulumi
/REPORT.md: not on the Go module proxy nor in the snapshots); issue 35 replaces it with the real provider. pulumi-docker
bridges kreuzwerker/terraform-provider-docker; the nearest available source is its `upstream` at v4.5.0 (commit
5074970c, the submodule of pulumi-docker 5.1.0), and every translation below cites that tag:

- N = internal/provider/resource_docker_network_funcs.go (network create),
- S = internal/provider/resource_docker_service_structures.go (service spec),
- F = internal/provider/resource_docker_service_funcs.go (create, converge wait),
- H = internal/provider/helpers.go, C = internal/provider/resource_docker_container_structures.go (helpers).

Pulumi's input names are the Terraform names in camelCase, lists pluralised (`command` → `commands`, `cap_drop` →
`capDrops`, `networks_advanced` → `networksAdvanceds`, `discrete_resources_spec` → `discreteResourcesSpecs`).
An input field this module does not translate is refused (`Untranslated`), never dropped; so is an unknown
(`<computed>`) or secret (`[secret]`) value unless the caller resolves that path (`resolved`: the image the plan's
build would have produced). Nothing here edits the plan.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from verify.plan_record import COMPUTED, SECRET

NETWORK_TYPE = "docker:index/network:Network"
SERVICE_TYPE = "docker:index/service:Service"


class Untranslated(ValueError):
    """A planned input this stand-in does not translate (or cannot know): applying it would misrepresent the plan."""


class DidNotConverge(RuntimeError):
    """A service's tasks were not all running within its converge timeout (F:52-74; the service is deleted)."""


def _duration_ns(value: str, path: str) -> int:
    """Go's time.ParseDuration for the forms the plan uses (`10s`, `2m`, `1h30m`, `500ms`), in nanoseconds."""
    units = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", value)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != value:
        raise Untranslated(f"{path}: {value!r} is not a Go duration")
    return int(sum(float(number) * units[unit] for number, unit in parts))


class _Fields:
    """Reads one input object; `done()` refuses every key nobody took."""

    def __init__(self, value: Any, path: str, resolved: Mapping[str, Any]):
        if not isinstance(value, dict):
            raise Untranslated(f"{path}: expected an object, got {value!r}")
        self.value, self.path, self.resolved, self.taken = value, path, resolved, set()

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, default: Any = None) -> Any:
        self.taken.add(key)
        if key not in self.value:
            return default
        return _known(self.value[key], self._at(key), self.resolved)

    def sub(self, key: str) -> _Fields | None:
        value = self.get(key)
        return None if value is None else _Fields(value, self._at(key), self.resolved)

    def done(self) -> None:
        left = sorted(set(self.value) - self.taken)
        if left:
            raise Untranslated(f"{', '.join(self._at(key) for key in left)}: not translated by tools.swarm_apply "
                               "(extend it, citing the provider's mapping, or apply with the real provider)")


def _known(value: Any, path: str, resolved: Mapping[str, Any]) -> Any:
    if path in resolved:
        return resolved[path]
    if value in (COMPUTED, SECRET):
        raise Untranslated(f"{path}: the plan holds {value}; only a real `pulumi up` knows it (pass it as "
                           "resolved only where the test supplies the same thing, like the image it built)")
    if isinstance(value, dict):
        return {key: _known(item, f"{path}.{key}", resolved) for key, item in value.items()}
    if isinstance(value, list):
        return [_known(item, f"{path}[{index}]", resolved) for index, item in enumerate(value)]
    return value


def _labels(items: list[dict[str, str]] | None) -> dict[str, str] | None:
    # H:15-24 labelSetToMap: [{label, value}] → {label: value}.
    return None if items is None else {item["label"]: item["value"] for item in items}


def network_create(inputs: Mapping[str, Any], resolved: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments of `docker.APIClient.create_network` for a planned Network (N:26-78)."""
    fields = _Fields(dict(inputs), "", resolved or {})
    kwargs: dict[str, Any] = {"name": fields.get("name")}  # N:75 NetworkCreate(ctx, d.Get("name"), ...)
    if (labels := fields.get("labels")) is not None:
        kwargs["labels"] = _labels(labels)  # N:33-35
    if (driver := fields.get("driver")) is not None:
        kwargs["driver"] = driver  # N:36-38
    if (options := fields.get("options")) is not None:
        kwargs["options"] = {key: str(value) for key, value in options.items()}  # N:39-41 mapTypeMapValsToString
    if (internal := fields.get("internal")) is not None:
        kwargs["internal"] = internal  # N:42-44
    if (attachable := fields.get("attachable")) is not None:
        kwargs["attachable"] = attachable  # N:45-47
    fields.done()
    return kwargs


def _mount(fields: _Fields) -> dict[str, Any]:
    # S:790-875: Type, Target, Source, ReadOnly, BindOptions, VolumeOptions, TmpfsOptions.
    mount: dict[str, Any] = {"Type": fields.get("type"), "Target": fields.get("target"),
                             "Source": fields.get("source", "")}
    if (read_only := fields.get("readOnly")) is not None:
        mount["ReadOnly"] = read_only  # S:802-804
    if (bind := fields.sub("bindOptions")) is not None:
        mount["BindOptions"] = {"Propagation": bind.get("propagation", "")}  # S:806-817
        bind.done()
    if (volume := fields.sub("volumeOptions")) is not None:
        options: dict[str, Any] = {}  # S:819-845
        if (no_copy := volume.get("noCopy")) is not None:
            options["NoCopy"] = no_copy
        if (labels := volume.get("labels")) is not None:
            options["Labels"] = _labels(labels)
        driver_name, driver_options = volume.get("driverName"), volume.get("driverOptions")
        if driver_name is not None or driver_options is not None:
            options["DriverConfig"] = {"Name": driver_name or "", "Options": dict(driver_options or {})}
        volume.done()
        mount["VolumeOptions"] = options
    if (tmpfs := fields.sub("tmpfsOptions")) is not None:
        options = {}  # S:847-871
        if (size := tmpfs.get("sizeBytes")) is not None:
            options["SizeBytes"] = int(size)
        if (mode := tmpfs.get("mode")) is not None:
            options["Mode"] = int(mode)
        tmpfs.done()
        mount["TmpfsOptions"] = options
    fields.done()
    return mount


def _container_spec(fields: _Fields) -> dict[str, Any]:
    spec: dict[str, Any] = {}  # S:708-1001 createContainerSpec
    simple = {"image": "Image", "hostname": "Hostname", "dir": "Dir", "user": "User",  # S:713, 725, 731, 734
              "readOnly": "ReadOnly", "stopSignal": "StopSignal"}  # S:787, S:877
    for key, target in simple.items():
        if (value := fields.get(key)) is not None:
            spec[target] = value
    if (commands := fields.get("commands")) is not None:
        spec["Command"] = list(commands)  # S:719-721 command → Command
    if (args := fields.get("args")) is not None:
        spec["Args"] = list(args)  # S:722-724
    if (env := fields.get("env")) is not None:
        # S:728-730 → C:218-226 mapTypeMapValsToStringSlice: {K: V} → ["K=V"].
        spec["Env"] = [f"{key}={value}" for key, value in env.items() if key]
    if (labels := fields.get("labels")) is not None:
        spec["Labels"] = _labels(labels)  # S:716-718
    if (mounts := fields.get("mounts")) is not None:
        spec["Mounts"] = [_mount(_Fields(item, f"{fields.path}.mounts[{index}]", fields.resolved))
                          for index, item in enumerate(mounts)]  # S:790-876
    if (grace := fields.get("stopGracePeriod")) is not None:
        spec["StopGracePeriod"] = _duration_ns(grace, f"{fields.path}.stopGracePeriod")  # S:880-883
    if (secrets := fields.get("secrets")) is not None:
        if secrets:  # S:929-950; none in the test stack, so none is translated (an empty list sets nothing)
            raise Untranslated(f"{fields.path}.secrets: Docker secrets are not translated by tools.swarm_apply")
        spec["Secrets"] = []
    if (cap_drops := fields.get("capDrops")) is not None:
        spec["CapabilityDrop"] = list(cap_drops)  # S:985-989 cap_drop → CapabilityDrop
    if (cap_adds := fields.get("capAdds")) is not None:
        spec["CapabilityAdd"] = list(cap_adds)  # S:979-983
    if (init := fields.get("init")) is not None:
        spec["Init"] = init  # S:990-995 (API >= 1.37, S:115-117: Engine 20.10 speaks 1.41)
    fields.done()
    return spec


def _resources(fields: _Fields) -> dict[str, Any]:
    resources: dict[str, Any] = {}  # S:1004-1045 createResources
    if (limits := fields.sub("limits")) is not None:
        resources["Limits"] = {"NanoCPUs": int(limits.get("nanoCpus", 0)),  # S:1015-1020
                               "MemoryBytes": int(limits.get("memoryBytes", 0))}
        limits.done()
    if (reservation := fields.sub("reservation")) is not None:
        reserved: dict[str, Any] = {"NanoCPUs": int(reservation.get("nanoCpus", 0)),  # S:1029-1034
                                    "MemoryBytes": int(reservation.get("memoryBytes", 0))}
        if (generic := reservation.sub("genericResources")) is not None:
            items = []  # S:1048-1081 createGenericResources: "KIND=VALUE" split on "="
            for spec in generic.get("namedResourcesSpecs") or []:
                kind, value = spec.split("=", 1)
                items.append({"NamedResourceSpec": {"Kind": kind, "Value": value}})  # S:1054-1064
            for spec in generic.get("discreteResourcesSpecs") or []:
                kind, value = spec.split("=", 1)
                items.append({"DiscreteResourceSpec": {"Kind": kind, "Value": int(value)}})  # S:1066-1076
            generic.done()
            reserved["GenericResources"] = items
        reservation.done()
        resources["Reservations"] = reserved
    fields.done()
    return resources


def _task_spec(fields: _Fields) -> dict[str, Any]:
    task: dict[str, Any] = {}  # S:645-705 createServiceTaskSpec
    if (container := fields.sub("containerSpec")) is not None:
        task["ContainerSpec"] = _container_spec(container)  # S:652-658
    if (resources := fields.sub("resources")) is not None:
        task["Resources"] = _resources(resources)  # S:660-666
    if (restart := fields.sub("restartPolicy")) is not None:
        policy: dict[str, Any] = {}  # S:1084-1109 createRestartPolicy
        if (condition := restart.get("condition")) is not None:
            policy["Condition"] = condition
        if (delay := restart.get("delay")) is not None:
            policy["Delay"] = _duration_ns(delay, f"{restart.path}.delay")
        if (attempts := restart.get("maxAttempts")) is not None:
            policy["MaxAttempts"] = int(attempts)
        if (window := restart.get("window")) is not None:
            policy["Window"] = _duration_ns(window, f"{restart.path}.window")
        restart.done()
        task["RestartPolicy"] = policy  # S:667-673
    if (placement := fields.sub("placement")) is not None:
        placed: dict[str, Any] = {}  # S:1112-1135 createPlacement
        if (constraints := placement.get("constraints")) is not None:
            placed["Constraints"] = list(constraints)
        if (max_replicas := placement.get("maxReplicas")) is not None:
            placed["MaxReplicas"] = int(max_replicas)
        placement.done()
        task["Placement"] = placed  # S:674-680
    if (networks := fields.get("networksAdvanceds")) is not None:
        attachments = []  # S:1138-1163: Target = id, else name; Aliases; DriverOpts
        for index, network in enumerate(networks):
            net = _Fields(network, f"{fields.path}.networksAdvanceds[{index}]", fields.resolved)
            target = net.get("id") or net.get("name")
            if not target:
                raise Untranslated(f"{net.path}: network 'name' or 'id' must be specified")  # S:1149
            attachment: dict[str, Any] = {"Target": target, "Aliases": list(net.get("aliases") or [])}
            if (driver_opts := net.get("driverOpts")) is not None:
                raise Untranslated(f"{net.path}.driverOpts: not translated ({driver_opts!r})")
            net.done()
            attachments.append(attachment)
        task["Networks"] = attachments  # S:687-693
    fields.done()
    return task


def service_create(inputs: Mapping[str, Any], resolved: Mapping[str, Any] | None = None
                   ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Keyword arguments of `docker.APIClient.create_service` for a planned Service (S:589-633), and its converge
    config (delay/timeout in ns; None: no wait)."""
    fields = _Fields(dict(inputs), "", resolved or {})
    kwargs: dict[str, Any] = {"name": fields.get("name")}  # S:591-593 Annotations.Name
    if (labels := fields.get("labels")) is not None:
        kwargs["labels"] = _labels(labels)  # S:596-600, 636-642
    if (task := fields.sub("taskSpec")) is not None:
        kwargs["task_template"] = _task_spec(task)  # S:602-606
    if (mode := fields.sub("mode")) is not None:
        translated: dict[str, Any] = {}  # S:1187-1220 createServiceMode
        if (replicated := mode.sub("replicated")) is not None:
            translated["Replicated"] = {"Replicas": int(replicated.get("replicas", 1))}  # S:1196-1209
            replicated.done()
        if mode.get("global"):
            translated["Global"] = {}  # S:1212-1215
        mode.done()
        kwargs["mode"] = translated  # S:608-612
    if (update := fields.sub("updateConfig")) is not None:
        config: dict[str, Any] = {}  # S:1294-1320 createUpdateOrRollbackConfig
        if (parallelism := update.get("parallelism")) is not None:
            config["Parallelism"] = int(parallelism)
        if (delay := update.get("delay")) is not None:
            config["Delay"] = _duration_ns(delay, f"{update.path}.delay")
        if (action := update.get("failureAction")) is not None:
            config["FailureAction"] = action
        if (monitor := update.get("monitor")) is not None:
            config["Monitor"] = _duration_ns(monitor, f"{update.path}.monitor")
        if (order := update.get("order")) is not None:
            config["Order"] = order
        update.done()
        kwargs["update_config"] = config  # S:614-618
    if (endpoint := fields.sub("endpointSpec")) is not None:
        spec: dict[str, Any] = {}  # S:1240-1259 createServiceEndpointSpec
        if (endpoint_mode := endpoint.get("mode")) is not None:
            spec["Mode"] = endpoint_mode
        if endpoint.get("ports"):
            raise Untranslated(f"{endpoint.path}.ports: published ports are not translated by tools.swarm_apply")
        endpoint.done()
        kwargs["endpoint_spec"] = spec  # S:626-630
    converge = None
    if (converge_fields := fields.sub("convergeConfig")) is not None:
        # F:52-63, S:1323-1338: poll every `delay` until every replica runs, for at most `timeout`.
        converge = {"delay": _duration_ns(converge_fields.get("delay", "7s"), "convergeConfig.delay"),
                    "timeout": _duration_ns(converge_fields.get("timeout", "3m"), "convergeConfig.timeout")}
        converge_fields.done()
    if fields.get("auth") is not None:
        # F:42-45 passes it as X-Registry-Auth. The test Swarm's nodes have the image already (tools.swarm_harness
        # seed), so its caller resolves `auth` to None, which is the one way past this refusal.
        raise Untranslated("auth: registry credentials are not translated by tools.swarm_apply")
    fields.done()
    return kwargs, converge


def planned(resources: list[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [resource for resource in resources if resource["type"] == kind]


def load_resources(path: Path) -> list[dict[str, Any]]:
    """The `resources` of a plan's resources.json."""
    return json.loads(path.read_text())["resources"]


def converged(client, service_id: str) -> bool:
    """F:358-403, F:505-560: every replica's task (on a node not Down) is running."""
    service = client.inspect_service(service_id)
    replicas = service["Spec"]["Mode"]["Replicated"]["Replicas"]
    down = {node["ID"] for node in client.nodes() if node["Status"]["State"] == "down"}
    tasks = client.tasks(filters={"service": service_id, "desired-state": "running"})
    running = [task for task in tasks if task.get("NodeID") not in down and task["Status"]["State"] == "running"]
    return len(running) == replicas


def task_states(client, service_id: str) -> list[str]:
    """Each task's slot, state and error (what `docker service ps` shows of a task that does not run)."""
    return [f"slot {task.get('Slot')}: {task['Status']['State']} {task['Status'].get('Err', '')}".strip()
            for task in client.tasks(filters={"service": service_id})]


def apply(client, resources: list[Mapping[str, Any]], resolved: Mapping[str, Any] | None = None,
          log: Callable[[str], None] = print) -> list[str]:
    """Create the plan's networks, then its services (all translated first, so a refused field creates nothing),
    then wait for each service to converge as the provider does; returns the service IDs."""
    resolved = dict(resolved or {})
    networks = [network_create(resource["inputs"], _for(resolved, resource)) for resource in
                planned(resources, NETWORK_TYPE)]
    services = [service_create(resource["inputs"], _for(resolved, resource)) for resource in
                planned(resources, SERVICE_TYPE)]
    for kwargs in networks:
        client.create_network(**kwargs)
        log(f"swarm_apply: network {kwargs['name']} created")
    created = []
    for kwargs, converge in services:
        created.append((client.create_service(**kwargs)["ID"], kwargs["name"], converge))
        log(f"swarm_apply: service {kwargs['name']} created")
    for service_id, name, converge in created:
        if converge is None:
            continue
        deadline = time.monotonic() + converge["timeout"] / 1e9
        while not converged(client, service_id):
            if time.monotonic() > deadline:
                tasks = task_states(client, service_id)
                client.remove_service(service_id)  # F:67-70: a service that does not converge is deleted
                raise DidNotConverge(f"service {name} ({service_id}) did not converge after "
                                     f"{converge['timeout'] / 1e9:g} s; its tasks: {tasks}")
            time.sleep(min(converge["delay"] / 1e9, 2.0))
        log(f"swarm_apply: service {name} converged")
    return [service_id for service_id, _, _ in created]


def _for(resolved: Mapping[str, Any], resource: Mapping[str, Any]) -> dict[str, Any]:
    """`resolved` keys are `<resource name>:<input path>`; this resource's, without the name."""
    prefix = f"{resource['name']}:"
    return {key[len(prefix):]: value for key, value in resolved.items() if key.startswith(prefix)}
