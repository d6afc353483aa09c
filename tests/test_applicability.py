"""Where each config field applies (stack_config/applicability.py): the table is complete and true to the schema,
and every field written where it has no effect is refused with its key path — on every committed stack, for every
field that doesn't apply there (generated from the table and the schema, not listed by hand)."""

from __future__ import annotations

import copy
import json
import typing
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

import cluster_targets
import workload_kinds
from stack_config import ConfigError
from stack_config import applicability as app
from stack_config.schema import StackConfig, _Section
from stages.config import parse_stack_config
from tests.conftest import ROOT
from verify.plan import stack_config as read_stack

STACKS = ("dev", "prod", "edge", "edge-swarm")


def sections() -> list[type[_Section]]:
    found, todo = [], list(_Section.__subclasses__())
    while todo:
        model = todo.pop()
        found.append(model)
        todo.extend(model.__subclasses__())
    return found


def test_every_field_of_every_section_has_an_entry_and_no_entry_is_stale() -> None:
    assert set(app.APPLIES) == set(sections())
    for model, table in app.APPLIES.items():
        assert set(table) == set(model.model_fields), model.__name__


def _literal_values(annotation: Any) -> tuple[Any, ...] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(candidate) is typing.Literal:
            return typing.get_args(candidate)
    return None


def _field_at(path: str, model: type[BaseModel]) -> Any:
    """The pydantic field a condition's path names (from the stack for absolute paths)."""
    from stack_config.rules import snake

    field = None
    for part in path.split("."):
        fields = model.model_fields
        field = fields[snake(part)]
        inner = [a for a in (field.annotation, *typing.get_args(field.annotation))
                 if isinstance(a, type) and issubclass(a, BaseModel)]
        if inner:
            model = inner[0]
    return field


def test_every_condition_names_a_real_key_and_only_values_it_can_take() -> None:
    """A typo in the table (a key path, a mode or kind that doesn't exist) would make a field apply nowhere or
    everywhere: each condition's key exists in the schema and its values are ones that key accepts."""
    allowed_by_registry = {"cluster.mode": set(cluster_targets.TARGETS), "@kind": set(workload_kinds.CONFIGURABLE)}
    for model, table in app.APPLIES.items():
        for name, where in table.items():
            for path, values in where.all_conditions():
                if path.startswith("@"):
                    owner = next(m for m in (app.WorkloadConfig, app.GpuNodeGroupConfig)
                                 if _reachable(model, m))
                    field = _field_at(path[1:], owner)
                elif path.startswith("."):
                    field = _field_at(path[1:], model)
                else:
                    field = _field_at(path, StackConfig)
                if path in ("cluster.mode", "@kind"):  # by capability, never a name (stack_config/targets.py)
                    assert all(isinstance(v, app.Capable) and v.names for v in values), (model.__name__, name)
                concrete = [v for v in app.values_of(values) if not isinstance(v, app._Marker)]
                literal = _literal_values(field.annotation)
                if path in allowed_by_registry:
                    assert set(concrete) <= allowed_by_registry[path], (model.__name__, name, path)
                elif literal is not None:
                    assert set(concrete) <= set(literal), (model.__name__, name, path, literal)
                for value in concrete:
                    assert isinstance(value, (str, bool)), (model.__name__, name, path, value)


def _reachable(model: type[BaseModel], owner: type[BaseModel]) -> bool:
    if model is owner:
        return True
    for field in owner.model_fields.values():
        for inner in (field.annotation, *typing.get_args(field.annotation)):
            for arg in (inner, *typing.get_args(inner)):
                if isinstance(arg, type) and issubclass(arg, BaseModel) and _reachable(model, arg):
                    return True
    return False


MODE_WORDS = {"EKS only": {"eks"}, "EKS mode": {"eks"}, "EKS:": {"eks"}, "Existing mode only": {"existing"},
              "Existing and Swarm modes only": {"existing", "swarm"}, "Swarm mode only": {"swarm"},
              "Swarm only": {"swarm"}}


