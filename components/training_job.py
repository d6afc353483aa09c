"""TrainingJob: one training run as the custom resource of its workload kind (PyTorchJob, ElasticJob, ...).

The body is rendered by the workload kind (`workload_kinds/`) from the shared pod shape
(`components/training_pod.py`); this component only registers it, after its operator and whatever else the job
must wait for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


@dataclass
class TrainingJobArgs:
    body: dict[str, Any]
    """The custom resource: `apiVersion`, `kind`, `metadata`, `spec`."""
    provider: k8s.Provider | None = None
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The job's operator and the GPU readiness gate: destroy removes the job before its controller, and the
    job is submitted only once GPUs are schedulable."""
    ignore_changes: list[str] = field(default_factory=list)
    """Fields another controller owns once the job exists (e.g. the Worker replicas KEDA scales): Pulumi never
    resets them on the next `up`."""


class TrainingJob(pulumi.ComponentResource):
    job: k8s.apiextensions.CustomResource
    body: dict[str, Any]

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:TrainingJob", name, None, opts)
        self.body = args.body
        self.job = k8s.apiextensions.CustomResource(
            # `<name>-pytorchjob` / `<name>-elasticjob`: the child's name carries the kind.
            f"{name}-{self.body['kind'].lower()}",
            api_version=self.body["apiVersion"], kind=self.body["kind"], metadata=self.body["metadata"],
            spec=self.body["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on,
                                        ignore_changes=args.ignore_changes or None),
        )
        self.register_outputs({"name": self.body["metadata"]["name"]})
