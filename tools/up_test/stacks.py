"""The test stacks `make up-test` deploys for real, each derived from a committed stack, and its one-line changes.

A test stack is its source stack's file with only what a test site must differ in, each difference listed with
why (`TestStack.differences`, copied into the run's report; tests/up_test checks that nothing else differs).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEST_DIGEST = "sha256:" + "7e57" * 16
"""The training image's stand-in digest: kwok never pulls an image (the real image is built and run by
`make engine-test` and `make swarm-test`)."""


@dataclass(frozen=True)
class TestStack:
    name: str
    """The test stack's name (also its state's and its offline plan's)."""
    source: str
    """The committed stack it is derived from (`stacks/Pulumi.<source>.yaml`)."""
    secrets: tuple[str, ...]
    """Secret keys the harness sets with `pulumi config set --secret` (their source values are placeholders)."""
    changes: tuple[tuple[str, Any], ...]
    """One-line changes (`gtp:` key path, new value), applied in turn: each one's real preview must be what `make
    plan-diff` predicts. Together they cover an update in place and a replacement."""
    differences: dict[str, str] = field(default_factory=dict)
    """Key path → why the test stack differs from its source there."""


EDGE = TestStack(
    name="uptest-edge",
    source="edge",
    secrets=("kubeconfig", "registryPassword"),
    changes=(("workloads.edge-finetune.elastic.maxNodes", 2),  # the ElasticJob and the quota, in place
             ("gpu.readinessTimeoutSeconds", 600)),  # the gate's Job replaced (its pod template is immutable)
    differences={
        "kubeconfig": "the test cluster's admin kubeconfig (a secret, as on a site)",
        "registryPassword": "a throwaway secret (the site registry is not contacted: kwok pulls nothing)",
        "image.build": "false: the image is not built by this stack's `up` (no pulumi-docker provider is "
                       "obtainable here, docs/real-pulumi.md; the image is built for real by `make engine-test`)",
        "image.reference": f"<existingRegistry>@{TEST_DIGEST}: a stand-in digest (kwok pulls nothing)",
        "image.airGap": "removed: the air-gapped site's mirror lock (`make mirror STACK=edge`) needs the site "
                        "registry; without it `pulumi up` refuses, as it must",
    },
)
STACKS = {EDGE.name: EDGE}


def derive(test: TestStack) -> dict[str, Any]:
    """The test stack's `config:` block (without the secrets the harness sets)."""
    source = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{test.source}.yaml").read_text())
    config = copy.deepcopy(source["config"])
    for key in test.secrets:
        config.pop(f"gtp:{key}", None)
    image = config.setdefault("gtp:image", {})
    image["build"] = False
    image["reference"] = f"{image['existingRegistry']}@{TEST_DIGEST}"
    image.pop("airGap", None)
    return config


def with_change(config: dict[str, Any], change: tuple[str, Any]) -> dict[str, Any]:
    """`config` with the one-line change applied (a `gtp:` key path, dotted)."""
    changed = copy.deepcopy(config)
    path, value = change
    head, *rest = path.split(".")
    node = changed[f"gtp:{head}"]
    for part in rest[:-1]:
        node = node[part]
    node[rest[-1]] = value
    return changed


def stack_file_text(config: dict[str, Any], encryption_salt: str | None = None,
                    secrets: dict[str, str] | None = None) -> str:
    """A stack file: the config, plus secure values (ciphertexts the CLI wrote, or placeholders for the offline
    plan) and the passphrase provider's salt."""
    document: dict[str, Any] = {}
    if encryption_salt:
        document["encryptionsalt"] = encryption_salt
    full = dict(config)
    for key, secure in (secrets or {}).items():
        full[f"gtp:{key}"] = {"secure": secure}
    document["config"] = full
    return yaml.safe_dump(document, sort_keys=False, width=120)
