"""Cluster benchmark: all-reduce bus bandwidth over a size sweep and training throughput.

    torchrun --standalone --nproc-per-node 2 -m trainer.bench --sizes 1K,1M --steps 10 --output result.json

busbw follows nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, busbw = algbw * 2(n-1)/n for all-reduce,
so the number is comparable to the link speed whatever the rank count. MFU (GPU only) = achieved model FLOP/s over
the device's dense bf16 peak.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from datetime import datetime, timezone

import torch
import torch.distributed as dist

from trainer import nccl_net
from trainer.config import TrainConfig
from trainer.data import build_dataset
from trainer.distributed import exit_process, init_distributed
from trainer.loop import StopSignals, Trainer, seed_rank
from trainer.models import count_parameters, flops_per_token

PEAK_BF16_DENSE_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10G": 70.0}
"""Vendor datasheet dense (no sparsity) bf16 tensor-core peaks; matched as substrings of the device name."""


def parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def bus_bandwidth(size_bytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one all-reduce of ``size_bytes`` that took ``seconds``."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (world_size - 1) / world_size


def peak_tflops(device_name: str) -> float | None:
    # Longest key first so "H100" never shadows a longer, more specific name.
    for key in sorted(PEAK_BF16_DENSE_TFLOPS, key=len, reverse=True):
        if key in device_name:
            return PEAK_BF16_DENSE_TFLOPS[key]
    return None


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def allreduce_sweep(sizes: list[int], iterations: int, device: torch.device) -> list[dict]:
    world_size = dist.get_world_size()
    results = []
    for size in sizes:
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        for _ in range(max(1, iterations // 5)):  # warm-up: connection setup and algorithm selection
            dist.all_reduce(tensor)
        _synchronize(device)
        dist.barrier()
        started = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(tensor)
        _synchronize(device)
        elapsed = (time.perf_counter() - started) / iterations
        # The slowest rank defines the collective's time.
        slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        algbw, busbw = bus_bandwidth(tensor.numel() * 4, slowest.item(), world_size)
        results.append({"size_bytes": tensor.numel() * 4, "time_us": round(slowest.item() * 1e6, 2),
                        "algbw_gbps": round(algbw, 4), "busbw_gbps": round(busbw, 4)})
    return results


def throughput(config: TrainConfig, ctx, steps: int) -> dict:
    seed_rank(config.seed, ctx.rank)
    from trainer.models import build_model

    model = build_model(config)
    parameters = count_parameters(model)
    trainer = Trainer(config, ctx, model, build_dataset(config), StopSignals())
    warmup = max(1, steps // 5)
    for _ in range(warmup):
        trainer.train_step()
    _synchronize(ctx.device)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    _synchronize(ctx.device)
    elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = elapsed.item()
    samples = trainer.global_batch * steps
    tokens_per_sample = config.seq_len if config.model == "gpt" else 1
    result = {"model": config.model, "parameters": parameters, "steps": steps, "global_batch": trainer.global_batch,
              "samples_per_s": round(samples / seconds, 2),
              "tokens_per_s": round(samples * tokens_per_sample / seconds, 2),
              "step_time_ms": round(seconds / steps * 1000, 3)}
    if ctx.device.type == "cuda":
        name = torch.cuda.get_device_name(ctx.device)
        peak = peak_tflops(name)
        result["device_name"] = name
        if peak is not None:
            achieved = flops_per_token(model, config.seq_len) * samples * tokens_per_sample / seconds
            result["mfu"] = round(achieved / (peak * 1e12 * ctx.world_size), 4)
            result["peak_bf16_tflops_per_device"] = peak
    return result


def write_output(target: str, text: str, started_at: str) -> None:
    """Write the result to a file, or to S3 when `target` is `s3://bucket/prefix/` (one object per run, named
    by its start time and host, so runs never overwrite each other)."""
    if not target.startswith("s3://"):
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
        return
    try:
        import boto3
    except ImportError as error:  # the image carries boto3; a bare dev venv may not
        raise SystemExit(f"trainer.bench: error: --output {target} needs boto3 ({error})") from error
    bucket, _, prefix = target[len("s3://"):].partition("/")
    key = f"{prefix.rstrip('/')}/{started_at}-{socket.gethostname()}.json".lstrip("/")
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=text.encode(), ContentType="application/json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,16M,128M,1G",
                        help="Comma-separated all-reduce sizes in bytes (K/M/G suffixes). Default: 1M,16M,128M,1G.")
    parser.add_argument("--iterations", type=int, default=20, help="All-reduces timed per size. Default: 20.")
    parser.add_argument("--model", choices=["cnn", "gpt"], default="gpt", help="Model for throughput. Default: gpt.")
    parser.add_argument("--steps", type=int, default=20, help="Timed training steps. Default: 20.")
    parser.add_argument("--batch-size", type=int, default=8, help="Samples per rank per step. Default: 8.")
    parser.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto")
    parser.add_argument("--output", default=None,
                        help="Also write the JSON result to this file, or to a new object under s3://bucket/prefix/.")
    parser.add_argument("--nccl-log", default=None, metavar="PATH",
                        help="NCCL_DEBUG=INFO output of this run (e.g. NCCL_DEBUG_FILE); records which network NCCL "
                             "used, which tools.bench_report checks against FI_PROVIDER=efa.")
    args = parser.parse_args(argv)
    try:
        sizes = [parse_size(size) for size in args.sizes.split(",")]
    except ValueError:
        print(f"trainer.bench: error: --sizes {args.sizes!r} is not a comma-separated list like 1K,1M", file=sys.stderr)
        return 2
    ctx = init_distributed(args.backend)
    config = TrainConfig(model=args.model, batch_size=args.batch_size, max_steps=args.steps + 1, backend=args.backend)
    started_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    training = throughput(config, ctx, args.steps)
    # The shape `python -m tools.bench_report` reads (one JSON object per run, "kind": "bench").
    result = {"kind": "bench", "started_at": started_at, "world_size": ctx.world_size, "backend": ctx.backend,
              "torch": torch.__version__, "device": training.get("device_name", ctx.device.type),
              "git_sha": os.environ.get("GTP_GIT_SHA"),
              "allreduce": allreduce_sweep(sizes, args.iterations, ctx.device), "training": training,
              "instance_type": os.environ.get("GTP_INSTANCE_TYPE"), "network": network_usage(args.nccl_log)}
    if ctx.is_main:
        line = json.dumps(result)
        print(line, flush=True)
        if args.output:
            write_output(args.output, line + "\n", started_at)
    dist.barrier()
    return 0


def network_usage(nccl_log: str | None) -> dict:
    """{"requested": "efa" when FI_PROVIDER=efa, "used": NCCL's network from the log, or None without one}."""
    requested = "efa" if os.environ.get("FI_PROVIDER", "").split(",")[0] == "efa" else None
    used = None
    if nccl_log:
        try:
            with open(nccl_log, encoding="utf-8", errors="replace") as handle:
                used = nccl_net.parse(handle.read()).transport
        except OSError as error:
            print(f"trainer.bench: cannot read --nccl-log {nccl_log}: {error}", file=sys.stderr)
    return {"requested": requested, "used": used}


def run() -> None:
    try:
        code = main()
    except SystemExit as exit_request:
        code = exit_request.code if isinstance(exit_request.code, int) else 2
    exit_process(code)


if __name__ == "__main__":
    run()
