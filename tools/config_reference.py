"""Render the config reference (README's "Config reference") from the config models' field docstrings, with
where each field applies (stack_config/applicability.py: a field set elsewhere is refused).

``python -m tools.config_reference`` prints it, ``--update`` rewrites README.md's copy; a test keeps them in
step.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic.alias_generators import to_camel

from stack_config import schema as config
from stack_config.applicability import APPLIES, describe

SECTIONS = [
    ("cluster", config.ClusterConfig), ("cluster.deployer", config.DeployerConfig),
    ("cluster.systemNodeGroup", config.SystemNodeGroupConfig), ("cluster.swarm", config.SwarmConfig),
    ("network", config.NetworkConfig), ("gpuNodeGroups.<name>", config.GpuNodeGroupConfig),
    ("gpuNodeGroups.<name>.taints.<key>", config.TaintConfig), ("gpu", config.GpuConfig),
    ("gpu.sharing", config.SharingConfig), ("gpu.metrics", config.MetricsConfig), ("image", config.ImageConfig),
    ("image.offline", config.OfflineConfig),
    ("workloads.<name>", config.WorkloadConfig), ("workloads.<name>.elastic", config.ElasticConfig),
    ("workloads.<name>.autoscaling", config.AutoscalingConfig), ("kueue", config.KueueConfig),
    ("storage", config.StorageConfig), ("lifecycle", config.LifecycleConfig),
]


def render() -> str:
    lines = []
    for title, model in SECTIONS:
        lines += ["", f"#### `{title}`", "", "| key | applies | meaning |", "|---|---|---|"]
        for name, field in model.model_fields.items():
            description = " ".join((field.description or "").split()).replace("|", "\\|")
            applies = describe(APPLIES[model][name]).replace("|", "\\|")
            lines.append(f"| `{field.alias or to_camel(name)}` | {applies} | {description} |")
    return "\n".join(lines).strip() + "\n"


BEGIN = "#### `cluster`"
END = "\n## "


def update(readme: Path) -> bool:
    """Replace the reference in `readme` (from its first table heading to the next `## ` section); True if changed."""
    text = readme.read_text()
    start = text.index(BEGIN)
    end = text.index(END, start)
    updated = text[:start] + render() + text[end:]
    if updated != text:
        readme.write_text(updated)
    return updated != text


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.config_reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite README.md's generated config reference")
    args = parser.parse_args(argv)
    if args.update:
        print("README.md updated" if update(Path(__file__).resolve().parent.parent / "README.md") else "up to date")
    else:
        print(render(), end="")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
