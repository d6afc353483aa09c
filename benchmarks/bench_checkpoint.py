"""Blocking time of async vs sync periodic checkpoints (time the training loop stands still per save).

    .venv/bin/python benchmarks/bench_checkpoint.py [--gpt-dim 256] [--gpt-layers 4]

Prints the median blocked ms per periodic save for each mode and the ratio async / sync (goal <= 0.2).
"""

import argparse
import json
import tempfile

from _common import launch, median, torchrun


def blocked_ms(async_checkpoint: bool, args) -> list[float]:
    with tempfile.TemporaryDirectory() as directory:
        flags = ["-m", "trainer.train", "--model", "gpt", "--gpt-dim", str(args.gpt_dim), "--gpt-layers",
                 str(args.gpt_layers), "--batch-size", "4", "--max-steps", str(args.saves * args.every + 1),
                 "--checkpoint-every", str(args.every), "--checkpoint-dir", directory, "--log-every", "1000"]
        if async_checkpoint:
            flags.append("--async-checkpoint")
        lines = launch(torchrun(2, flags))
    # Periodic saves only: the final save is always blocking by design.
    periodic = [record for record in lines if record.get("event") == "checkpoint" and record["rank"] == 0]
    return [record["blocked_ms"] for record in periodic[:-1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt-dim", type=int, default=256)
    parser.add_argument("--gpt-layers", type=int, default=4)
    parser.add_argument("--saves", type=int, default=6)
    parser.add_argument("--every", type=int, default=5)
    args = parser.parse_args()
    sync = blocked_ms(False, args)
    asynchronous = blocked_ms(True, args)
    print(json.dumps({"benchmark": "checkpoint", "sync_blocked_ms": round(median(sync), 2),
                      "async_blocked_ms": round(median(asynchronous), 2),
                      "ratio": round(median(asynchronous) / median(sync), 4), "goal": "<= 0.2",
                      "sync_runs": sync, "async_runs": asynchronous}))


if __name__ == "__main__":
    main()
