"""What the mocks hid: the offline plan (the program under Pulumi's mocks, verify/plan.py) against the real engine's
state after `pulumi up` (`pulumi stack export`), resource by resource, each difference put in a kind with why.

The state holds what the engine sent to each provider: a custom resource's inputs as the provider's Check returned
them, its parent, provider, dependencies and options. A difference of a known kind is the mocks' blindness (they run
no provider and no engine), listed in the report; one of no known kind (UNEXPLAINED) fails `make up-test`: it is a
mock that records something the engine does not do, or a program whose inputs depend on more than its config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from verify.plan_diff import MISSING, changed_leaves

SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"
"""The signature key of a secret's envelope in exported state (sdk/go/common/resource/sig/sig.go `Key` at v3.274.0,
its value `Secret`)."""
AUTONAME_ANNOTATION = "pulumi.com/autonamed"
"""Set by the provider on an object it named (provider/pkg/metadata/naming.go `AssignNameIfAutonamable`, v4.25.0)."""
UNEXPLAINED = "unexplained"
PROVIDER_SPECIFIC = "provider-specific"


ABSENT = MISSING


@dataclass(frozen=True)
class Difference:
    urn: str
    what: str
    """`resource` (the resource itself), `inputs.<path>`, `parent`, `provider`, `dependency` or `options.<name>`."""
    mock: Any
    real: Any
    kind: str = UNEXPLAINED

    def line(self) -> str:
        return f"{self.urn}: {self.what}: {_show(self.mock)} (mock) vs {_show(self.real)} (real) [{self.kind}]"


def _show(value: Any) -> str:
    return repr(value)[:160]  # ABSENT shows as (absent)


def unsecret(value: Any) -> Any:
    """`value` with each secret envelope of exported state as the offline plan writes a secret: "[secret]"."""
    if isinstance(value, Mapping):
        if SECRET_SIGNATURE in value:
            return "[secret]"
        return {key: unsecret(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unsecret(item) for item in value]
    return value


def _zero(value: Any) -> bool:
    return value is ABSENT or value in (False, None, "", [], {}, 0)


Rule = Callable[[Difference, Mapping[str, Mapping[str, Any]]], bool]


def _type_of(urn: str) -> str:
    return urn.split("::")[2].split("$")[-1]


KINDS: dict[str, tuple[str, Rule]] = {
    "engine resource": (
        "the engine's own resources (the root Stack, a default provider): the mocks register none",
        lambda d, real: d.what == "resource" and d.mock is ABSENT and (
            _type_of(d.urn) == "pulumi:pulumi:Stack"
            or (_type_of(d.urn).startswith("pulumi:providers:") and d.urn.rsplit("::", 1)[1].startswith("default")))),
    "component inputs": (
        "a component resource's inputs: the engine keeps none in its state (a component has no provider to send "
        "them to)",
        lambda d, real: d.what.startswith("inputs.") and d.real is ABSENT and d.urn in real
        and not real[d.urn].get("custom", False)),
    "component provider": (
        "the provider a component was given: the engine's state records a provider for custom resources only (a "
        "component's provider reaches its children, and a remote component's constructs it)",
        lambda d, real: d.what == "provider" and d.real is None and d.urn in real
        and not real[d.urn].get("custom", False)),
    "auto-name": (
        "metadata.name the provider generates for an object the program left unnamed, and the annotation saying "
        "so (provider/pkg/metadata/naming.go at v4.25.0)",
        lambda d, real: d.mock is ABSENT and d.what in (
            "inputs.metadata.name", f"inputs.metadata.annotations.{AUTONAME_ANNOTATION}")),
    "provider default": (
        "a field the provider's Check fills in (a default the program did not send)",
        lambda d, real: d.what.startswith("inputs.") and d.mock is ABSENT and d.real is not ABSENT),
    "zero value dropped": (
        "a false, zero or empty field the provider's Check leaves out: the same object either way",
        lambda d, real: d.what.startswith("inputs.") and d.real is ABSENT and _zero(d.mock)),
    "implicit dependency": (
        "a dependency the program did not declare: the SDK records one for an input that is another resource's "
        "output, and a ConfigFile makes each object depend on the objects it needs first, its Namespace, its CRD, "
        "its ServiceAccount (provider/pkg/provider/yaml/v2/yaml.go:235-267 at v4.25.0); the mocks record only "
        "depends_on",
        lambda d, real: d.what == "dependency" and d.mock is ABSENT),
    "known after apply": (
        "a value the mocks see as <computed> (known only once another resource exists)",
        lambda d, real: d.mock == "<computed>" or (isinstance(d.mock, str) and "<computed>" in d.mock)),
}
"""Kind → (why it is the mocks' blindness, not a mistake; the rule that recognises it). First match wins."""


def _kind(difference: Difference, real: Mapping[str, Mapping[str, Any]],
          known: Mapping[tuple[str, str], str]) -> str:
    for name, (_why, rule) in KINDS.items():
        if rule(difference, real):
            return name
    if (_type_of(difference.urn), difference.what) in known:
        return PROVIDER_SPECIFIC
    return UNEXPLAINED


KNOWN: dict[tuple[str, str], str] = {
    ("kubernetes:helm.sh/v3:Release", "inputs.compat"):
        "the SDK always sends compat \"true\" (pulumi_kubernetes/helm/v3/Release.py: the schema's const, "
        "provider/pkg/gen/overlays.go:1158-1163 at v4.25.0); the provider's Check decodes the inputs into its "
        "`Release` struct, which has no such field (provider/pkg/provider/helm_release.go:68), and drops it",
}
"""(resource type, what) → why, for a difference that is one resource type's own behaviour."""


def _provider_urn(reference: str | None) -> str | None:
    # A provider reference is `<provider URN>::<provider ID>` (sdk/go/common/resource/providers/reference.go).
    return reference.rsplit("::", 1)[0] if reference else None


def compare(plan: Mapping[str, Any], state: Mapping[str, Any]) -> list[Difference]:
    """Every difference between the offline plan's resources (resources.json, with the objects each ConfigFile
    registers under the real provider: verify/render.py `config_file_children`) and the engine's state (`pulumi
    stack export`'s document), each with its kind."""
    from verify.render import registered

    mocked = {r["urn"]: r for r in registered(plan.get("resources", []))}
    real = {r["urn"]: r for r in state["deployment"].get("resources", [])}
    found: list[Difference] = []
    for urn in sorted(set(mocked) | set(real)):
        if urn not in real:
            found.append(Difference(urn, "resource", mocked[urn]["type"], ABSENT))
            continue
        if urn not in mocked:
            found.append(Difference(urn, "resource", ABSENT, real[urn]["type"]))
            continue
        found += _resource(urn, mocked[urn], real[urn])
    return [Difference(**{**asdict(d), "kind": _kind(d, real, KNOWN)}) for d in found]


def _resource(urn: str, mock: Mapping[str, Any], real: Mapping[str, Any]) -> list[Difference]:
    found = []
    real_inputs = unsecret({key: value for key, value in (real.get("inputs") or {}).items()
                            if not key.startswith("__")})  # __defaults, __inputs: the provider's bookkeeping
    # An empty mapping or list and none are the same object to the API server (a provider's Check drops either).
    found += [Difference(urn, f"inputs.{path}", before, after)
              for path, before, after in changed_leaves(mock.get("inputs") or {}, real_inputs, drop_empty=True)]
    if mock.get("parent") != real.get("parent"):
        found.append(Difference(urn, "parent", mock.get("parent"), real.get("parent")))
    if mock.get("provider") != _provider_urn(real.get("provider")):
        found.append(Difference(urn, "provider", mock.get("provider"), _provider_urn(real.get("provider"))))
    declared, recorded = set(mock.get("dependsOn") or []), set(real.get("dependencies") or [])
    found += [Difference(urn, "dependency", dep, ABSENT) for dep in sorted(declared - recorded)]
    found += [Difference(urn, "dependency", ABSENT, dep) for dep in sorted(recorded - declared)]
    options = mock.get("options") or {}
    for name in ("protect", "retainOnDelete"):
        if bool(options.get(name)) != bool(real.get(name)):
            found.append(Difference(urn, f"options.{name}", bool(options.get(name)), bool(real.get(name))))
    if sorted(options.get("ignoreChanges") or []) != sorted(real.get("ignoreChanges") or []):
        found.append(Difference(urn, "options.ignoreChanges", options.get("ignoreChanges") or [],
                                real.get("ignoreChanges") or []))
    return found


def summary(differences: list[Difference]) -> dict[str, Any]:
    """The report's section: per kind, why and each difference (one line each)."""
    out: dict[str, Any] = {}
    for difference in differences:
        if difference.kind in KINDS:
            why = KINDS[difference.kind][0]
        elif difference.kind == PROVIDER_SPECIFIC:
            why = "one resource type's own behaviour: " + "; ".join(
                f"{type_} {what}: {reason}" for (type_, what), reason in sorted(KNOWN.items()))
        else:
            why = ("no known kind: a mock that records what the engine does not, or a program whose inputs depend "
                   "on more than its config")
        entry = out.setdefault(difference.kind, {"why": why, "differences": []})
        entry["differences"].append(difference.line())
    return out
