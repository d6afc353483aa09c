"""Paths inside the training container that the platform mounts or the image needs for itself.

The pod spec (components/training_pod.py), the Swarm task (components/swarm_training.py) and the trainer image
(images/trainer/Dockerfile) use these constants; the config rules refuse a shared-storage `mountPath` on or around
any of them (stack_config/site_rules.py): Kubernetes refuses two mounts at one path in a container ("must be
unique", kubernetes pkg/apis/core/validation/validation.go `ValidateVolumeMounts`), and a mount over or around one
of them hides what the container needs there without an error.
"""

from __future__ import annotations

SHM = "/dev/shm"
"""Memory-backed shared memory (NCCL, DataLoader workers); under MPS the device plugin's mount of the daemon's."""
SCRATCH = "/tmp"
"""Node-local scratch and every cache (HOME-less tools): the root filesystem is read-only."""
SECRETS_DIR = "/run/secrets"
"""Where a Swarm task finds its Docker secrets (`/run/secrets/<name>`)."""
MPS_ROOT = "/mps"
"""NVIDIA device plugin v0.20.0 under MPS mounts the daemon's pipe directory under it (`/mps/<resource>/pipe`:
cmd/mps-control-daemon/mps/root.go:26 `ContainerRoot`, internal/plugin/mps.go:81-89)."""
WORKDIR = "/workspace"
"""The trainer image's working directory (Dockerfile `WORKDIR`)."""
HOME = "/home/trainer"
"""The trainer user's home in the image (Dockerfile `HOME`)."""

CONTAINER_OWN_PATHS: dict[str, str] = {
    SHM: "the memory-backed /dev/shm NCCL and DataLoader workers use (the MPS daemon's under MPS)",
    SCRATCH: "node-local scratch and caches (the root filesystem is read-only)",
    SECRETS_DIR: "the task's Docker secrets",
    MPS_ROOT: "the MPS daemon's pipe directory the device plugin mounts",
    WORKDIR: "the trainer image's working directory",
    HOME: "the trainer user's home in the image",
}
"""Path → what the container keeps there."""

SYSTEM_PATHS: tuple[str, ...] = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
                                 "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var/run", "/var/lib",
                                 "/var/log")
"""The image's and the kernel's own directories: a volume over one hides the system (or, for /proc, /sys and /dev,
what the runtime mounts there)."""
