"""The CPU stand-in base's contract against the official base's pin, and the parts of tools/engine_base that need no
engine (the engine tests build and check the real thing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from catalog import versions
from components import image_spec
from tools import engine_base
from tools.engine import EngineError

DOCKERFILE = Path(__file__).resolve().parents[2] / "images" / "trainer" / "Dockerfile"


def test_the_official_base_pin_satisfies_the_contract_the_stand_in_asserts() -> None:
    """The stand-in is only a fair substitute while the official base holds the same contract: its torch (from the
    pinned tag) and its Python minor (what requirements.lock is resolved for) are the contract's."""
    tag = versions.PYTORCH_BASE_IMAGE.split("@")[0].split(":")[1]
    assert tag.split("-")[0] == engine_base.BASE_CONTRACT.torch_version == versions.TORCH_VERSION
    assert image_spec.BASE_IMAGE_PYTHON_VERSION in engine_base.BASE_CONTRACT.python_minors


def test_the_contract_is_stated_in_the_dockerfile() -> None:
    header = DOCKERFILE.read_text().split("\nARG ")[0]
    assert "tools/engine_base.BASE_CONTRACT" in header
    for minor in engine_base.BASE_CONTRACT.python_minors:
        assert minor in header
    for command in ("torchrun", "groupadd", "useradd"):
        assert command in header


def test_torch_closure_follows_the_extras_torch_asks_for() -> None:
    """torch requires `cuda-toolkit[cudart,...]`: without following extras the base lacked libcudart and torch
    failed to import (the first real build)."""
    names = {canonicalize_name(distribution.metadata["Name"]) for distribution in engine_base.torch_closure()}
    assert {"torch", "cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cublas", "typing-extensions"} <= names


def test_base_key_is_stable_and_names_the_torch_files() -> None:
    closure = engine_base.torch_closure()
    assert engine_base.base_key(closure) == engine_base.base_key(closure)
    assert re.fullmatch(r"[0-9a-f]{16}", engine_base.base_key(closure))
    assert engine_base.base_key(closure) != engine_base.base_key(closure[:-1])


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("sources.list.d/debian.sources",
     "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\nTypes: deb\n"
     "URIs: http://mirror.example/debian-security\nSuites: bookworm-security\n", "http://mirror.example/debian"),
    ("sources.list", "deb [arch=amd64] http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"),
])
def test_apt_mirror_is_the_hosts_own(tmp_path: Path, name: str, text: str, expected: str) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / name).write_text(text)
    assert engine_base.apt_mirror(tmp_path) == expected


def test_no_apt_mirror_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="no Debian mirror found in /etc/apt"):
        engine_base.apt_mirror(tmp_path)
