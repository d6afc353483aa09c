"""Which network NCCL actually used, read from its ``NCCL_DEBUG=INFO`` output.

On EFA nodes NCCL needs the aws-ofi-nccl net plugin with libfabric's ``efa`` provider; without them it silently
falls back to TCP sockets and trains several times slower. The lines this reads, and where they come from:

- ``NCCL INFO Using network <name>``: NVIDIA/nccl src/init.cc, ``INFO(NCCL_INIT, "Using network %s",
  comm->ncclNet->name)``, logged once per communicator; the authoritative answer. ``<name>`` is ``Socket`` for NCCL's
  socket transport (src/transport/net_socket.cc), ``IB`` for verbs, or the plugin's ``name``: aws-ofi-nccl's
  ``ncclNetPlugin_v*.name`` is ``"AWS Libfabric"`` (older releases) or ``"Libfabric"`` (newer ones).
- ``NCCL INFO NET/Plugin: Loaded net plugin <name> (vN)``: NVIDIA/nccl's plugin loader
  (``"NET/Plugin: Loaded net plugin %s (v8)"`` and siblings).
- ``NCCL INFO NET/OFI Selected Provider is <prov> (found N nics)``: aws-ofi-nccl,
  ``NCCL_OFI_INFO(NCCL_INIT | NCCL_NET, "Selected Provider is %s (found %d nics)", ...)``; its logger prefixes
  ``NET/OFI``. Case-insensitive here: the word "Provider" was capitalised differently across releases.
- ``NCCL INFO NET/Socket : Using [0]eth0:...``: the socket transport's interfaces.

A libfabric plugin whose provider is not ``efa`` (e.g. ``tcp``) is not EFA either: it is classified ``ofi``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EXPECTATIONS = ("efa", "socket", "any")

_USING_NETWORK = re.compile(r"NCCL INFO Using network (?P<name>.+?)\s*$")
_LOADED_PLUGIN = re.compile(r"NCCL INFO NET/Plugin: Loaded net plugin (?P<name>.+?) \(v\d+\)")
_OFI_PROVIDER = re.compile(r"NCCL INFO NET/OFI Selected provider is (?P<provider>[\w;:+-]+)", re.IGNORECASE)
_SOCKET_IFACES = re.compile(r"NCCL INFO NET/Socket : Using ")


@dataclass(frozen=True)
class NetUsage:
    network: str | None         # "Using network <name>", the last one logged
    plugin: str | None          # "Loaded net plugin <name>"
    provider: str | None        # aws-ofi-nccl's libfabric provider
    socket_interfaces: bool     # the socket transport listed interfaces

    @property
    def transport(self) -> str:
        """efa | ofi (libfabric, not efa) | socket | ib | unknown (no "Using network" line)."""
        if self.network is None:
            return "unknown"
        name = self.network.lower()
        if name == "socket":
            return "socket"
        if name == "ib":
            return "ib"
        if "libfabric" in name or "ofi" in name:
            return "efa" if (self.provider or "").lower() == "efa" else "ofi"
        return "unknown"

    def describe(self) -> str:
        network = self.network or "(no 'Using network' line)"
        return (f"network={network} plugin={self.plugin or '-'} "
                f"provider={self.provider or '-'}")


def parse(text: str) -> NetUsage:
    network = plugin = provider = None
    socket_interfaces = False
    for line in text.splitlines():
        if match := _USING_NETWORK.search(line):
            network = match["name"]
        elif match := _LOADED_PLUGIN.search(line):
            plugin = match["name"]
        elif match := _OFI_PROVIDER.search(line):
            provider = match["provider"]
        elif _SOCKET_IFACES.search(line):
            socket_interfaces = True
    return NetUsage(network, plugin, provider, socket_interfaces)


def verify(usage: NetUsage, expect: str) -> tuple[bool, str]:
    """(ok, detail) for ``expect`` in EXPECTATIONS."""
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {', '.join(EXPECTATIONS)}, got {expect!r}")
    transport = usage.transport
    if expect == "any":
        return True, f"NCCL used {transport} ({usage.describe()})"
    if transport == expect:
        return True, f"NCCL used {transport} as expected ({usage.describe()})"
    if transport == "unknown":
        return False, (f"expected NCCL network {expect}, but the log has no 'NCCL INFO Using network' line: run with "
                       f"NCCL_DEBUG=INFO and a collective across nodes ({usage.describe()})")
    hint = ""
    if expect == "efa" and transport == "socket":
        hint = (": NCCL fell back to TCP sockets; the aws-ofi-nccl plugin or libfabric is missing from the image, or "
                "the pod has no EFA device (vpc.amazonaws.com/efa) or FI_PROVIDER is not efa")
    elif expect == "efa" and transport == "ofi":
        hint = f": the libfabric plugin loaded but chose provider {usage.provider!r}, not efa"
    return False, f"expected NCCL network {expect}, but NCCL used {transport}{hint} ({usage.describe()})"
