"""Blocking time of async vs sync periodic checkpoints (time the training loop stands still per save).

    .venv/bin/python benchmarks/bench_checkpoint.py [--gpt-dim 512] [--gpt-layers 8]

Both modes run side by side in one invocation on the same model (the defaults give ~300 MB of model and Adam
state). Prints the median blocked ms per periodic save for each mode, the ratio async / sync (goal <= 0.1), and
how much of an async save's block was the staging copy into the reused host buffers (trainer/checkpoint.py
ReusedStager): the floor an async save can't go under. The first async save allocates those buffers; it is
reported apart and left out of the median.
"""

import argparse
import json
import tempfile

from _common import launch, median, torchrun


def periodic_saves(async_checkpoint: bool, args) -> list[dict]:
    with tempfile.TemporaryDirectory() as directory:
        flags = ["-m", "trainer.train", "--model", "gpt", "--gpt-dim", str(args.gpt_dim), "--gpt-layers",
                 str(args.gpt_layers), "--batch-size", "4", "--max-steps", str(args.saves * args.every + 1),
                 "--checkpoint-every", str(args.every), "--checkpoint-dir", directory, "--log-every", "1000"]
        if async_checkpoint:
            flags.append("--async-checkpoint")
        lines = launch(torchrun(2, flags))
    # Periodic saves only: the final save is always blocking by design.
    periodic = [record for record in lines if record.get("event") == "checkpoint" and record["rank"] == 0]
    return periodic[:-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt-dim", type=int, default=512)
    parser.add_argument("--gpt-layers", type=int, default=8)
    parser.add_argument("--saves", type=int, default=7)
    parser.add_argument("--every", type=int, default=5)
    args = parser.parse_args()
    sync = [record["blocked_ms"] for record in periodic_saves(False, args)]
    first, *steady = periodic_saves(True, args)
    asynchronous = [record["blocked_ms"] for record in steady]
    staging = [record["staging_ms"] for record in steady]
    print(json.dumps({"benchmark": "checkpoint", "gpt_dim": args.gpt_dim, "gpt_layers": args.gpt_layers,
                      "sync_blocked_ms": round(median(sync), 2), "async_blocked_ms": round(median(asynchronous), 2),
                      "ratio": round(median(asynchronous) / median(sync), 4), "goal": "<= 0.1",
                      "async_staging_ms": round(median(staging), 2),
                      "staging_share_of_async_block": round(median(staging) / median(asynchronous), 3),
                      "first_async_save_ms": first["blocked_ms"], "first_async_staging_ms": first["staging_ms"],
                      "sync_runs": sync, "async_runs": asynchronous, "async_staging_runs": staging}))


if __name__ == "__main__":
    main()
