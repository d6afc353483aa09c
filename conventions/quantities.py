"""Kubernetes resource quantities (`16Gi`, `500m`, `2`) as numbers.

Only the forms the platform writes and reads back are accepted (a decimal number and one suffix); anything else
raises `ValueError` with what to write instead, and the config step reports it with its key path before anything
is registered (`stack_config.rules`).
"""

from __future__ import annotations

import math
import re

_MEMORY = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")
_FACTORS = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
            "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_CPU = re.compile(r"(\d+(?:\.\d+)?)(m)?")
MEMORY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "k", "M", "G", "T", "P")


def quantity_gib(quantity: str) -> float:
    """A Kubernetes memory quantity in GiB ("16Gi" → 16.0, "512Mi" → 0.5)."""
    match = _MEMORY.fullmatch(str(quantity).strip())
    if not match:
        raise ValueError(f"{quantity!r} is not a memory quantity like '16Gi' or '512Mi' (a number with one suffix: "
                         f"{', '.join(MEMORY_SUFFIXES)}, or none for bytes)")
    return float(match.group(1)) * _FACTORS[match.group(2)] / 2**30


def cpu_cores(cpu: str) -> float:
    """A CPU quantity in cores ("500m" → 0.5, "8" → 8.0)."""
    match = _CPU.fullmatch(str(cpu).strip())
    if not match:
        raise ValueError(f"{cpu!r} is not a CPU quantity like '8', '7.5' or '500m' (cores, or millicores with 'm')")
    return float(match.group(1)) / (1000 if match.group(2) else 1)


def whole_cores(cpu: str) -> int:
    """A CPU quantity rounded up to whole cores."""
    return math.ceil(cpu_cores(cpu))
