"""Message sizes of `python -m trainer.bench --sizes` (`4K`, `1M`, `1G`, a plain number of bytes).

No torch here: the platform reads a stack's `benchSizes` with this same function at plan time
(stack_config/consumers.py), so a size the bench would refuse is refused before anything is deployed.
"""

from __future__ import annotations

UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}
"""Size suffixes (any case, with an optional trailing B): powers of 1024."""


def parse_size(text: str) -> int:
    """Bytes of one size (`1M` → 1048576, `512` → 512, `1MB` → 1048576); `ValueError` if it is none."""
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)
