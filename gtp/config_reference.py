"""Render the config reference (README's "Config reference") from the config models' field docstrings.

``python -m gtp.config_reference`` prints it; a test keeps README.md in step with it.
"""

from __future__ import annotations

from pydantic.alias_generators import to_camel

from gtp import config

SECTIONS = [
    ("cluster", config.ClusterConfig), ("cluster.systemNodeGroup", config.SystemNodeGroupConfig),
    ("network", config.NetworkConfig), ("gpuNodeGroups.<name>", config.GpuNodeGroupConfig),
    ("gpuNodeGroups.<name>.taints.<key>", config.TaintConfig), ("gpu", config.GpuConfig),
    ("gpu.sharing", config.SharingConfig), ("gpu.metrics", config.MetricsConfig), ("image", config.ImageConfig),
    ("workload", config.WorkloadConfig), ("workload.elastic", config.ElasticConfig),
    ("autoscaling", config.AutoscalingConfig), ("storage", config.StorageConfig), ("lifecycle", config.LifecycleConfig),
]


def render() -> str:
    lines = []
    for title, model in SECTIONS:
        lines += ["", f"#### `{title}`", "", "| key | meaning |", "|---|---|"]
        for name, field in model.model_fields.items():
            description = " ".join((field.description or "").split()).replace("|", "\\|")
            lines.append(f"| `{field.alias or to_camel(name)}` | {description} |")
    return "\n".join(lines).strip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
