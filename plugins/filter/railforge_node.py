# Railforge - where a node runs, from gathered facts.
"""Jinja2 filter railforge_virt: 'container', 'vm' or 'bare-metal' from ansible_facts."""

from __future__ import annotations

CONTAINER_TYPES = frozenset({"podman", "docker", "container", "containerd", "lxc", "systemd-nspawn", "openvz"})


def railforge_virt(facts: dict) -> str:
    """Classify a node: a container shares its host's kernel; a VM has its own kernel but virtual PCIe."""
    if facts.get("virtualization_role") != "guest":
        return "bare-metal"
    return "container" if facts.get("virtualization_type") in CONTAINER_TYPES else "vm"


class FilterModule:
    def filters(self):
        return {"railforge_virt": railforge_virt}
