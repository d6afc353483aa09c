"""From the `gtp:` namespace of a stack to one frozen `StackConfig`, or one `ConfigError` listing every problem."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
from pydantic import BaseModel, SecretStr, ValidationError

from stack_config.problems import ConfigError, Problem, did_you_mean
from stack_config.rules import Rule, check_rules, skipped_rules
from stack_config.rules import snake as _snake
from stack_config.schema import (
    ClusterConfig,
    GpuConfig,
    GpuNodeGroupConfig,
    ImageConfig,
    KueueConfig,
    LifecycleConfig,
    NetworkConfig,
    StackConfig,
    StorageConfig,
    WorkloadConfig,
    _Section,
)
from stack_config.source import StackSource, read_stack_source

NAMESPACE = "gtp"

# ---------------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------------

SCALAR_DEFAULTS: dict[str, str] = {"namePrefix": "gtp", "region": "us-west-2", "kubernetesVersion": "1.34"}
"""Scalar keys and their defaults; Pulumi.yaml's config schema declares the same (a test keeps them equal)."""

SECTIONS: dict[str, type[_Section]] = {
    "cluster": ClusterConfig,
    "network": NetworkConfig,
    "gpu": GpuConfig,
    "image": ImageConfig,
    "kueue": KueueConfig,
    "storage": StorageConfig,
    "lifecycle": LifecycleConfig,
}
MAP_SECTIONS: dict[str, type[_Section]] = {"gpuNodeGroups": GpuNodeGroupConfig, "workloads": WorkloadConfig}
MOVED_KEYS: dict[str, str] = {
    "workload": "the single `workload` became the map `workloads`, keyed by the job's name (its former `name`): "
                "write `gtp:workloads: {<name>: {kind: ..., nodeGroup: ...}}`",
    "autoscaling": "`autoscaling` moved into the workload it scales: `gtp:workloads.<name>.autoscaling`",
    "image.offline": "it was renamed `image.airGap` (the same fields): 'offline' means the mocked plan",
}
"""Keys of earlier releases (top-level, or the key path inside a section), and where their content lives now."""
STRING_MAP_SECTIONS = ("tags",)
SECRET_KEYS = ("kubeconfig", "registryPassword", "swarmSecrets")
KNOWN_KEYS = (*SCALAR_DEFAULTS, *SECTIONS, *MAP_SECTIONS, *STRING_MAP_SECTIONS, *SECRET_KEYS)


