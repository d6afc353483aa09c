"""A registry of traits: names (cluster modes, workload kinds) → the capabilities their owners declare.

The owners sit above this package in the layers (cluster_targets/, workload_kinds/), so they register here on
import and the config rules read what they registered (stack_config/targets.py, stack_config/kinds.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Capable:
    """Every registered name whose traits satisfy `predicate`: a value of an applicability condition
    (stack_config/applicability.py `on`, `when("@kind", ...)`), a test (`name in capable`), and the names a
    message lists, read when it is written."""

    predicate: Callable[[Any], bool]
    registry: Mapping[str, Any]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.registry and self.predicate(self.registry[name])

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names it stands for, sorted."""
        return tuple(sorted(name for name, traits in self.registry.items() if self.predicate(traits)))


class TraitsRegistry(Generic[T]):
    """Name → traits, filled by the owners' packages on import."""

    def __init__(self, noun: str, key: str, package: str) -> None:
        self.noun, self.key, self.package = noun, key, package
        """What is registered (`cluster target`), the config key that names it (`cluster.mode`), and the package
        whose import registers them (`cluster_targets`): for messages."""
        self.registered: dict[str, T] = {}

    def register(self, name: str, traits: T) -> None:
        """Record `name`'s traits; the same traits again are a no-op, other traits an error."""
        if self.registered.get(name, traits) != traits:
            raise ValueError(f"{self.noun} {name!r} is registered twice with different traits")
        self.registered[name] = traits

    def traits(self, name: str) -> T:
        """The registered traits of `name`; an unregistered name is an error, never an empty answer."""
        try:
            return self.registered[name]
        except KeyError:
            raise LookupError(f"no {self.noun} is registered for {self.key} {name!r} (registered: "
                              f"{', '.join(sorted(self.registered)) or 'none'}; importing {self.package} registers "
                              "them)") from None

    def capable(self, predicate: Callable[[T], bool]) -> Capable:
        """The registered names whose traits satisfy `predicate`."""
        return Capable(predicate, self.registered)