def test_a_docstring_that_names_a_target_agrees_with_the_table() -> None:
    """'EKS only.' in a field's docstring (and docs/config-reference.md, made from it) and the rule say the same."""
    checked = 0
    for model, table in app.APPLIES.items():
        for name, field in model.model_fields.items():
            doc = field.description or ""
            for words, modes in MODE_WORDS.items():
                if doc.startswith(words):
                    conditions = dict(table[name].conditions)
                    assert set(app.values_of(conditions.get("cluster.mode", ()))) == modes, (model.__name__, name,
                                                                                             doc[:40])
                    checked += 1
    assert checked >= 12


FORMATTED: dict[tuple[type[BaseModel], str], Any] = {(app.ImageConfig, "repository_name"): "team/trainer"}
"""Samples for fields whose form a rule checks and no committed stack writes."""


def _written_values() -> dict[tuple[type[BaseModel], str], Any]:
    """(model, field) → a value some committed stack writes for it (valid there, so valid in form)."""
    values: dict[tuple[type[BaseModel], str], Any] = {}

    def walk(model: BaseModel) -> None:
        for name in model.model_fields_set:
            values.setdefault((type(model), name), getattr(model, name))
        for name in type(model).model_fields:
            value = getattr(model, name)
            for item in (value.values() if isinstance(value, dict) else [value]):
                if isinstance(item, BaseModel):
                    walk(item)

    for stack in STACKS:
        raw, secrets = _raw(stack)
        config = parse_stack_config(raw, stack=stack, secret_keys=secrets)
        for attr in (*app.TOP_SECTIONS.values(), *app.MAP_SECTIONS.values()):
            section = getattr(config, attr)
            for item in (section.values() if isinstance(section, dict) else [section]):
                walk(item)
    return values


def _sample(model: type[BaseModel], name: str, current: Any, written: dict[tuple[type[BaseModel], str], Any]) -> Any:
    """A value pydantic and the format rules accept for the field, to write into a stack file: one a committed
    stack writes for it, else its current value, else one made from its type."""
    if (model, name) in written:
        current = written[(model, name)]
    if current not in (None, (), {}, ""):
        if isinstance(current, BaseModel):
            return current.model_dump(by_alias=True, exclude_unset=True) or {}
        if isinstance(current, tuple):
            return list(current)
        if isinstance(current, datetime):
            return current.strftime("%Y-%m-%dT%H:%M:%SZ")
        return current
    if (model, name) in FORMATTED:
        return FORMATTED[(model, name)]
    field = model.model_fields[name]
    literal = _literal_values(field.annotation)
    if literal:
        return literal[0]
    args = [a for a in (field.annotation, *typing.get_args(field.annotation)) if a is not type(None)]
    for arg in args:
        origin = typing.get_origin(arg) or arg
        if isinstance(arg, type) and issubclass(arg, BaseModel):  # its required fields only
            return {inner.alias or inner_name: _sample(arg, inner_name, None, written)
                    for inner_name, inner in arg.model_fields.items() if inner.is_required()}
        if origin is tuple:
            return ["x"]
        if origin is dict:
            return {"k": {} if any(isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(arg))
                    else "v"}
        if arg is datetime:
            return "2026-12-01T00:00:00Z"
        if arg is bool:
            return True
        if arg is float:
            return 1.0
        if arg is int:
            low = next((getattr(c, "ge", None) or getattr(c, "gt", None) for c in field.metadata
                        if getattr(c, "ge", None) or getattr(c, "gt", None)), 1)
            return int(low) + (1 if any(getattr(c, "gt", None) for c in field.metadata) else 0)
        if arg is str:
            return "x"
    raise AssertionError(f"no sample for {model.__name__}.{name}")


