"""AwsProvider: the one explicit AWS provider of a stack, carrying the stack's tags on every taggable resource."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass
class AwsProviderArgs:
    region: str
    tags: dict[str, str] = field(default_factory=dict)
    """Default tags: stack, project, lifecycle and, on ephemeral stacks, the TTL. The orphan audit and the
    reaper find resources by them."""


class AwsProvider(pulumi.ComponentResource):
    provider: aws.Provider

    def __init__(self, name: str, args: AwsProviderArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cloud:AwsProvider", name, None, opts)
        self.provider = aws.Provider(f"{name}-aws", region=args.region, default_tags={"tags": args.tags},
                                     opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})
