"""Kubernetes resource quantities (`16Gi`, `500m`, `2`) as numbers."""

from __future__ import annotations

import math
import re

_MEMORY = re.compile(r"([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?")
_FACTORS = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def quantity_gib(quantity: str) -> float:
    """A Kubernetes memory quantity in GiB ("16Gi" → 16.0, "512Mi" → 0.5)."""
    match = _MEMORY.fullmatch(quantity.strip())
    if not match:
        raise ValueError(f"{quantity!r} is not a memory quantity like '16Gi'")
    return float(match.group(1)) * _FACTORS[match.group(2)] / 2**30


def cpu_cores(cpu: str) -> float:
    """A CPU quantity in cores ("500m" → 0.5, "8" → 8.0)."""
    return float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)


def whole_cores(cpu: str) -> int:
    """A CPU quantity rounded up to whole cores."""
    return math.ceil(cpu_cores(cpu))
