"""Time from kill -9 of one rank to the next completed training step (torchrun restart + resume).

    .venv/bin/python benchmarks/bench_recovery.py [--rounds 3]

Prints the median seconds and the parts: detection + restart until "resumed", then resumed -> first new step.
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time

from _common import env, median, parse_records, torchrun


def one_recovery() -> dict:
    with tempfile.TemporaryDirectory() as directory:
        command = torchrun(2, ["-m", "trainer.train", "--model", "cnn", "--batch-size", "8", "--max-steps", "100000",
                               "--checkpoint-dir", directory, "--checkpoint-every", "10", "--log-every", "1"],
                           max_restarts=1)
        process = subprocess.Popen(command, env=env(TRAINER_DEBUG_STEP_SLEEP_S="0.02"), cwd=directory,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                   start_new_session=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()

        def next_record(predicate, timeout=120):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for record in parse_records(lines.get(timeout=deadline - time.monotonic())):
                    if predicate(record):
                        return record, time.monotonic()
            raise TimeoutError

        try:
            victim, _ = next_record(lambda r: r.get("event") == "step" and r["rank"] == 1 and r["step"] >= 25)
            killed_at = time.monotonic()
            os.kill(victim["pid"], signal.SIGKILL)
            resumed, resumed_at = next_record(lambda r: r.get("event") == "resumed" and r["rank"] == 0)
            _, stepped_at = next_record(lambda r: r.get("event") == "step" and r["rank"] == 0
                                        and r["step"] > resumed["step"])
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return {"kill_to_step_s": stepped_at - killed_at, "kill_to_resumed_s": resumed_at - killed_at,
            "resumed_to_step_s": stepped_at - resumed_at, "resumed_step": resumed["step"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = [one_recovery() for _ in range(args.rounds)]
    print(json.dumps({"benchmark": "recovery",
                      "median_kill_to_next_step_s": round(median([run["kill_to_step_s"] for run in runs]), 3),
                      "median_kill_to_resumed_s": round(median([run["kill_to_resumed_s"] for run in runs]), 3),
                      "runs": [{key: round(value, 3) for key, value in run.items()} for run in runs]}))


if __name__ == "__main__":
    main()
