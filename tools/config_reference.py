"""Render the config reference (docs/config-reference.md) from the config models' field docstrings, with
where each field applies, the part that reads it and whose rules check its value (stack_config/applicability.py: a
field set where nothing reads it is refused).

``python -m tools.config_reference`` prints it, ``--update`` rewrites the copy in
docs/config-reference.md; a test keeps them in step.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic.alias_generators import to_camel

import cluster_targets  # noqa: F401  (registers the targets' traits, which the "applies" column names)
import workload_kinds  # noqa: F401  (registers the kinds' traits)
from stack_config import schema as config
from stack_config.applicability import APPLIES, describe

SECTIONS = [
    ("cluster", config.ClusterConfig), ("cluster.deployer", config.DeployerConfig),
    ("cluster.systemNodeGroup", config.SystemNodeGroupConfig), ("cluster.swarm", config.SwarmConfig),
    ("network", config.NetworkConfig), ("gpuNodeGroups.<name>", config.GpuNodeGroupConfig),
    ("gpuNodeGroups.<name>.taints.<key>", config.TaintConfig), ("gpu", config.GpuConfig),
    ("gpu.sharing", config.SharingConfig), ("gpu.metrics", config.MetricsConfig), ("image", config.ImageConfig),
    ("image.airGap", config.AirGapConfig),
    ("workloads.<name>", config.WorkloadConfig), ("workloads.<name>.elastic", config.ElasticConfig),
    ("workloads.<name>.autoscaling", config.AutoscalingConfig), ("kueue", config.KueueConfig),
    ("storage", config.StorageConfig), ("lifecycle", config.LifecycleConfig),
]


def render() -> str:
    lines = []
    for title, model in SECTIONS:
        lines += ["", f"#### `{title}`", "", "| key | applies | read by | checked by | meaning |",
                  "|---|---|---|---|---|"]
        for name, field in model.model_fields.items():
            where = APPLIES[model][name]
            cells = [describe(where), where.reader, where.rules or SCHEMA_RULES,
                     " ".join((field.description or "").split())]
            lines.append(f"| `{field.alias or to_camel(name)}` | " + " | ".join(c.replace("|", "\\|") for c in cells)
                         + " |")
    return "\n".join(lines).strip() + "\n"


SCHEMA_RULES = "the schema"
"""The "checked by" of a key whose value only the platform reads: its type, range and allowed values here."""
BEGIN = "#### `cluster`"
END = "\n## "
"""The generated tables run from BEGIN to the next `## ` section, or to the end of the file."""
REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "config-reference.md"


def update(document: Path = REFERENCE) -> bool:
    """Replace the reference in `document` (from its first table heading to the next `## ` section or the end);
    True if changed."""
    text = document.read_text()
    start = text.index(BEGIN)
    end = text.find(END, start)
    updated = text[:start] + render() + (text[end:] if end >= 0 else "")
    if updated != text:
        document.write_text(updated)
    return updated != text


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.config_reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true",
                        help="rewrite the generated config reference in docs/config-reference.md")
    args = parser.parse_args(argv)
    if args.update:
        print(f"{REFERENCE.relative_to(REFERENCE.parent.parent)} updated" if update() else "up to date")
    else:
        print(render(), end="")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
