"""Which helm renders the vendored charts (render.py) and names the plan cache's tools (plan_cache.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def helm_binary() -> str:
    """The helm `make setup` installed (next to the venv's python: tools/vendor.py pins it), else one on PATH."""
    local = Path(sys.executable).parent / "helm"
    if local.exists():
        return str(local)
    found = shutil.which("helm")
    if found is None:
        raise FileNotFoundError("no helm binary: run `make setup` (it installs the pinned helm into .venv/bin)")
    return found
