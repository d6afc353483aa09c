"""A config problem (key path + what is wrong + what is allowed) and the error that lists all of them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

import pulumi


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a stack's config: where it is and what is allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(pulumi.RunError):
    """Invalid stack config. A `RunError`, so `pulumi up` prints the message without a stack trace."""

    def __init__(self, stack: str, problems: list[Problem], waiting: tuple[int, list[str]] | None = None):
        """`waiting`: how many checks did not run, and the sections they wait for (those that failed to parse, or
        were read with invalid fields at their defaults): fixing the problems listed may bring more."""
        self.problems = problems
        self.waiting = waiting
        lines = "\n".join(f"  - {p}" for p in problems)
        more = ""
        if waiting is not None:
            count, sections = waiting
            more = (f"\n  {count} more check(s) did not run until {', '.join(sections)} parse(s) cleanly: they read "
                    "those sections; fix the problems above and run again")
        super().__init__(f"stack '{stack}' has {len(problems)} config problem(s):\n{lines}{more}")


def did_you_mean(key: str, allowed: Iterable[str], cutoff: float = 0.6) -> str:
    """` (did you mean 'x'?)` for the closest of `allowed` (keys and values alike), or nothing. Short values such
    as versions need a higher `cutoff`, or '1.20' would suggest '1.32'."""
    close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=cutoff)
    return f" (did you mean '{close[0]}'?)" if close else ""