def _not_applying(config: StackConfig) -> list[tuple[str, type[BaseModel], str, Any]]:
    """(key path, model, field, current value) of every field that doesn't apply where it sits in `config`."""
    found: list[tuple[str, type[BaseModel], str, Any]] = []

    def walk(model: BaseModel, path: str, entry: tuple[BaseModel | None, str]) -> None:
        for name, field in type(model).model_fields.items():
            key = f"{path}.{field.alias or name}"
            value = getattr(model, name)
            if app._unmet(app.APPLIES[type(model)][name], config, (model, path), entry, set(), ()):
                found.append((key, type(model), name, value))
                continue
            if isinstance(value, BaseModel):
                walk(value, key, entry)

    for key, attr in app.TOP_SECTIONS.items():
        walk(getattr(config, attr), key, (None, ""))
    for key, attr in app.MAP_SECTIONS.items():
        for name, entry in getattr(config, attr).items():
            walk(entry, f"{key}.{name}", (entry, f"{key}.{name}"))
    return found


def _raw(stack: str) -> tuple[dict[str, Any], list[str]]:
    _, config, secrets = read_stack(ROOT, stack)
    raw = {k.split(":", 1)[1]: json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v
           for k, v in config.items() if k.startswith("gtp:")}
    return raw, [s.split(":", 1)[1] for s in secrets]


def _set(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    node = raw
    *parents, last = path.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value
    return raw


@pytest.mark.parametrize("stack", STACKS)
def test_every_field_written_where_it_does_not_apply_is_refused_with_its_key_path(stack: str) -> None:
    """Hidden configs of class 1 by construction: each committed stack, with each field that has no effect there
    written into it (one at a time), is refused before anything is registered, naming that key."""
    raw, secrets = _raw(stack)
    config = parse_stack_config(raw, stack=stack, secret_keys=secrets)
    candidates = _not_applying(config)
    assert len(candidates) >= 10, candidates
    written = _written_values()
    for path, model, name, current in candidates:
        planted = _set(raw, path, _sample(model, name, current, written))
        with pytest.raises(ConfigError) as caught:
            parse_stack_config(planted, stack=stack, secret_keys=secrets)
        messages = [str(problem) for problem in caught.value.problems]
        assert any(m.startswith(f"{path}: ") and "has no effect here: only applies" in m for m in messages), \
            (path, messages)


def test_a_field_that_applies_is_accepted_and_one_set_to_nothing_is_not_reported() -> None:
    raw, secrets = _raw("edge-swarm")
    # storage host-path with its hostPath applies on a Swarm; fields left unset are never reported
    raw = _set(raw, "storage", {"kind": "host-path", "hostPath": "/srv/training"})
    parse_stack_config(raw, stack="edge-swarm", secret_keys=secrets)


def test_a_condition_on_a_key_already_reported_is_not_decided() -> None:
    """The mistake is the storage kind; its sizeGib would be right with the kind the user meant."""
    raw, secrets = _raw("dev")
    raw = _set(raw, "storage", {"kind": "nfs", "sizeGib": 100})
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw, stack="dev", secret_keys=secrets)
    paths = [problem.path for problem in caught.value.problems]
    assert "storage.kind" in paths and "storage.sizeGib" not in paths, paths


def test_the_message_names_the_value_where_it_applies_and_what_the_stack_has() -> None:
    raw, secrets = _raw("prod")
    raw = _set(raw, "gpuNodeGroups", {**raw["gpuNodeGroups"]})
    group = next(iter(raw["gpuNodeGroups"]))
    raw = _set(raw, f"gpuNodeGroups.{group}.nodeSelector", {"site": "a"})
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw, stack="prod", secret_keys=secrets)
    assert f"gpuNodeGroups.{group}.nodeSelector: {{'site': 'a'}} has no effect here: only applies where cluster.mode " \
           "is 'existing' or 'swarm' (here cluster.mode is 'eks'); EKS nodes carry the platform's own labels; " \
           "remove it" in [str(problem) for problem in caught.value.problems]


# ---------------------------------------------------------------- issue 29's other classes decided from config


