"""Typed trainer configuration: one ``@dataclass`` whose fields are also the CLI flags.

Every field carries a docstring (shown by ``--help``); ``__post_init__`` collects every problem and raises one
``ValueError`` whose text says what to change.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal, get_args

ModelName = Literal["cnn", "gpt"]
BackendName = Literal["auto", "nccl", "gloo"]


class PermanentError(Exception):
    """A problem no restart can fix (bad flag, bad data, bad weights file): the process exits 2.

    Kubeflow's ``restartPolicy: ExitCode`` retries only exit codes >= 128, so 2 marks the pod failed for good.
    """


def _field(default, doc: str, **kwargs):
    return field(default=default, metadata={"doc": doc, **kwargs})


@dataclass
class TrainConfig:
    """Everything one training run needs; CLI flags (``--max-steps`` for ``max_steps``) override the defaults."""

    model: ModelName = _field("cnn", "Model to train: 'cnn' (MNIST-shaped 1x28x28, 10 classes) or 'gpt' (tiny "
                              "byte-level transformer). Default: cnn.")
    max_steps: int = _field(100, "Total optimizer steps of the run (a resumed run counts the steps already done). "
                            "Default: 100.")
    batch_size: int = _field(32, "Samples per rank per micro-batch; the global batch is batch_size * world_size * "
                             "grad_accum_steps. Default: 32.")
    grad_accum_steps: int = _field(1, "Micro-batches accumulated per optimizer step. Default: 1.")
    lr: float = _field(1e-3, "Peak learning rate of AdamW. Default: 1e-3.")
    weight_decay: float = _field(0.0, "AdamW weight decay. Default: 0.0.")
    warmup_steps: int = _field(0, "Linear warm-up steps before the cosine decay to 10%% of --lr. Default: 0.")
    seed: int = _field(0, "Seed for model init, synthetic data and data order. Default: 0.")
    deterministic: bool = _field(False, "Use deterministic kernels only (bit-identical resume on CPU). "
                                 "Default: off.")
    checkpoint_dir: str | None = _field(None, "Directory for DCP checkpoints (DIR/step-N/); the run resumes from "
                                        "the newest complete one. Default: none (no checkpoints, no resume).")
    checkpoint_every: int = _field(0, "Save every K steps (0 = only at the end and on SIGTERM/SIGINT). "
                                   "Default: 0.")
    keep_checkpoints: int = _field(3, "Complete checkpoints to keep (older ones are deleted only after a newer "
                                   "one is complete). Default: 3.")
    async_checkpoint: bool = _field(False, "Save periodic checkpoints with dcp.async_save (at most one in "
                                    "flight); the final and the preemption checkpoint are always waited for. "
                                    "Default: off.")
    data_dir: str | None = _field(None, "Directory with MNIST IDX files (train-images-idx3-ubyte, "
                                  "train-labels-idx1-ubyte, optionally .gz); cnn only. Default: deterministic "
                                  "synthetic data (never downloads).")
    num_samples: int = _field(4096, "Size of the synthetic dataset (ignored with --data-dir). Default: 4096.")
    init_weights: str | None = _field(None, "Initial weights (.pt state dict or .safetensors) loaded before "
                                      "training when no checkpoint exists. Default: random init.")
    fsdp: bool = _field(False, "Shard with FSDP2 (torch.distributed.fsdp.fully_shard) instead of DDP. "
                        "Default: off (DDP).")
    compile: bool = _field(False, "torch.compile the model. Default: off.")
    backend: BackendName = _field("auto", "Process-group backend: auto (nccl with CUDA, else gloo), nccl, gloo. "
                                  "Default: auto.")
    metrics_port: int | None = _field(None, "Serve Prometheus metrics on port P + LOCAL_RANK. Default: off.")
    watchdog_timeout: float = _field(600.0, "Exit (code 3, a 'watchdog' log line) when no step completes for X "
                                     "seconds, so the launcher restarts the gang from the last complete checkpoint "
                                     "(trainer/watchdog.py); armed from the first step, paused while "
                                     "checkpointing. 0 = off. Default: 600.")
    log_every: int = _field(10, "Emit a JSON log line every N steps (and on the last step). Default: 10.")
    gpt_layers: int = _field(2, "gpt: transformer blocks. Default: 2.")
    gpt_dim: int = _field(64, "gpt: embedding width (multiple of --gpt-heads). Default: 64.")
    gpt_heads: int = _field(4, "gpt: attention heads. Default: 4.")
    seq_len: int = _field(32, "gpt: tokens per sample. Default: 32.")
    vocab_size: int = _field(256, "gpt: vocabulary size. Default: 256.")

    def __post_init__(self) -> None:
        problems: list[str] = []

        def need(condition: bool, message: str) -> None:
            if not condition:
                problems.append(message)

        need(self.model in get_args(ModelName), f"--model must be one of {get_args(ModelName)}, got {self.model!r}")
        need(self.backend in get_args(BackendName),
             f"--backend must be one of {get_args(BackendName)}, got {self.backend!r}")
        need(self.max_steps >= 1, f"--max-steps must be >= 1, got {self.max_steps}")
        need(self.batch_size >= 1, f"--batch-size must be >= 1, got {self.batch_size}")
        need(self.grad_accum_steps >= 1, f"--grad-accum-steps must be >= 1, got {self.grad_accum_steps}")
        need(self.lr > 0, f"--lr must be > 0, got {self.lr}")
        need(self.weight_decay >= 0, f"--weight-decay must be >= 0, got {self.weight_decay}")
        need(0 <= self.warmup_steps < self.max_steps,
             f"--warmup-steps must be in [0, --max-steps), got {self.warmup_steps}")
        need(self.seed >= 0, f"--seed must be >= 0, got {self.seed}")
        need(self.checkpoint_every >= 0, f"--checkpoint-every must be >= 0 (0 = only at the end), "
                                         f"got {self.checkpoint_every}")
        need(self.keep_checkpoints >= 1, f"--keep-checkpoints must be >= 1 so the newest complete checkpoint "
                                         f"survives, got {self.keep_checkpoints}")
        if self.checkpoint_every and not self.checkpoint_dir:
            problems.append("--checkpoint-every needs --checkpoint-dir")
        if self.async_checkpoint and not self.checkpoint_dir:
            problems.append("--async-checkpoint needs --checkpoint-dir")
        need(self.num_samples >= 1, f"--num-samples must be >= 1, got {self.num_samples}")
        if self.data_dir is not None and self.model != "cnn":
            problems.append("--data-dir holds MNIST and works only with --model cnn; drop it to use synthetic "
                            "token data for gpt")
        if self.metrics_port is not None:
            need(1 <= self.metrics_port <= 65535, f"--metrics-port must be in 1..65535, got {self.metrics_port}")
        need(self.watchdog_timeout >= 0, f"--watchdog-timeout must be >= 0 (0 = off), got {self.watchdog_timeout}")
        need(self.log_every >= 1, f"--log-every must be >= 1, got {self.log_every}")
        if self.init_weights is not None and not self.init_weights.endswith((".pt", ".pth", ".safetensors")):
            problems.append(f"--init-weights must be a .pt/.pth or .safetensors file, got {self.init_weights!r}")
        need(self.gpt_layers >= 1, f"--gpt-layers must be >= 1, got {self.gpt_layers}")
        need(self.gpt_heads >= 1 and self.gpt_dim % max(self.gpt_heads, 1) == 0,
             f"--gpt-dim ({self.gpt_dim}) must be a positive multiple of --gpt-heads ({self.gpt_heads})")
        need(self.seq_len >= 2, f"--seq-len must be >= 2, got {self.seq_len}")
        need(2 <= self.vocab_size <= 65536, f"--vocab-size must be in 2..65536, got {self.vocab_size}")
        if problems:
            raise ValueError("invalid trainer config:\n  - " + "\n  - ".join(problems))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    """Build the argparse parser from the dataclass so flags, defaults and help never drift apart."""
    parser = argparse.ArgumentParser(
        prog="python -m trainer.train",
        description="Distributed PyTorch trainer (DDP or FSDP2, DCP checkpoints, JSON-lines logs). Run under "
                    "torchrun / dlrover-run or with a PyTorchJob env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK).",
        epilog="Exit codes: 0 success, 2 permanent error (bad flags/data/weights), 3 the hang watchdog ended a "
               "stalled run (--watchdog-timeout), 143 stopped by SIGTERM after the checkpoint completed (130 for "
               "SIGINT), 1 anything else.",
    )
    for spec in dataclasses.fields(TrainConfig):
        doc = spec.metadata["doc"]
        flag = _flag(spec.name)
        if spec.type in ("bool", bool):
            parser.add_argument(flag, action="store_true", default=spec.default, help=doc)
        elif spec.type in ("int", int):
            parser.add_argument(flag, type=int, default=spec.default, help=doc, metavar="N")
        elif spec.type in ("float", float):
            parser.add_argument(flag, type=float, default=spec.default, help=doc, metavar="X")
        elif spec.type == "int | None":
            parser.add_argument(flag, type=int, default=spec.default, help=doc, metavar="P")
        elif spec.type == "str | None":
            parser.add_argument(flag, type=str, default=spec.default, help=doc, metavar="PATH")
        elif spec.type == "ModelName":
            parser.add_argument(flag, choices=get_args(ModelName), default=spec.default, help=doc)
        elif spec.type == "BackendName":
            parser.add_argument(flag, choices=get_args(BackendName), default=spec.default, help=doc)
        else:  # pragma: no cover - a new field type must be taught to the parser
            raise AssertionError(f"no CLI mapping for field {spec.name}: {spec.type}")
    return parser


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    """Parse CLI flags into a validated config; invalid values raise ``PermanentError`` (exit 2)."""
    namespace = build_parser().parse_args(argv)
    try:
        return TrainConfig(**vars(namespace))
    except ValueError as error:
        raise PermanentError(str(error)) from error


def debug_env(name: str) -> str | None:
    """Test hooks (``TRAINER_FAULT_INJECT``, ``TRAINER_DEBUG_*``) read in one place so they are easy to audit."""
    return os.environ.get(name) or None
