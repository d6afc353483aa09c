"""FSx for Lustre: what each deployment type accepts at creation, as the FSx API decides it (SSD storage, the only
storage class this platform creates).

One row per `storage.fsxDeploymentType` value (a test keeps the rows and the schema's Literal in step): the storage
capacities `CreateFileSystem` accepts and the `PerUnitStorageThroughput` values `CreateFileSystemLustreConfiguration`
accepts. The config rule (stack_config/rules.py `_check_storage`), the applicability table (a throughput has no
effect on a type that takes none) and the component (components/shared_storage.py, which sends a throughput only
where the row takes one) all read this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LustreDeployment:
    """What one deployment type accepts."""

    name: str
    first_sizes_gib: tuple[int, ...]
    """Storage capacities allowed below the first increment."""
    size_increment_gib: int
    """Every multiple of this is allowed too."""
    throughputs: tuple[int, ...]
    """`PerUnitStorageThroughput` values (MB/s/TiB) it accepts; empty: it takes none (its throughput is fixed)."""

    def valid_size(self, size_gib: int) -> bool:
        return size_gib in self.first_sizes_gib or (size_gib > 0 and size_gib % self.size_increment_gib == 0)

    def sizes_text(self) -> str:
        return f"{', '.join(map(str, self.first_sizes_gib))} or a multiple of {self.size_increment_gib} GiB"


# Sizes: FSx API reference, CreateFileSystem, StorageCapacity
# (https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html): "For SCRATCH_2, PERSISTENT_2, and
# PERSISTENT_1 deployment types using SSD storage type, the valid values are 1200 GiB, 2400 GiB, and increments of
# 2400 GiB."
# Throughput: FSx API reference, CreateFileSystemLustreConfiguration, PerUnitStorageThroughput
# (https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystemLustreConfiguration.html): "Required with
# PERSISTENT_1 and PERSISTENT_2 deployment types using an SSD or HDD storage class ... Valid values: ... For
# PERSISTENT_2 SSD storage: 125, 250, 500, 1000 MB/s/TiB." SCRATCH_2 takes none: its throughput is fixed at 200
# MB/s/TiB baseline (FSx for Lustre guide, "Deployment options": "high burst throughput of up to six times the
# baseline throughput of 200 MBps per TiB").
LUSTRE_DEPLOYMENTS: dict[str, LustreDeployment] = {
    "SCRATCH_2": LustreDeployment("SCRATCH_2", (1200,), 2400, ()),
    "PERSISTENT_2": LustreDeployment("PERSISTENT_2", (1200,), 2400, (125, 250, 500, 1000)),
}
"""`storage.fsxDeploymentType` → what the FSx API accepts with it."""


def takes_throughput(deployment_type: str) -> bool:
    """Whether the file system is created with `PerUnitStorageThroughput` (components/shared_storage.py)."""
    return bool(LUSTRE_DEPLOYMENTS[deployment_type].throughputs)