def parse_stack_config(
    raw: Mapping[str, Any], *, project: str, stack: str, secret_keys: Iterable[str] = (),
    choices: Mapping[str, Sequence[str]] | None = None, rules: Iterable[Rule] = (),
    source: StackSource | None = None,
) -> StackConfig:
    """Parse the `gtp:` namespace of a stack (keys without the namespace) into a `StackConfig`.

    Values may be decoded objects or JSON strings (the Pulumi runtime hands structured config over as
    JSON). `choices` ("section.field" → allowed values) and `rules` come from the registries above this
    package (cluster targets, workload kinds; see `stages/config.py`). `source` is what the stack file itself
    says (duplicate keys, key lines; `stack_config.source`). Raises `ConfigError` listing every problem.
    """
    problems: list[Problem] = list(source.problems) if source is not None else []
    for key in raw:
        if key in MOVED_KEYS:
            problems.append(Problem(key, f"is no longer read: {MOVED_KEYS[key]}"))
        elif key not in KNOWN_KEYS:
            problems.append(_unknown_key(key, key, sorted(KNOWN_KEYS)))

    blocked: list[str] = []  # key paths of invalid fields, replaced by their defaults so the rest is still checked
    scalars = {key: str(raw.get(key, default)) for key, default in SCALAR_DEFAULTS.items()}
    parsed = _parse_sections(raw, problems, blocked)
    secrets = _parse_secrets(raw, set(secret_keys), problems)
    for key, value in parsed.items():
        if isinstance(value, dict) and key in MAP_SECTIONS:
            for name, entry in value.items():
                if entry is not None:
                    problems.extend(_unknown_keys(entry, f"{key}.{name}"))
        elif isinstance(value, BaseModel):
            problems.extend(_unknown_keys(value, key))
    _check_choices(parsed, choices or {}, problems)

    # Sections that failed to parse are replaced by their defaults so the other sections' rules still run;
    # a rule runs only when every section it reads parsed, so a default never causes a spurious problem.
    failed = {key for key, value in parsed.items() if value is None}
    groups = parsed.get("gpuNodeGroups") or {}
    workloads = parsed.get("workloads") or {}
    for key, entries in (("gpuNodeGroups", groups), ("workloads", workloads)):
        if any(entry is None for entry in entries.values()):
            failed.add(key)
    failed.update(key for key in (*SECTIONS, *MAP_SECTIONS, *STRING_MAP_SECTIONS) if key not in parsed)
    defaults: dict[str, Any] = {key: model() for key, model in SECTIONS.items()}
    sections = {**defaults, **{key: value for key, value in parsed.items() if value is not None}}
    config = StackConfig(
        project=project, stack=stack, name_prefix=scalars["namePrefix"], region=scalars["region"],
        kubernetes_version=scalars["kubernetesVersion"], cluster=sections["cluster"], network=sections["network"],
        gpu_node_groups={name: entry for name, entry in groups.items() if entry is not None}, gpu=sections["gpu"],
        image=sections["image"], kueue=sections["kueue"],
        workloads={name: entry for name, entry in workloads.items() if entry is not None},
        storage=sections["storage"], lifecycle=sections["lifecycle"], tags=sections.get("tags") or {},
        kubeconfig=secrets["kubeconfig"], registry_password=secrets["registryPassword"],
        swarm_secrets=secrets["swarmSecrets"],
    )
    partial = {path.split(".", 1)[0] for path in blocked}
    # A section with a key written twice holds the last value, which may not be the one meant: the rules that read it
    # from elsewhere wait, as for an invalid field (the run says how many).
    partial.update(path.split(".", 1)[0] for path in (source.duplicated if source is not None else ()) if "." in path)
    problems.extend(check_rules(config, failed=failed, extra=rules, partial=partial, blocked=blocked))
    skipped = skipped_rules(failed=failed, extra=rules, partial=partial)
    if source is not None:  # in file order (stable: problems of one key keep their order)
        problems.sort(key=lambda problem: source.line_of(problem.path))
    if problems:
        # One problem once, however many workloads or rules found it (e.g. no GPU node group at all).
        raise ConfigError(stack, list(dict.fromkeys(problems)),
                          waiting=(len(skipped), sorted(set().union(*skipped.values()))) if skipped else None)
    return config


def _parse_sections(raw: Mapping[str, Any], problems: list[Problem], blocked: list[str]) -> dict[str, Any]:
    """Top-level key → its parsed section (a model, a map of models, a map of strings); None for one that
    failed. Problems and the key paths of invalid fields (`blocked`) are appended."""
    parsed: dict[str, Any] = {}
    for key, model in SECTIONS.items():
        value = _decode(raw.get(key, {}), key, problems)
        if value is not None:
            parsed[key] = _validate(model, value, key, problems, blocked)
    for key, model in MAP_SECTIONS.items():
        value = _decode(raw.get(key, {}), key, problems)
        if isinstance(value, dict):
            parsed[key] = _parse_map(key, model, value, problems, blocked)
        elif value is not None:
            problems.append(Problem(key, f"{value!r} is not a map of name to object"))
    for key in STRING_MAP_SECTIONS:
        value = _decode(raw.get(key, {}), key, problems)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            parsed[key] = dict(value)
        elif value is not None:
            problems.append(Problem(key, f"{value!r} is not a map of string to string"))
    return parsed


def _parse_map(key: str, model: type[_Section], value: dict[str, Any], problems: list[Problem],
               blocked: list[str]) -> dict[str, Any]:
    """A map section's entries (None for one that failed); the entry's name is its key."""
    entries = {name: _validate(model, entry, f"{key}.{name}", problems, blocked) for name, entry in value.items()}
    if "name" not in model.model_fields:
        return entries
    for name, entry in value.items():
        if isinstance(entry, dict) and "name" in entry:
            problems.append(Problem(f"{key}.{name}.name", f"{entry['name']!r}: the name is the map key "
                                                          f"({name!r}); remove this key"))
    return {name: entry.model_copy(update={"name": name}) if entry is not None else None
            for name, entry in entries.items()}


