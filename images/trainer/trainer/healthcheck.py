"""Init-container check: is this node fit to train?

Prints one JSON line ``{"ok": bool, "checks": [{"name", "ok", "detail"}, ...]}`` and exits 0 when every check
passed, 1 otherwise. Checks: visible GPU count, CUDA driver vs the image's CUDA, torch/NCCL versions, /dev/shm
size (NCCL and DataLoader workers need shared memory; Kubernetes' default is 64 MiB), checkpoint dir writable, and
with ``--expect-net efa|socket`` the network NCCL used according to its INFO log (``--nccl-log``; see nccl_net).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass

import torch

from trainer import nccl_net


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_gpu_count(expected: int) -> Check:
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return Check("gpu_count", visible == expected, f"expected {expected} visible GPU(s), found {visible}")


def check_cuda_driver(expected_gpus: int) -> Check:
    if expected_gpus == 0:
        return Check("cuda_driver", True, f"no GPU expected; torch CUDA build {torch.version.cuda}")
    if torch.version.cuda is None:
        return Check("cuda_driver", False, "GPUs expected but this torch build has no CUDA support")
    try:
        # Creating a context is what fails when the driver is older than the CUDA runtime torch was built with.
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        name = torch.cuda.get_device_name(0)
        return Check("cuda_driver", True, f"CUDA {torch.version.cuda} initialised on {name}")
    except Exception as error:
        return Check("cuda_driver", False, f"CUDA {torch.version.cuda} failed to initialise (driver too old or "
                                           f"no device): {error}")


def check_versions(expected_torch: str | None, expected_nccl: str | None) -> list[Check]:
    checks = []
    if expected_torch:
        actual = torch.__version__
        # "2.13.0" matches "2.13.0+cu128": the local suffix names the build, not the version.
        ok = actual == expected_torch or actual.split("+")[0] == expected_torch
        checks.append(Check("torch_version", ok, f"expected {expected_torch}, found {actual}"))
    if expected_nccl:
        try:
            actual_nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
        except Exception as error:
            actual_nccl = f"unavailable ({error})"
        checks.append(Check("nccl_version", actual_nccl == expected_nccl,
                            f"expected {expected_nccl}, found {actual_nccl}"))
    return checks


def check_shm(path: str, min_gib: float) -> Check:
    try:
        stats = os.statvfs(path)
    except OSError as error:
        return Check("shm_size", False, f"{path}: {error}")
    size_gib = stats.f_frsize * stats.f_blocks / 2**30
    return Check("shm_size", size_gib >= min_gib,
                 f"{path} is {size_gib:.2f} GiB, need >= {min_gib} GiB (mount an emptyDir medium: Memory)")


def check_writable(directory: str) -> Check:
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".healthcheck-") as handle:
            handle.write(b"ok")
            handle.flush()
            os.fsync(handle.fileno())
        return Check("checkpoint_dir_writable", True, f"{directory} is writable")
    except OSError as error:
        return Check("checkpoint_dir_writable", False, f"{directory} is not writable: {error}")


def check_nccl_net(expect: str, log_path: str | None) -> Check:
    if log_path is None:
        return Check("nccl_net", False, f"--expect-net {expect} needs --nccl-log: the NCCL_DEBUG=INFO output of a "
                                        f"multi-node run (e.g. nccl-tests) to read the network from")
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as error:
        return Check("nccl_net", False, f"cannot read NCCL log {log_path}: {error}")
    ok, detail = nccl_net.verify(nccl_net.parse(text), expect)
    return Check("nccl_net", ok, detail)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer.healthcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--expect-gpus", type=int, default=0, metavar="N",
                        help="GPUs that must be visible (0 passes on CPU nodes). Default: 0.")
    parser.add_argument("--expect-torch", default=os.environ.get("TRAINER_EXPECT_TORCH_VERSION"), metavar="VER",
                        help="torch version the image pins; compared only when given. Default: "
                             "$TRAINER_EXPECT_TORCH_VERSION.")
    parser.add_argument("--expect-nccl", default=os.environ.get("TRAINER_EXPECT_NCCL_VERSION"), metavar="VER",
                        help="NCCL version (e.g. 2.27.5); compared only when given. Default: "
                             "$TRAINER_EXPECT_NCCL_VERSION.")
    parser.add_argument("--min-shm-gib", type=float, default=1.0, metavar="GIB",
                        help="Minimum size of the shared-memory mount. Default: 1.")
    parser.add_argument("--shm-path", default="/dev/shm", metavar="PATH",
                        help="Shared-memory mount to measure. Default: /dev/shm.")
    parser.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                        help="Checkpoint dir that must be writable; skipped when not given.")
    parser.add_argument("--expect-net", choices=nccl_net.EXPECTATIONS, default="any",
                        help="Network NCCL must have used: efa (aws-ofi-nccl with libfabric's efa provider), socket, "
                             "or any (not checked). Default: any.")
    parser.add_argument("--nccl-log", default=None, metavar="PATH",
                        help="NCCL_DEBUG=INFO output to read the network from; needed with --expect-net efa|socket.")
    return parser


def run_checks(args: argparse.Namespace) -> list[Check]:
    checks = [check_gpu_count(args.expect_gpus), check_cuda_driver(args.expect_gpus)]
    checks += check_versions(args.expect_torch, args.expect_nccl)
    checks.append(check_shm(args.shm_path, args.min_shm_gib))
    if args.checkpoint_dir:
        checks.append(check_writable(args.checkpoint_dir))
    if args.expect_net != "any":
        checks.append(check_nccl_net(args.expect_net, args.nccl_log))
    return checks


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checks = run_checks(args)
    ok = all(check.ok for check in checks)
    print(json.dumps({"ok": ok, "checks": [asdict(check) for check in checks],
                      "failed": [check.name for check in checks if not check.ok]}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
