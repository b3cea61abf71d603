"""Bridges that outlived their Podman network. Containers killed before Podman tore their networking down leave the
network's bridge with the subnet's gateway address, and ``podman network create`` then refuses that subnet ("subnet
already used"). The lab (``lab.sh``) and the test bed's networks of a fixed subnet remove such a bridge first; one is
removed only when it is exactly that: a Podman-named bridge holding the gateway address, with no Podman network on it.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess

from railforge.cliargs import UsageError


def _run(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    except subprocess.CalledProcessError as error:
        raise UsageError(f"{' '.join(argv)} failed: {error.stderr.strip()} (as root?)") from error
    except OSError as error:
        raise UsageError(f"cannot run {argv[0]}: {error.strerror} (podman and iproute2 are needed)") from error


def gateway(subnet: str) -> str:
    """The address Podman gives a network's bridge: the subnet's first host, with the subnet's prefix."""
    network = ipaddress.ip_network(subnet)
    return f"{next(network.hosts())}/{network.prefixlen}"


def stale_bridges(subnet: str) -> list[str]:
    """The bridges holding ``subnet``'s gateway address that no Podman network uses."""
    address = gateway(subnet)
    in_use = set(_run("podman", "network", "ls", "--format", "{{.NetworkInterface}}").split())
    found = []
    for link in json.loads(_run("ip", "-j", "-d", "-4", "address", "show", "to", address) or "[]"):
        name = link["ifname"]
        held = {f"{info['local']}/{info['prefixlen']}" for info in link.get("addr_info", [])}
        is_bridge = link.get("linkinfo", {}).get("info_kind") == "bridge"
        if re.fullmatch(r"podman\d+", name) and is_bridge and address in held and name not in in_use:
            found.append(name)
    return found


def remove_stale_bridges(subnet: str) -> list[str]:
    """Delete the stale bridges of ``subnet`` (see :func:`stale_bridges`); returns their names."""
    removed = stale_bridges(subnet)
    for name in removed:
        _run("ip", "link", "delete", name)
    return removed
