"""Launch template data shared by every node group: the node hardening lives in one place."""

from __future__ import annotations

from typing import Any


def launch_template_args(*, name: str, disk_size_gib: int, tags: dict[str, str], num_efa_interfaces: int = 0,
                         security_group_id: Any = None, placement_group: Any = None,
                         capacity_reservation_id: str | None = None, capacity_block: bool = False) -> dict[str, Any]:
    """Keyword arguments for `aws.ec2.LaunchTemplate`.

    - IMDSv2 only, hop limit 1: a pod can't reach the node's instance credentials through the metadata
      service (pods get their own credentials from Pod Identity).
    - Encrypted gp3 root volume; no key pair (no SSH: Session Manager instead); no public IP.
    - EFA: one interface per network card (the instance type's full count). Card 0 carries the primary
      ENI (device index 0); the others are EFA devices at device index 1. They all join the cluster
      security group, which allows all traffic among nodes, as EFA requires.
    - No user data and no image id: EKS generates the AL2023 nodeadm bootstrap for its NVIDIA AMI type.
    """
    args: dict[str, Any] = {
        "name": name,
        "description": f"Nodes of {name}",
        "update_default_version": True,
        "metadata_options": {
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": 1,
            "instance_metadata_tags": "disabled",
        },
        "block_device_mappings": [{
            "device_name": "/dev/xvda",
            "ebs": {"volume_size": disk_size_gib, "volume_type": "gp3", "encrypted": "true",
                    "delete_on_termination": "true"},
        }],
        "monitoring": {"enabled": True},
        "tag_specifications": [
            {"resource_type": "instance", "tags": {**tags, "Name": name}},
            {"resource_type": "volume", "tags": {**tags, "Name": name}},
            {"resource_type": "network-interface", "tags": {**tags, "Name": name}},
        ],
    }
    if num_efa_interfaces:
        args["network_interfaces"] = [
            {
                "device_index": 0 if card == 0 else 1,
                "network_card_index": card,
                "interface_type": "efa",
                "associate_public_ip_address": "false",
                "delete_on_termination": "true",
                "security_groups": [security_group_id],
            }
            for card in range(num_efa_interfaces)
        ]
    if placement_group is not None:
        args["placement"] = {"group_name": placement_group}
    if capacity_reservation_id:
        args["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": capacity_reservation_id}
        }
    if capacity_block:
        args["instance_market_options"] = {"market_type": "capacity-block"}
    return args