def test_a_production_stack_refuses_an_unsigned_team_image_before_the_policy_pack() -> None:
    """Class 6: what the pack's production_image_signed_or_own_build refuses is refused by the config stage."""
    raw, secrets = _raw("prod")
    name = next(iter(raw["workloads"]))
    team = "registry.example.com/team/train@sha256:" + "2" * 64
    entry = {key: value for key, value in raw["workloads"][name].items()
             if key not in ("model", "maxSteps", "batchSize", "checkpointEvery", "extraArgs", "entrypoint",
                            "benchSizes")}
    planted = _set(raw, f"workloads.{name}", {**entry, "image": team, "command": ["-m", "team.train"]})
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(planted, stack="prod", secret_keys=secrets)
    assert f"workloads.{name}.image: {team!r} is not in image.signedDigests, and a production stack " \
           "(lifecycle.protect) runs only the stack's own build (image.build) or a digest CI signed and verified, " \
           "listed in image.signedDigests" in [str(p) for p in caught.value.problems]
    # signed: accepted; the same image on a stack that isn't production: accepted
    parse_stack_config(_set(planted, "image.signedDigests", [team]), stack="prod", secret_keys=secrets)
    parse_stack_config(_set(planted, "lifecycle.protect", False), stack="prod", secret_keys=secrets)


