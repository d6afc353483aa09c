"""Shared by tests/image: the lock's wheels, resolved once per architecture as the builder resolves them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tools import image_size


@pytest.fixture(scope="session")
def locked_wheels(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """architecture → a directory holding requirements.lock's wheels for the image Python on it (downloaded once,
    with `components.image_spec.lock_download_command`, the command tools/image_size.py runs)."""
    cache: dict[str, Path] = {}

    def wheels(architecture: str) -> Path:
        if architecture not in cache:
            dest = tmp_path_factory.mktemp(f"wheels-{architecture}")
            try:
                image_size.download_locked_wheels(dest, architecture)
            except subprocess.CalledProcessError as error:
                pytest.fail(f"{' '.join(error.cmd)} failed:\n{error.stdout}\n{error.stderr}")
            cache[architecture] = dest
        return cache[architecture]

    return wheels
