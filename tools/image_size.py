"""What the training image adds on top of its base: every wheel, its download and installed size, and a budget.

    python -m tools.image_size                      # both architectures, wheels resolved from the lock
    python -m tools.image_size --arch x86_64        # one architecture
    python -m tools.image_size --wheels DIR         # measure the wheels already in DIR

The base (PyTorch, CUDA) is pinned by digest and not ours to trim; what we add is the runtime stage's one
`pip install` of the builder's wheels: requirements.lock plus the trainer wheel. The wheels are resolved exactly
as the builder resolves them (`components.image_spec.lock_download_command`, the command tests/image also runs)
and the trainer wheel is built with the builder's command (`trainer_wheel_build_command`).

Installed size is a wheel's unzipped size (the sum of its members' sizes): what the layer holds, give or take
the `.pyc` files pip compiles and the filesystem's block rounding. Exits 1 when any architecture's installed
total is over the budget (300 MB by default), 2 when the wheels can't be resolved.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from components import image_spec

ROOT = Path(__file__).resolve().parent.parent
CONTEXT = ROOT / "images" / "trainer"
LOCK = CONTEXT / "requirements.lock"
BUDGET_MB = 300
MB = 1000 * 1000


@dataclass(frozen=True)
class WheelSize:
    name: str
    download: int
    """Bytes of the .whl file."""
    installed: int
    """Bytes once unzipped: the sum of the members' uncompressed sizes."""


def measure(wheel_dir: Path) -> list[WheelSize]:
    """Every wheel in `wheel_dir`, largest installed size first (then by name)."""
    sizes = []
    for wheel in wheel_dir.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            installed = sum(member.file_size for member in archive.infolist() if not member.is_dir())
        sizes.append(WheelSize(wheel.name, wheel.stat().st_size, installed))
    return sorted(sizes, key=lambda size: (-size.installed, size.name))


def download_locked_wheels(dest: Path, architecture: str, lock: Path = LOCK) -> None:
    """The builder's wheels of requirements.lock for `architecture` into `dest` (raises CalledProcessError)."""
    command = image_spec.lock_download_command(str(lock), str(dest), architecture, python=sys.executable)
    subprocess.run(command, check=True, capture_output=True, text=True)


def build_trainer_wheel(dest: Path, context: Path = CONTEXT) -> None:
    """The trainer wheel, built as the builder stage builds it (pure Python: the same for every architecture)."""
    command = image_spec.trainer_wheel_build_command(str(dest))
    subprocess.run([sys.executable, *command[1:]], cwd=context, check=True, capture_output=True, text=True)


def report(title: str, sizes: list[WheelSize], budget_mb: float) -> tuple[str, bool]:
    """The table for one architecture and whether its installed total fits the budget."""
    total_installed = sum(size.installed for size in sizes)
    total_download = sum(size.download for size in sizes)
    fits = total_installed <= budget_mb * MB
    lines = [title, f"  {'installed':>10}  {'download':>10}  wheel"]
    lines += [f"  {size.installed / MB:>7.1f} MB  {size.download / MB:>7.1f} MB  {size.name}" for size in sizes]
    lines.append(f"  total: {total_installed / MB:.1f} MB installed, {total_download / MB:.1f} MB download, "
                 f"{len(sizes)} wheels; budget {budget_mb:g} MB installed: "
                 + ("ok" if fits else f"OVER by {(total_installed - budget_mb * MB) / MB:.1f} MB"))
    return "\n".join(lines), fits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.image_size", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=[*image_spec.IMAGE_ARCHITECTURES, "all"], default="all",
                        help="Linux architecture to resolve the lock for (default: all)")
    parser.add_argument("--wheels", type=Path, help="measure the wheels in this directory instead of resolving")
    parser.add_argument("--budget-mb", type=float, default=BUDGET_MB,
                        help=f"installed-size budget in MB (10^6 bytes; default {BUDGET_MB})")
    args = parser.parse_args(argv)

    if args.wheels is not None:
        if not args.wheels.is_dir():
            print(f"image size: --wheels {args.wheels}: not a directory", file=sys.stderr)
            return 2
        text, fits = report(f"image size: wheels in {args.wheels}", measure(args.wheels), args.budget_mb)
        print(text)
        return 0 if fits else 1

    architectures = image_spec.IMAGE_ARCHITECTURES if args.arch == "all" else (args.arch,)
    all_fit = True
    with tempfile.TemporaryDirectory(prefix="gtp-image-size-") as temp:
        trainer = Path(temp) / "trainer"
        try:
            build_trainer_wheel(trainer)
        except subprocess.CalledProcessError as error:
            print(f"image size: building the trainer wheel failed:\n{error.stderr}", file=sys.stderr)
            return 2
        for architecture in architectures:
            wheels = Path(temp) / architecture
            try:
                download_locked_wheels(wheels, architecture)
            except subprocess.CalledProcessError as error:
                print(f"image size: resolving {LOCK.name} for {architecture} failed:\n{error.stderr}", file=sys.stderr)
                return 2
            for wheel in trainer.glob("*.whl"):
                (wheels / wheel.name).write_bytes(wheel.read_bytes())
            title = (f"image size: wheels added on top of the base, linux/{architecture}, "
                     f"CPython {image_spec.BASE_IMAGE_PYTHON_VERSION}")
            text, fits = report(title, measure(wheels), args.budget_mb)
            print(text)
            all_fit = all_fit and fits
    return 0 if all_fit else 1


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
