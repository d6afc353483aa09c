"""The baseline for bench_throughput: the smallest correct DDP loop on the trainer's model and data.

Prints one JSON line: {"samples_per_s": ...} over the timed steps (after the same warm-up as the trainer run).
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from trainer.config import TrainConfig
from trainer.data import SyntheticImages, SyntheticTokens
from trainer.models import build_model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    config = TrainConfig(model=args.model, batch_size=args.batch_size)
    dataset = (SyntheticImages(config.num_samples, 0) if args.model == "cnn"
               else SyntheticTokens(config.num_samples, config.seq_len, config.vocab_size, 0))
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(0))
    model = DistributedDataParallel(build_model(config))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    position = 0
    started = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
            started = time.perf_counter()
        start = (position + rank * args.batch_size) % len(dataset)
        inputs, targets = dataset.batch(order[start:start + args.batch_size])
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        position += world * args.batch_size
    elapsed = time.perf_counter() - started
    if rank == 0:
        print(json.dumps({"samples_per_s": args.steps * world * args.batch_size / elapsed}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