def test_a_bench_stack_created_in_the_future_is_refused() -> None:
    """Class 4: the reaper counts ttlHours from createdAt, so a future createdAt outlives its TTL."""
    from datetime import timedelta

    future = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    raw, secrets = _raw("dev")
    lifecycle = {"ephemeral": True, "protect": False, "ttlHours": 4, "createdAt": future}
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(_set(raw, "lifecycle", lifecycle), stack="dev", secret_keys=secrets)
    assert any(str(p).startswith(f"lifecycle.createdAt: {future!r} is in the future") for p in caught.value.problems)
    recent = (datetime.now(UTC) + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")  # clock skew
    parse_stack_config(_set(raw, "lifecycle", {**lifecycle, "createdAt": recent}), stack="dev", secret_keys=secrets)


@pytest.mark.parametrize(("path", "says"), [
    ("image.registryPassword", "registryPassword is a stack secret, not a key of this section: set it with "
                               "`pulumi config set --secret registryPassword ...`"),
    ("cluster.kubeconfig", "kubeconfig is a stack secret, not a key of this section"),
    ("image.password", "unknown key that looks like a secret"),
    ("storage.nfsPasswd", "unknown key that looks like a secret"),
    ("gpuNodeGroups.@.apiToken", "unknown key that looks like a secret"),
    ("githubToken", "unknown key that looks like a secret"),
])
def test_a_secret_written_in_the_wrong_place_says_where_secrets_go(path: str, says: str) -> None:
    """Class 7: the key holding a secret is blamed, told how secrets are set, and told it leaked."""
    raw, secrets = _raw("dev")
    path = path.replace("@", next(iter(raw["gpuNodeGroups"])))
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(_set(raw, path, "hunter2"), stack="dev", secret_keys=secrets)
    mine = [str(p) for p in caught.value.problems if p.path == path]
    assert len(mine) == 1 and mine[0].startswith(f"{path}: {says}") and "rotate it" in mine[0], mine


def _wrong(model: type[BaseModel], name: str) -> Any:
    """A value of the wrong type for the field (a map where a scalar goes, text where a number goes...)."""
    field = model.model_fields[name]
    args = [a for a in (field.annotation, *typing.get_args(field.annotation)) if a is not type(None)]
    kinds = {typing.get_origin(a) or a for a in args}
    if kinds & {bool, int, float, datetime}:
        return "not-a-value"
    if kinds & {tuple, dict} or any(isinstance(a, type) and issubclass(a, BaseModel) for a in args):
        return 5
    return {"not": "a string"}


@pytest.mark.parametrize("stack", STACKS)
def test_a_value_of_the_wrong_type_blames_the_key_that_holds_it(stack: str) -> None:
    """Class 7: every field of every section of a committed stack, given a value of the wrong type, is refused at
    its own key path (not a neighbour's, not the section's), one field at a time."""
    raw, secrets = _raw(stack)
    config = parse_stack_config(raw, stack=stack, secret_keys=secrets)
    checked = 0

    def walk(model: BaseModel, path: str) -> None:
        nonlocal checked
        for name, field in type(model).model_fields.items():
            if name == "name":  # the map key, never written
                continue
            key = f"{path}.{field.alias or name}"
            planted = _set(raw, key, _wrong(type(model), name))
            with pytest.raises(ConfigError) as caught:
                parse_stack_config(planted, stack=stack, secret_keys=secrets)
            paths = [problem.path for problem in caught.value.problems]
            assert any(p == key or p.startswith((key + ".", key + "[")) for p in paths), (key, paths)
            checked += 1
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                walk(value, key)

    for key, attr in app.TOP_SECTIONS.items():
        walk(getattr(config, attr), key)
    for key, attr in app.MAP_SECTIONS.items():
        for name, entry in getattr(config, attr).items():
            walk(entry, f"{key}.{name}")
    assert checked >= 80


@pytest.mark.parametrize(("edit", "why"), [
    (lambda w: w.update(numNodes=2, elastic=None), "2 pods"),
    (lambda w: w.update(elastic={"minNodes": 1, "maxNodes": 2}), "2 pods"),
    (lambda w: w.update(elastic={"minNodes": 1, "maxNodes": 1}), "elastic"),
])
def test_a_job_that_must_resume_needs_storage_that_outlives_its_pods(edit: Any, why: str) -> None:
    """Class 5: a multi-node or elastic job on storage 'none' (node-local scratch) is refused at storage.kind,
    unless the workload says it keeps no work (checkpoints: none); a single-pod dev job stays allowed."""
    from tests.test_config import BASE

    raw, name = copy.deepcopy(BASE), "train"  # EKS, storage none by default, one single-pod workload
    raw["gpuNodeGroups"]["train"]["maxSize"] = 4
    parse_stack_config(raw, stack="dev")  # one pod: dev's "lost with the pod" is accepted
    workload = dict(raw["workloads"][name])
    edit(workload)
    workload = {key: value for key, value in workload.items() if value is not None}
    planted = _set(raw, f"workloads.{name}", workload)
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(planted, stack="dev")
    assert any(str(p).startswith(f"storage.kind: 'none' keeps checkpoints in one pod's node-local scratch, deleted "
                                 f"with the pod, but workload {name!r} ({why})") for p in caught.value.problems), \
        [str(p) for p in caught.value.problems]
    parse_stack_config(_set(planted, f"workloads.{name}.checkpoints", "none"), stack="dev")
    parse_stack_config(_set(planted, "storage", {"kind": "efs"}), stack="dev")


def test_every_training_job_of_a_production_stack_needs_shared_storage() -> None:
    raw, secrets = _raw("prod")
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(_set(raw, "storage", {"kind": "none"}), stack="prod", secret_keys=secrets)
    assert any("on a production stack" in str(p) or "pods" in str(p) for p in caught.value.problems
               if p.path == "storage.kind"), [str(p) for p in caught.value.problems]


def test_values_are_shown_as_the_stack_file_writes_them() -> None:
    raw, secrets = _raw("dev")
    planted = _set(_set(raw, "lifecycle.createdAt", "2026-12-01T00:00:00Z"), "storage.nfsOptions", "ro")
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(planted, stack="dev", secret_keys=secrets)
    shown = {p.path: str(p) for p in caught.value.problems}
    assert shown["lifecycle.createdAt"].startswith("lifecycle.createdAt: '2026-12-01T00:00:00Z' has no effect here")
    assert shown["storage.nfsOptions"].startswith("storage.nfsOptions: 'ro' has no effect here")
