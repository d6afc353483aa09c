"""Trainer samples/s vs a minimal bare DDP loop, same model, data and launcher, run alternately.

    .venv/bin/python benchmarks/bench_throughput.py [--rounds 3] [--steps 300] [--model cnn]

Prints the medians and the ratio trainer / bare (goal >= 0.98). No assertion: numbers depend on the machine.
"""

import argparse
import json
from pathlib import Path

from _common import launch, median, torchrun


def trainer_samples_per_s(model: str, batch_size: int, steps: int, warmup: int) -> float:
    lines = launch(torchrun(2, ["-m", "trainer.train", "--model", model, "--batch-size", str(batch_size),
                                "--max-steps", str(warmup + steps), "--log-every", str(warmup)]))
    steps_logged = [record for record in lines if record.get("event") == "step" and record["rank"] == 0]
    first, last = steps_logged[0], steps_logged[-1]
    # Wall clock between two log lines: includes every per-step cost of the loop, logging included.
    return (last["global_sample_index"] - first["global_sample_index"]) / (last["time"] - first["time"])


def bare_samples_per_s(model: str, batch_size: int, steps: int, warmup: int) -> float:
    script = str(Path(__file__).with_name("_bare_ddp.py"))
    lines = launch(torchrun(2, [script, "--model", model, "--batch-size", str(batch_size), "--steps", str(steps),
                                "--warmup", str(warmup)]))
    return lines[-1]["samples_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default="cnn")
    args = parser.parse_args()
    trainer, bare = [], []
    for _ in range(args.rounds):
        trainer.append(trainer_samples_per_s(args.model, args.batch_size, args.steps, args.warmup))
        bare.append(bare_samples_per_s(args.model, args.batch_size, args.steps, args.warmup))
    print(json.dumps({"benchmark": "throughput", "model": args.model, "world_size": 2,
                      "trainer_samples_per_s": round(median(trainer), 1),
                      "bare_ddp_samples_per_s": round(median(bare), 1),
                      "ratio": round(median(trainer) / median(bare), 4), "goal": ">= 0.98",
                      "trainer_runs": [round(value, 1) for value in trainer],
                      "bare_runs": [round(value, 1) for value in bare]}))


if __name__ == "__main__":
    main()