def _parse_secrets(raw: Mapping[str, Any], secret_keys: set[str], problems: list[Problem]
                   ) -> dict[str, SecretStr | None]:
    """The secret keys' values; one given as plain config is a problem."""
    secrets: dict[str, SecretStr | None] = {}
    for key in SECRET_KEYS:
        value = raw.get(key)
        if value is not None and key not in secret_keys:
            problems.append(Problem(key, f"must be a Pulumi secret, not plain config: run "
                                         f"`pulumi config set --secret {key} ...`"))
        secrets[key] = SecretStr(str(value)) if value is not None else None
    return secrets


def _check_choices(parsed: dict[str, Any], choices: Mapping[str, Sequence[str]], problems: list[Problem]) -> None:
    """Values the registries allow ("section.field", or "section.*.field" for every entry of a map section); a
    section (or entry) with a value outside them is replaced by None, as if it failed to parse."""
    for dotted, allowed in choices.items():
        section, field = dotted.split(".", 1)
        if field.startswith("*."):  # a field of every entry of a map section
            entries = parsed.get(section) if isinstance(parsed.get(section), dict) else {}
            for name, entry in entries.items():
                value = getattr(entry, _snake(field[2:])) if isinstance(entry, BaseModel) else None
                if value is not None and value not in allowed:
                    problems.append(Problem(f"{section}.{name}.{field[2:]}", f"{value!r} is not allowed"
                                            f"{did_you_mean(str(value), allowed)}; allowed: {', '.join(allowed)}"))
                    entries[name] = None
            continue
        model = parsed.get(section)
        value = getattr(model, _snake(field)) if isinstance(model, BaseModel) else None
        if value is not None and value not in allowed:
            problems.append(Problem(dotted, f"{value!r} is not allowed{did_you_mean(str(value), allowed)}; allowed: "
                                            f"{', '.join(allowed)}"))
            parsed[section] = None


def load(*, choices: Mapping[str, Sequence[str]] | None = None, rules: Iterable[Rule] = (),
         stack_file: Path | None = None) -> StackConfig:
    """Read the `gtp:` namespace from the Pulumi runtime (real engine or mocks) and parse it once (see
    `parse_stack_config` for `choices` and `rules`). The stack file (default `stacks/Pulumi.<stack>.yaml` under
    the project directory, where the CLI runs the program) is read too, strictly: the runtime only sees the
    values left after YAML's last-one-wins, so a duplicate key can only be caught there."""
    prefix = NAMESPACE + ":"
    raw: dict[str, Any] = {}
    secret_keys = []
    # The SDK has no public "list all keys" call, and unknown keys must be reported, so read both places
    # the runtime keeps config: the values set in-process (mocks) and PULUMI_CONFIG (the engine).
    from pulumi.runtime import config as runtime_config

    all_keys = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    for full_key in sorted(all_keys):
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix):]
        raw[key] = runtime_config.get_config(full_key)
        if runtime_config.is_config_secret(full_key) or full_key in runtime_config.get_config_secret_keys_env():
            secret_keys.append(key)
    stack = pulumi.get_stack()
    source = read_stack_source(stack_file or Path.cwd() / "stacks" / f"Pulumi.{stack}.yaml")
    return parse_stack_config(raw, project=pulumi.get_project(), stack=stack, secret_keys=secret_keys,
                              choices=choices, rules=rules, source=source)


def _decode(value: Any, key: str, problems: list[Problem]) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            problems.append(Problem(key, f"is not valid JSON/YAML structured config ({error.msg})"))
            return None
    return value


def _validate(model: type[_Section], value: Any, path: str, problems: list[Problem], blocked: list[str]) -> Any:
    """The section, or `None` when it isn't an object. Invalid fields are reported, then dropped so that they take
    their defaults and the section's other fields are still validated and checked (their paths go to `blocked`,
    so that no rule reports a problem caused by such a default)."""
    try:
        return model.model_validate(value)
    except ValidationError as error:
        details = error.errors()
        for detail in details:
            problems.append(_problem_from_pydantic(path, detail, model))
        if not isinstance(value, dict):
            return None
        pruned = copy.deepcopy(value)
        for detail in details:
            loc = _field_loc(detail["loc"])
            if not loc or not _drop(pruned, loc):
                return None
            blocked.append(path + "".join(f".{part}" for part in loc))
        try:
            return model.model_validate(pruned)
        except ValidationError:
            return None


