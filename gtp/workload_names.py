"""Names that several components agree on (namespace, service account), derived from config in one place."""

from __future__ import annotations

from gtp.config import StackConfig

TRAINING_SERVICE_ACCOUNT = "trainer"


def training_namespace(config: StackConfig) -> str:
    """The per-stack training namespace."""
    return f"training-{config.stack}"
