"""Datasets and the global sample stream.

The data position is one number for the whole job: the count of samples consumed so far (the *global sample
index*). The stream is epoch 0's permutation, then epoch 1's, and so on; optimizer step ``s`` consumes the
``global_batch`` stream indices after the current position and rank ``r`` takes fixed slices of them. Because the
position is global, a resume on a different world size continues exactly where the job stopped: no sample of the
epoch is skipped or seen twice. (A per-rank ``DistributedSampler`` offset would not survive 2 -> 1 ranks.)
"""

from __future__ import annotations

import gzip
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from trainer.config import PermanentError

SYNTHETIC_CHUNK = 1024
"""Synthetic samples are generated in chunks seeded by (seed, chunk), so sample i never depends on the size."""


def _chunk_generator(seed: int, chunk: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed((seed * 1_000_003 + chunk * 7_919 + salt) % (2**63))


class SyntheticImages:
    """MNIST-shaped (1x28x28 float, 10 classes), learnable: a per-class template plus per-sample noise."""

    def __init__(self, num_samples: int, seed: int) -> None:
        templates = torch.randn(10, 1, 28, 28, generator=_chunk_generator(seed, -1, 1))
        images, labels = [], []
        for chunk in range((num_samples + SYNTHETIC_CHUNK - 1) // SYNTHETIC_CHUNK):
            generator = _chunk_generator(seed, chunk, 2)
            chunk_labels = torch.randint(0, 10, (SYNTHETIC_CHUNK,), generator=generator)
            noise = torch.randn(SYNTHETIC_CHUNK, 1, 28, 28, generator=generator)
            images.append(templates[chunk_labels] + 0.8 * noise)
            labels.append(chunk_labels)
        self.inputs = torch.cat(images)[:num_samples].contiguous()
        self.targets = torch.cat(labels)[:num_samples].contiguous()

    def __len__(self) -> int:
        return self.targets.shape[0]

    def batch(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[indices], self.targets[indices]


class SyntheticTokens:
    """Token sequences ``(start + stride * t) mod vocab``: next-token prediction a tiny GPT can learn."""

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int) -> None:
        rows = []
        positions = torch.arange(seq_len + 1)
        for chunk in range((num_samples + SYNTHETIC_CHUNK - 1) // SYNTHETIC_CHUNK):
            generator = _chunk_generator(seed, chunk, 3)
            start = torch.randint(0, vocab_size, (SYNTHETIC_CHUNK, 1), generator=generator)
            stride = torch.randint(1, 8, (SYNTHETIC_CHUNK, 1), generator=generator)
            rows.append((start + stride * positions) % vocab_size)
        self.tokens = torch.cat(rows)[:num_samples].contiguous()

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def batch(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.tokens[indices]
        return rows[:, :-1], rows[:, 1:]


MNIST_IMAGES = "train-images-idx3-ubyte"
MNIST_LABELS = "train-labels-idx1-ubyte"


def _read_idx(directory: Path, name: str, magic: int) -> tuple[bytes, tuple[int, ...], Path]:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            try:
                raw = gzip.decompress(candidate.read_bytes()) if candidate.suffix == ".gz" else candidate.read_bytes()
            except (OSError, EOFError, gzip.BadGzipFile) as error:
                raise PermanentError(f"cannot read MNIST file {candidate}: {error}") from error
            break
    else:
        raise PermanentError(f"--data-dir {directory}: missing {name} (or {name}.gz); expected the MNIST IDX "
                             f"training files {MNIST_IMAGES} and {MNIST_LABELS}")
    if len(raw) < 8:
        raise PermanentError(f"malformed MNIST file {candidate}: {len(raw)} bytes, shorter than an IDX header")
    found_magic = struct.unpack(">I", raw[:4])[0]
    if found_magic != magic:
        raise PermanentError(f"malformed MNIST file {candidate}: magic {found_magic:#010x}, expected {magic:#010x}")
    num_dims = magic & 0xFF
    header = 4 + 4 * num_dims
    dims = struct.unpack(f">{num_dims}I", raw[4:header])
    expected = header
    size = 1
    for dim in dims:
        size *= dim
    expected += size
    if len(raw) != expected:
        raise PermanentError(f"malformed MNIST file {candidate}: {len(raw)} bytes, header {dims} needs {expected}")
    return raw[header:], dims, candidate


class MnistIdx:
    """MNIST training set from IDX files, normalised with the usual mean/std."""

    def __init__(self, data_dir: str) -> None:
        directory = Path(data_dir)
        if not directory.is_dir():
            raise PermanentError(f"--data-dir {directory} does not exist or is not a directory")
        image_bytes, image_dims, image_path = _read_idx(directory, MNIST_IMAGES, 0x00000803)
        label_bytes, label_dims, label_path = _read_idx(directory, MNIST_LABELS, 0x00000801)
        if image_dims[1:] != (28, 28):
            raise PermanentError(f"malformed MNIST file {image_path}: images are {image_dims[1:]}, expected 28x28")
        if image_dims[0] != label_dims[0]:
            raise PermanentError(f"MNIST files disagree: {image_path} has {image_dims[0]} images, {label_path} "
                                 f"has {label_dims[0]} labels")
        if image_dims[0] == 0:
            raise PermanentError(f"MNIST file {image_path} holds no images")
        pixels = torch.frombuffer(bytearray(image_bytes), dtype=torch.uint8).reshape(-1, 1, 28, 28)
        self.inputs = ((pixels.float() / 255.0) - 0.1307) / 0.3081
        self.targets = torch.frombuffer(bytearray(label_bytes), dtype=torch.uint8).long()
        if int(self.targets.max()) > 9:
            raise PermanentError(f"malformed MNIST file {label_path}: label {int(self.targets.max())} > 9")

    def __len__(self) -> int:
        return self.targets.shape[0]

    def batch(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[indices], self.targets[indices]


def build_dataset(config) -> SyntheticImages | SyntheticTokens | MnistIdx:
    if config.data_dir is not None:
        return MnistIdx(config.data_dir)
    if config.model == "cnn":
        return SyntheticImages(config.num_samples, config.seed)
    return SyntheticTokens(config.num_samples, config.seq_len, config.vocab_size, config.seed)


@dataclass(frozen=True)
class MicroBatchSlice:
    """Stream indices [start, start + count) that one rank reads for one micro-batch."""

    start: int
    count: int


def micro_batch_slice(position: int, micro_step: int, rank: int, world_size: int, batch_size: int) -> MicroBatchSlice:
    """Where rank ``rank`` reads micro-batch ``micro_step`` of the step that starts at global ``position``.

    Micro-batch m of a step covers [position + m*W*B, position + (m+1)*W*B); rank r takes the r-th block of B.
    Over the step, the ranks together read exactly ``global_batch`` consecutive stream indices.
    """
    return MicroBatchSlice(position + (micro_step * world_size + rank) * batch_size, batch_size)


def global_batch(world_size: int, batch_size: int, grad_accum_steps: int) -> int:
    return world_size * batch_size * grad_accum_steps


class SampleStream:
    """Maps global stream indices to dataset indices: epoch e = index // N uses permutation(seed, e)."""

    def __init__(self, dataset_size: int, seed: int) -> None:
        self.dataset_size = dataset_size
        self.seed = seed
        self._permutations: dict[int, torch.Tensor] = {}

    def permutation(self, epoch: int) -> torch.Tensor:
        if epoch not in self._permutations:
            # Same order on every rank and every attempt: a function of (seed, epoch) only, like
            # DistributedSampler.set_epoch.
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._permutations = {epoch: torch.randperm(self.dataset_size, generator=generator)}
        return self._permutations[epoch]

    def dataset_indices(self, start: int, count: int) -> torch.Tensor:
        parts = []
        position = start
        end = start + count
        while position < end:
            epoch, offset = divmod(position, self.dataset_size)
            take = min(end - position, self.dataset_size - offset)
            parts.append(self.permutation(epoch)[offset:offset + take])
            position += take
        return torch.cat(parts)


def append_sample_log(path: str, rank: int, step: int, start: int, count: int) -> None:
    """Debug hook (TRAINER_DEBUG_SAMPLE_LOG): record which stream indices a rank consumed at a step."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f'{{"rank": {rank}, "step": {step}, "start": {start}, "count": {count}, "pid": {os.getpid()}}}\n')
