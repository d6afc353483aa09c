"""gtp-platform policy pack entry point (Pulumi runs this file from inside `policy/`).

    python -m policy.gtp_policy.offline --pack-config build/plan/<stack>/policy-facts.json > pack-config.json
    pulumi preview --policy-pack policy --policy-pack-config pack-config.json

Every policy declares the stack facts (stack, ephemeral, production, registry, requiredTags) as its config;
stack, ephemeral and production are required, so running the pack without a config file fails loudly
instead of silently judging a production stack as dev. The rules live in `gtp_policy/` as pure functions.
"""
import sys
from pathlib import Path

# Pulumi starts the pack with `policy/` as the working directory; the rules import as `policy.gtp_policy`
# (the same module path tests and the offline runner use), so the repository root must be importable.
_REPOSITORY_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPOSITORY_ROOT not in sys.path:
    sys.path.insert(0, _REPOSITORY_ROOT)

from policy.gtp_policy.engine import build_pack  # noqa: E402

if __name__ == "__main__":
    build_pack()  # serves the analyzer over gRPC until the engine stops it
