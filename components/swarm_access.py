"""SwarmAccess: the Docker provider every Swarm resource uses, connected to one manager over SSH."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_docker as docker


@dataclass
class SwarmAccessArgs:
    manager_host: str
    """`ssh://<user>@<host>[:<port>]` of a manager node."""
    ssh_options: list[str] = field(default_factory=list)
    """Extra `ssh` options (e.g. `-o StrictHostKeyChecking=yes`)."""


class SwarmAccess(pulumi.ComponentResource):
    provider: docker.Provider

    def __init__(self, name: str, args: SwarmAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:SwarmAccess", name, None, opts)
        # SSH only: the Docker CLI tunnels the API through `ssh <host> docker system dial-stdio`, so the daemon
        # never listens on TCP and access is whatever the SSH user may do on the manager.
        self.provider = docker.Provider(f"{name}-docker", host=args.manager_host, ssh_opts=list(args.ssh_options),
                                        opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})
