"""Typed stack configuration: parsed once, validated as a whole, frozen.

Every stack (`stacks/Pulumi.<stack>.yaml`) is data in the `gtp:` namespace. `load()` reads it from the Pulumi
runtime and `parse_stack_config()` turns it into a frozen `StackConfig`. Invalid config raises one
`ConfigError` that lists *every* problem, each with the full key path, the bad value and what is allowed,
before any resource is registered. Unknown keys are errors too: a typo must never be silently ignored.

- `schema`: the sections and their fields (with docstrings: the config reference, docs/config-reference.md);
- `parse`: raw config → `StackConfig` (types, ranges, unknown keys), then the rules;
- `rules`: checks across fields and sections;
- `derived`: facts computed from the whole config (node labels, taints, ranks per workload).

This package is the only reader of Pulumi config. Components never import it: the stages (`stages/`) turn
config into each component's Args.
"""

from stack_config.parse import load, parse_stack_config
from stack_config.problems import ConfigError, Problem
from stack_config.schema import NodeFacts, StackConfig, WorkloadConfig, ami_type, efa_enabled, placement_group_enabled

__all__ = ["ConfigError", "NodeFacts", "Problem", "StackConfig", "WorkloadConfig", "ami_type", "efa_enabled", "load",
           "parse_stack_config", "placement_group_enabled"]
