"""The stages of a stack, in the order `__main__.py` runs them: config → cluster → image → GPU → workloads → outputs.

Each stage is a function in its own module and the only reader of the stack config for its part: it turns
config into component Args (components never see the stack config) and returns what the later stages need.
"""

from stages.cluster import build_cluster
from stages.config import load_stack_config
from stages.gpu import build_gpu
from stages.image import build_image
from stages.outputs import export_outputs
from stages.workloads import build_workloads

__all__ = ["build_cluster", "build_gpu", "build_image", "build_workloads", "export_outputs", "load_stack_config"]
