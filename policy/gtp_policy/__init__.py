"""gtp-platform policy rules as pure functions over plain resource records.

Used two ways with the same rules: by the Pulumi policy pack (`policy/__main__.py`, via `engine.py`) and by
the offline runner over `build/plan/<stack>/resources.json` (`offline.py`). Importing this package does not
import pulumi_policy.
"""
from .model import COMPUTED, SECRET, Facts, Finding, Rule, Violation
from .offline import pack_config, run_policies
from .registry import POLICIES, POLICY_NAMES

__all__ = [
           "COMPUTED",
           "POLICIES",
           "POLICY_NAMES",
           "SECRET",
           "Facts",
           "Finding",
           "Rule",
           "Violation",
           "pack_config",
           "run_policies",
]
