"""Config stage: the stack config, parsed once, with the registries' choices and checks.

`stack_config` validates every section it knows; the cluster targets and workload kinds add what only they
know (which modes and kinds exist, and their own rules), so one `ConfigError` still lists every problem before
any resource is registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import cluster_targets
import stack_config
import workload_kinds
from stack_config import ConfigError, Problem, StackConfig
from stack_config.derived import base_image_refusal, efa_installer_refusal
from stack_config.placeholders import find_placeholders
from stack_config.rules import Rule
from stack_config.source import StackSource
from stages import air_gap

CHOICES: dict[str, list[str]] = {
    "cluster.mode": sorted(cluster_targets.TARGETS),
    "workloads.*.kind": workload_kinds.CONFIGURABLE,
}


def check_platform(config: StackConfig) -> Iterator[Problem]:
    """Each workload's kind runs on what the cluster target provides (Kubernetes or a Docker Swarm)."""
    target = cluster_targets.for_config(config)
    for name, kind in workload_kinds.kinds_of(config).items():
        if kind.platform != target.platform:
            fitting = sorted(kind_name for kind_name in workload_kinds.CONFIGURABLE
                             if workload_kinds.KINDS[kind_name].platform == target.platform)
            yield Problem(f"workloads.{name}.kind", f"{kind.name!r} runs on {kind.platform}, but cluster.mode "
                                                    f"{config.cluster.mode!r} is a {target.platform} cluster; use "
                                                    f"{' or '.join(fitting)}")


RULES: tuple[Rule, ...] = (
    (cluster_targets.check, ("cluster",)),
    *cluster_targets.RULES,
    (workload_kinds.check, ("workloads", "cluster")),
    (check_platform, ("workloads", "cluster")),
    (air_gap.check, ("image", "cluster")),
)


def load_stack_config(stack_file: Path | None = None) -> StackConfig:
    """The stack's config from the Pulumi runtime (the engine, or the offline plan's mocks), checked against the
    stack file it came from (default `stacks/Pulumi.<stack>.yaml`)."""
    config = stack_config.load(choices=CHOICES, rules=RULES, stack_file=stack_file)
    # The real engine (`pulumi preview` / `up`): refuse before anything is registered, every problem at once.
    # Stand-in values; unpinned build inputs (which would otherwise fail only at `up`'s image build, since
    # pulumi-docker builds on `up`, not on preview, after the cluster and its reserved nodes were created); and for
    # an air-gapped site, images its registry lacks.
    refusals = ([Problem(p.path, f"placeholder — {p.message}") for p in find_placeholders(config)]
                + [Problem(p.path, f"unpinned — {p.message}") for p in unpinned_build_inputs(config)]
                + [Problem(p.path, f"air gap — {p.message}") for p in air_gap.air_gap_problems(config)])
    if refusals and not under_mocks():
        raise ConfigError(config.stack, refusals)
    return config


def unpinned_build_inputs(config: StackConfig) -> list[Problem]:
    """What the stack would deploy without a verified pin: the image's base, the EFA installer."""
    problems = []
    if (refusal := base_image_refusal(config)) is not None:
        problems.append(Problem("image.baseImage", refusal))
    if (refusal := efa_installer_refusal(config)) is not None:
        problems.append(Problem("image.build", refusal))
    return problems


def under_mocks() -> bool:
    """True when the program runs under `pulumi.runtime.set_mocks` (the offline plan, tests), not the engine."""
    from pulumi.runtime import mocks, settings
    return isinstance(settings.get_monitor(), mocks.MockMonitor)


def parse_stack_config(raw: Mapping[str, Any], *, project: str = "gtp", stack: str,
                       secret_keys: Iterable[str] = (), source: StackSource | None = None) -> StackConfig:
    """Parse config given as data (tests, `tools.bench_stack`), exactly as `load_stack_config` would."""
    return stack_config.parse_stack_config(raw, project=project, stack=stack, secret_keys=secret_keys,
                                           choices=CHOICES, rules=RULES, source=source)
