"""The two models the platform trains, plus loading of initial weights and the parameter digest."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config import PermanentError, TrainConfig


class SmallCnn(nn.Module):
    """Two conv blocks and two linear layers for 1x28x28 inputs, 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3)
        self.conv2 = nn.Conv2d(16, 32, 3)
        self.fc1 = nn.Linear(32 * 5 * 5, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        hidden = F.max_pool2d(F.relu(self.conv1(images)), 2)
        hidden = F.max_pool2d(F.relu(self.conv2(hidden)), 2)
        return self.fc2(F.relu(self.fc1(hidden.flatten(1))))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, length, dim = hidden.shape
        query, key, value = self.qkv(self.norm1(hidden)).split(dim, dim=2)
        shape = (batch, length, self.heads, dim // self.heads)
        attention = F.scaled_dot_product_attention(query.view(shape).transpose(1, 2), key.view(shape).transpose(1, 2),
                                                   value.view(shape).transpose(1, 2), is_causal=True)
        hidden = hidden + self.proj(attention.transpose(1, 2).reshape(batch, length, dim))
        return hidden + self.mlp(self.norm2(hidden))


class TinyGpt(nn.Module):
    """nanoGPT-shaped decoder: token + position embeddings, pre-norm blocks, tied output head."""

    def __init__(self, vocab_size: int, seq_len: int, dim: int, heads: int, layers: int) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, dim)
        self.position_embedding = nn.Embedding(seq_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)
        self.head.weight = self.token_embedding.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        hidden = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:
            hidden = block(hidden)
        return self.head(self.norm(hidden))


def compute_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy for both models; kept outside ``forward`` so the call goes through the DDP/FSDP wrapper."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def build_model(config: TrainConfig) -> nn.Module:
    """Same weights on every rank: init is seeded by ``config.seed`` only (FSDP2 shards each rank's own copy)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        if config.model == "cnn":
            return SmallCnn()
        return TinyGpt(config.vocab_size, config.seq_len, config.gpt_dim, config.gpt_heads, config.gpt_layers)


def count_parameters(model: nn.Module) -> int:
    return sum(parameter.numel() for parameter in {id(p): p for p in model.parameters()}.values())


def flops_per_token(model: nn.Module, seq_len: int) -> float:
    """6*N per token for the dense matmuls plus attention (PaLM appendix B); used for MFU only."""
    if isinstance(model, TinyGpt):
        layers = len(model.blocks)
        dim = model.norm.normalized_shape[0]
        return 6 * count_parameters(model) + 12 * layers * dim * seq_len
    return 6 * count_parameters(model)


def load_init_weights(model: nn.Module, path: str) -> None:
    """Load a .pt/.pth state dict or a .safetensors file into the unwrapped model; mismatches exit 2."""
    file = Path(path)
    if not file.is_file():
        raise PermanentError(f"--init-weights {file}: no such file")
    try:
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(file))
        else:
            # weights_only: a weights file must not be able to run code.
            state = torch.load(str(file), map_location="cpu", weights_only=True)
    except Exception as error:
        raise PermanentError(f"--init-weights {file}: cannot read ({type(error).__name__}: {error})") from error
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise PermanentError(f"--init-weights {file}: expected a flat state dict of tensors")
    if isinstance(model, TinyGpt) and "head.weight" not in state and "token_embedding.weight" in state:
        # safetensors refuses shared storage, so a tied head is saved once; tie it back.
        state = {**state, "head.weight": state["token_embedding.weight"]}
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong_shape = sorted(key for key in set(expected) & set(state) if expected[key].shape != state[key].shape)
    if missing or unexpected or wrong_shape:
        raise PermanentError(f"--init-weights {file} does not fit the model: missing={missing} "
                             f"unexpected={unexpected} wrong_shape={wrong_shape}")
    model.load_state_dict(state, strict=True)


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 over (key, dtype, shape, raw bytes) in sorted key order: equal digests mean bit-identical weights."""
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(key.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def cosine_schedule(warmup_steps: int, max_steps: int, min_ratio: float = 0.1):
    """LR multiplier: linear warm-up, then cosine to ``min_ratio`` at ``max_steps``."""

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier
