"""tools/image_size.py: what the image adds on top of its base, measured, and held under the 300 MB budget."""

from __future__ import annotations

import re
import shlex
import zipfile
from pathlib import Path

import pytest

from components import image_spec
from tools import image_size

MB = image_size.MB


def _wheel(directory: Path, name: str, installed: int) -> Path:
    """A synthetic wheel whose one member unzips to `installed` bytes (zeros: a tiny download)."""
    path = directory / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{name}/data.bin", b"\0" * installed)
        archive.writestr(f"{name}-1.0.dist-info/", b"")  # a directory entry counts nothing
    return path


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    _wheel(tmp_path, "small", 1 * MB)
    _wheel(tmp_path, "large", 3 * MB)
    _wheel(tmp_path, "medium", 2 * MB)
    return tmp_path


def test_measure_sorts_by_installed_size_and_reads_both_sizes(synthetic: Path) -> None:
    sizes = image_size.measure(synthetic)
    assert [s.name.split("-")[0] for s in sizes] == ["large", "medium", "small"]
    assert [s.installed for s in sizes] == [3 * MB, 2 * MB, 1 * MB]
    for size in sizes:
        assert size.download == (synthetic / size.name).stat().st_size < size.installed / 100


def test_under_budget_exits_0_and_prints_the_total(synthetic: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert image_size.main(["--wheels", str(synthetic), "--budget-mb", "6"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"total: 6\.0 MB installed, 0\.0 MB download, 3 wheels; budget 6 MB installed: ok", out), out
    assert out.index("large-1.0") < out.index("medium-1.0") < out.index("small-1.0")


def test_over_budget_exits_1_and_says_by_how_much(synthetic: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert image_size.main(["--wheels", str(synthetic), "--budget-mb", "5.5"]) == 1
    assert "budget 5.5 MB installed: OVER by 0.5 MB" in capsys.readouterr().out


def test_missing_wheel_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert image_size.main(["--wheels", str(tmp_path / "absent")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_download_command_resolves_like_the_builder() -> None:
    command = image_spec.lock_download_command("requirements.lock", "/wheels", "aarch64")
    # The builder's own flags (the Dockerfile's RUN, asserted in test_dockerfile.py), plus the image's Python
    # and platform named explicitly because this runs on another host.
    for flag in ("--require-hashes", "--only-binary=:all:", "--dest /wheels", "--requirement requirements.lock",
                 "--implementation=cp", f"--python-version={image_spec.BASE_IMAGE_PYTHON_VERSION}",
                 "--platform=manylinux_2_28_aarch64"):
        assert flag in shlex.join(command), flag
    with pytest.raises(ValueError, match="architecture must be one of"):
        image_spec.lock_download_command("requirements.lock", "/wheels", "arm64")


@pytest.mark.parametrize("architecture", image_spec.IMAGE_ARCHITECTURES)
def test_the_real_lock_fits_the_budget(locked_wheels, architecture: str, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = locked_wheels(architecture)
    sizes = image_size.measure(wheels)
    assert len(sizes) == len(list(wheels.glob("*.whl"))) > 10
    total = sum(size.installed for size in sizes)
    assert 10 * MB < total <= image_size.BUDGET_MB * MB, total
    assert image_size.main(["--wheels", str(wheels)]) == 0
    assert "budget 300 MB installed: ok" in capsys.readouterr().out
