"""The simulation's models of upstream controllers are tied to the pins: each module declares what it models
(`MODELS`), a module that cites a component's version declares that component, and every declaration is the pinned
version, so a pin that moves fails here until the model is read again."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import verify.simulate
from catalog import versions
from verify.simulate.model import Modeled

# A citation of a component at a version, in a module's text → the pin it models. The training-operator's repository
# is now kubeflow/trainer: its v1 tags are the training-operator, v2 tags Kubeflow Trainer.
CITATIONS = {
    "KUEUE_VERSION": r"Kueue v\d",
    "TRAINING_OPERATOR_VERSION": r"training-operator v\d|kubeflow/trainer v1\.",
    "DLROVER_VERSION": r"(?i:dlrover) v\d",
    "KUBEFLOW_TRAINER_VERSION": r"Kubeflow Trainer v\d|trainer@v2\.",
    "JOBSET_VERSION": r"JobSet v\d",
    "KEDA.version": r"KEDA v?\d",
    "NVIDIA_DEVICE_PLUGIN.version": r"device plugin v\d",
    "CLUSTER_AUTOSCALER_VERSION": r"cluster-autoscaler \d",
}


def modules() -> list[str]:
    return sorted(f"verify.simulate.{info.name}" for info in pkgutil.iter_modules(verify.simulate.__path__))


def pinned(pin: str) -> str:
    value: object = versions
    for name in pin.split("."):
        value = getattr(value, name)
    assert isinstance(value, str), pin
    return value


def test_the_citation_table_names_real_pins() -> None:
    for pin in CITATIONS:
        pinned(pin)


@pytest.mark.parametrize("module", modules())
def test_a_module_models_the_pinned_version_of_every_component_it_cites(module: str) -> None:
    loaded = importlib.import_module(module)
    declared: tuple[Modeled, ...] = getattr(loaded, "MODELS", ())
    stale = [(entry.pin, entry.version, pinned(entry.pin)) for entry in declared if entry.version != pinned(entry.pin)]
    assert not stale, f"{module} models {stale} (pin, modelled, pinned): read the upstream code at the pinned " \
                      "version again, then update MODELS and the citations"
    text = Path(loaded.__file__ or "").read_text()
    cited = {pin for pin, pattern in CITATIONS.items() if re.search(pattern, text)}
    assert cited <= {entry.pin for entry in declared}, f"{module} cites {sorted(cited)} but declares " \
                                                        f"{sorted(entry.pin for entry in declared)} in MODELS"


def test_the_rule_catches_a_moved_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue bumped in catalog/versions.py and the queue model not read again: the check above fails."""
    monkeypatch.setattr(versions, "KUEUE_VERSION", "v0.20.0")
    with pytest.raises(AssertionError, match="KUEUE_VERSION"):
        test_a_module_models_the_pinned_version_of_every_component_it_cites("verify.simulate.queue")


def test_the_rule_catches_a_citation_without_a_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that cites KEDA's version but declares no model of it fails."""
    monkeypatch.setattr(importlib.import_module("verify.simulate.queries"), "MODELS", ())
    with pytest.raises(AssertionError, match="cites"):
        test_a_module_models_the_pinned_version_of_every_component_it_cites("verify.simulate.queries")