def _field_loc(loc: Sequence[Any]) -> list[str]:
    """The loc of an invalid value up to the field holding it (a list is dropped whole)."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            break
        parts.append(str(part))
    return parts


def _drop(raw: dict[str, Any], loc: list[str]) -> bool:
    node: Any = raw
    for part in loc[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


_RANGE_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _problem_from_pydantic(path: str, detail: Mapping[str, Any], model: type[BaseModel] | None = None) -> Problem:
    loc = path
    for part in detail["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else f".{part}"
    if detail["type"] == "missing":
        return Problem(loc, "required key is missing")
    message = detail["msg"]
    message = message[0].lower() + message[1:]
    if detail["type"] in _RANGE_ERRORS and model is not None:
        bounds = _bounds(model, detail["loc"])
        if bounds:
            return Problem(loc, f"{detail['input']!r} is out of range: allowed {bounds}")
    if detail["type"] == "literal_error" and isinstance(detail["input"], str):
        allowed = re.findall(r"'([^']*)'", str(detail.get("ctx", {}).get("expected", "")))
        message += did_you_mean(detail["input"], allowed)
    return Problem(loc, f"{detail['input']!r} is not allowed: {message}")


def _bounds(model: type[BaseModel], loc: Sequence[Any]) -> str | None:
    """Both bounds of the field at `loc` ("2..6", ">= 1 (no upper bound)"), from its constraints."""
    field = None
    for part in loc:
        if isinstance(part, int) or not isinstance(model, type) or not issubclass(model, BaseModel):
            return None
        field = next((f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
        if field is None:
            return None
        model = _model_of(field.annotation)
    if field is None:
        return None
    low = high = None
    low_text = high_text = ""
    for constraint in field.metadata:
        for attr, is_low, strict in (("ge", True, False), ("gt", True, True), ("le", False, False),
                                     ("lt", False, True)):
            value = getattr(constraint, attr, None)
            if value is None:
                continue
            if is_low:
                low, low_text = value, ("> " if strict else ">= ") + f"{value:g}"
            else:
                high, high_text = value, ("< " if strict else "<= ") + f"{value:g}"
    if low is not None and high is not None:
        if low_text.startswith(">=") and high_text.startswith("<="):
            return f"{low:g}..{high:g}"
        return f"{low_text} and {high_text}"
    if low is not None:
        return f"{low_text} (no upper bound)"
    if high is not None:
        return f"{high_text} (no lower bound)"
    return None


def _model_of(annotation: Any) -> Any:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


SECRET_WORDS = re.compile(r"passw|secret|token|credential|api[-_]?key|private[-_]?key|kubeconfig", re.IGNORECASE)
"""Key names that say their value is a secret."""


def _unknown_key(path: str, key: str, allowed: Sequence[str]) -> Problem:
    """An unknown key; one that names a secret says where secrets go (and that this one leaked into plain config)."""
    leaked = "it is written in plain text in the stack file: remove it from here, and rotate it"
    if key in SECRET_KEYS and path != key:
        return Problem(path, f"{key} is a stack secret, not a key of this section: set it with `pulumi config set "
                             f"--secret {key} ...` (stored encrypted at the top level); {leaked}")
    if SECRET_WORDS.search(key):
        return Problem(path, f"unknown key that looks like a secret: the stack's secrets are {', '.join(SECRET_KEYS)} "
                             "(a Swarm job's own go in swarmSecrets), each set with `pulumi config set --secret <name> "
                             f"...`; {leaked}")
    return Problem(path, f"unknown key{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")


def _unknown_keys(model: BaseModel, path: str) -> Iterator[Problem]:
    allowed = [field.alias or name for name, field in type(model).model_fields.items()]
    for key in (model.model_extra or {}):
        if f"{path}.{key}" in MOVED_KEYS:
            yield Problem(f"{path}.{key}", f"is no longer read: {MOVED_KEYS[f'{path}.{key}']}")
            continue
        yield _unknown_key(f"{path}.{key}", key, allowed)
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        child_path = f"{path}.{field.alias or name}"
        if isinstance(value, BaseModel):
            yield from _unknown_keys(value, child_path)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel):
                    yield from _unknown_keys(item, f"{child_path}.{key}")
