"""What the simulation's parts exchange: expanded pods, findings and per-check results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Modeled:
    """An upstream component whose behaviour a simulation module models, and the version whose code it was read at.

    Each module lists what it models in `MODELS`; tests/simulate/test_models.py holds every entry to the pin in
    catalog/versions.py, so a bump of that pin fails until the module is read again at the new version (and its
    `MODELS` and citations say so)."""

    pin: str
    """The pin in catalog/versions.py: a name (`KUEUE_VERSION`) or a chart's version (`KEDA.version`)."""
    version: str
    """The version the module's code and citations were read at, as the pin spells it."""


@dataclass(frozen=True)
class ExpandedPod:
    """A Pod exactly as a controller would create it from an object of the rendered cluster."""

    owner: str
    """What creates it, e.g. `PyTorchJob training/bench Worker`, `DaemonSet kube-system/nvidia-device-plugin`."""
    source: str
    """The owning object's `ClusterObject.source` (`stack`, `chart ...`, `operator ...`)."""
    namespace: str
    pod: dict[str, Any]
    """A full `v1` Pod object (apiVersion, kind, metadata, spec): the template plus what the controller injects."""
    count: int = 1
    """How many such pods exist at the largest scale the stack allows (a DaemonSet's: 1, per node)."""
    daemon: bool = False
    """A DaemonSet pod: one on every node it tolerates and selects."""
    queued_job: str | None = None
    """`<kind> <namespace>/<name>` of the job object that owns it when that object carries Kueue's queue label
    (Kueue admits the job's pods together, within its ClusterQueue); None when nothing queues it."""


@dataclass(frozen=True)
class Finding:
    """One miss: what, which rule it breaks, and how to fix it."""

    subject: str
    rule: str
    fix: str

    def line(self) -> str:
        return f"{self.subject}: {self.rule} — fix: {self.fix}"


@dataclass(frozen=True)
class Assumption:
    """A fact the check needs and a plan cannot know: it holds only if the running cluster makes it so (a domain's
    size, a node's real labels). Not a finding (the plan does not fail) and not a pass (N/N does not count it)."""

    subject: str
    assumes: str
    """What must hold at runtime for the subject to work."""
    known_from: str
    """Where only the running system answers it (an API, a controller), and what happens when it does not hold."""

    def line(self) -> str:
        return f"{self.subject}: assumes {self.assumes} — known only from {self.known_from}"


@dataclass
class CheckResult:
    """One line of simulation.json: `name` N/N, with every finding, and what it assumed instead of checking."""

    name: str
    total: int = 0
    passed: int = 0
    findings: list[Finding] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    """What was checked, one line each, for readers of simulation.json (not failures)."""
    assumptions: list[Assumption] = field(default_factory=list)
    """What only the running cluster can answer (`assume`): neither counted in `total` nor a finding."""

    def record(self, ok: bool, finding: Finding | None = None) -> None:
        self.total += 1
        if ok:
            self.passed += 1
        elif finding is not None:
            self.findings.append(finding)

    def assume(self, assumption: Assumption) -> None:
        """Instead of `record`: the subject's statically knowable parts hold, the rest is a runtime fact."""
        self.assumptions.append(assumption)

    def as_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "total": self.total,
                "findings": [{"subject": f.subject, "rule": f.rule, "fix": f.fix} for f in self.findings],
                "details": list(self.details),
                "assumptions": [{"subject": a.subject, "assumes": a.assumes, "known_from": a.known_from}
                                for a in self.assumptions]}
