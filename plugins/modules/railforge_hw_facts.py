#!/usr/bin/python
# Railforge - read-only GPU / RDMA hardware facts.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: railforge_hw_facts
short_description: Gather GPU, RDMA HCA, PCIe affinity and rail facts from sysfs
description:
  - Reads C(/sys/bus/pci/devices), C(/sys/class/infiniband), C(/sys/class/net) and
    C(/sys/devices/system/node) below O(root) and reports GPUs (PCI address, NUMA node,
    architecture from the NVIDIA PCI device id), RDMA HCAs (ports, state, rate, link layer,
    netdev, PCI address, NUMA node), the GPU<->HCA affinity matrix, rails (each GPU's closest
    HCA) and NVLink/NVSwitch presence.
  - The affinity matrix uses C(nvidia-smi topo -m) classes (PIX, PXB, PHB, NODE, SYS).  It is computed
    from the PCI tree unless the text of C(nvidia-smi topo -m) is given (or run), which then wins.
  - With O(scope=devices) only the devices are listed, which works before any driver is loaded (GPUs,
    NVSwitches, Mellanox/NVIDIA Ethernet and InfiniBand functions found by PCI vendor id, and the RDMA
    devices the kernel registered); the node roles detect their hardware this way.  These partial facts are
    returned under C(devices) and never published as host facts, so they cannot hide the full C(railforge_hw)
    a host has (gathered, or set in the inventory).
  - Never changes anything on the host; check mode returns the same facts.
version_added: "0.1.0"
author:
  - Railforge maintainers
options:
  root:
    description: Directory that holds C(sys/) (and C(proc/net/route)); a test tree or C(/).
    type: path
    default: /
  scope:
    description:
      - C(all) publishes every fact below as the host fact C(railforge_hw). C(devices) returns under C(devices)
        (no host fact) only C(gpus), C(gpu_count), C(gpu_architectures), C(hca_functions), C(hcas), C(hca_count),
        C(nvlink) (from the PCI tree) and C(warnings), and accepts none of the C(*_text), O(run_commands) and
        O(mix_link_layers) options.
    type: str
    choices: [all, devices]
    default: all
  topo_text:
    description: Output of C(nvidia-smi topo -m) or C(-mp). Overrides the sysfs-derived matrix.
    type: str
  ibdev2netdev_text:
    description: Output of C(ibdev2netdev); fills netdev names sysfs did not give.
    type: str
  nvidia_smi_q_text:
    description: Output of C(nvidia-smi -q) (or its Fabric sections) for multi-node NVLink facts.
    type: str
  nvidia_smi_query_text:
    description:
      - Output of C(nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,mig.mode.current,pci.bus_id
        --format=csv,noheader), for the GPUs' product names (the PCI tree has only device ids).
    type: str
  run_commands:
    description:
      - When true, run C(nvidia-smi topo -m), that C(nvidia-smi --query-gpu) and C(ibdev2netdev) if they are on
        the PATH and the matching C(*_text) option is not set.  The commands only read state.
    type: bool
    default: false
  mix_link_layers:
    description:
      - Let rails of one node use InfiniBand and Ethernet (RoCE) HCAs together, closest first. By default
        rails use one link layer, the one most HCAs have, so one C(NCCL_IB_HCA) never mixes IB and RoCE.
    type: bool
    default: false
notes:
  - Supports check mode.  GPUs are numbered in PCI bus order, as C(nvidia-smi) does.
  - Architecture comes from NVIDIA device-id blocks per GPU die (see docs/hardware-facts.md).
"""

EXAMPLES = r"""
- name: Gather hardware facts
  railforge_hw_facts:
  register: hw

- name: Find the HCAs by PCI vendor id before their driver is installed
  railforge_hw_facts:
    scope: devices
  register: devices

- name: Use nvidia-smi topo when the driver is installed
  railforge_hw_facts:
    run_commands: true

- name: Label the node from the facts
  ansible.builtin.debug:
    msg: "{{ hw.ansible_facts.railforge_hw | railforge_node_labels }}"

- name: Count the GPUs found by PCI id
  ansible.builtin.debug:
    msg: "{{ devices.devices.gpu_count }}"
"""

RETURN = r"""
devices:
  description: With O(scope=devices), the devices only (the keys C(scope) lists), not published as host facts.
  returned: scope is devices
  type: dict
ansible_facts:
  description: Facts under the key C(railforge_hw).
  returned: scope is all
  type: dict
  contains:
    railforge_hw:
      description: Hardware facts.
      type: dict
      contains:
        gpus:
          description: GPUs with index, pci_address, device_id, architecture, die, numa_node.
          type: list
          elements: dict
        gpu_count:
          description: Number of NVIDIA GPUs.
          type: int
        gpu_architectures:
          description: Distinct architectures (Volta, Turing, Ampere, Ada, Hopper, Blackwell, unknown).
          type: list
          elements: str
        hca_functions:
          description: Mellanox/NVIDIA PCI functions of class Ethernet or InfiniBand, found with or without a
            driver, with pci_address, device_id (null when sysfs has none), link_layer (from the PCI class), vf,
            numa_node and rdma_device (the RDMA device the kernel registered for it, else null).
          type: list
          elements: dict
        hcas:
          description: RDMA devices with device, pci_address, numa_node, vf, ports (port, state, phys_state,
            rate, rate_gbps, link_layer, roce_versions, netdev).
          type: list
          elements: dict
        affinity:
          description: GPU index (as string) -> HCA device -> PIX/PXB/PHB/NODE/SYS.
          type: dict
        affinity_source:
          description: C(sysfs) or C(nvidia-smi topo).
          type: str
        rails:
          description: Per GPU the chosen HCA (gpu, hca, port, link, netdev, link_layer, shared_with).
          type: list
          elements: dict
        rail_hcas:
          description: Distinct rail HCAs in GPU order.
          type: list
          elements: str
        rail_count:
          description: Number of distinct rail HCAs.
          type: int
        shared_hcas:
          description: HCA -> GPU indices, for HCAs serving more than one GPU.
          type: dict
        rdma_link_layers:
          description: Link layers of the rail HCAs (InfiniBand, Ethernet).
          type: list
          elements: str
        roce_v2:
          description: True when an Ethernet rail port has a RoCE v2 GID type.
          type: bool
        nvlink:
          description: nvswitch_count, nvswitches, present, source, links_per_gpu_pair.
          type: dict
        fabric:
          description: Multi-node NVLink fabric summary from nvidia_smi_q_text, else null.
          type: dict
        gpu_products:
          description: The GPUs' distinct product names as the driver gives them (nvidia_smi_query_text), sorted;
            empty without the driver.
          type: list
          elements: str
        default_interface:
          description: Interface of the IPv4 default route, if any.
          type: str
        warnings:
          description: Every fallback the facts took and everything they could not reconcile (ports not ACTIVE
            left out of the rails, a link-layer tie, a topo text not used, a command that failed or printed
            output that could not be parsed); also emitted as Ansible warnings.
          type: list
          elements: str
  sample:
    railforge_hw:
      gpu_count: 8
      rail_count: 8
      rail_hcas: [mlx5_0, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_8, mlx5_9, mlx5_10]
"""

# Ansible convention: imports follow the documentation blocks.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.railforge_hwfacts import ParseError, gather_device_facts, gather_hw_facts  # noqa: E402
from ansible.module_utils.railforge_hwparse import DEFAULT_QUERY_FIELDS  # noqa: E402

# Options that refine the affinity and rails, which scope=devices does not compute.
_ALL_SCOPE_OPTIONS = (
    "topo_text",
    "ibdev2netdev_text",
    "nvidia_smi_q_text",
    "nvidia_smi_query_text",
    "run_commands",
    "mix_link_layers",
)
# The commands run_commands runs, by the name their parse errors give them; each only where its text is not given.
_COMMANDS = {
    "nvidia-smi topo": ("topo_text", ["nvidia-smi", "topo", "-m"]),
    "nvidia-smi --query-gpu": (
        "nvidia_smi_query_text",
        ["nvidia-smi", f"--query-gpu={','.join(DEFAULT_QUERY_FIELDS)}", "--format=csv,noheader"],
    ),
    "ibdev2netdev": ("ibdev2netdev_text", ["ibdev2netdev"]),
}


def _run(module, argv, notes):
    path = module.get_bin_path(argv[0])
    if not path:
        return None
    rc, out, err = module.run_command([path, *argv[1:]], check_rc=False)
    if rc != 0:
        notes.append(f"{' '.join(argv)} exited {rc}: {err.strip()[:200]}; facts from sysfs only")
        return None
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "scope": {"type": "str", "choices": ["all", "devices"], "default": "all"},
            "topo_text": {"type": "str"},
            "ibdev2netdev_text": {"type": "str"},
            "nvidia_smi_q_text": {"type": "str"},
            "nvidia_smi_query_text": {"type": "str"},
            "run_commands": {"type": "bool", "default": False},
            "mix_link_layers": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["scope"] == "devices":
        given = [name for name in _ALL_SCOPE_OPTIONS if p[name]]
        if given:
            dropped = ", ".join(given)
            module.fail_json(msg=f"scope=devices gathers no affinity or rails: drop {dropped} or use scope=all")
        module.exit_json(changed=False, devices=gather_device_facts(p["root"]))
    texts = {option: p[option] for option, _ in _COMMANDS.values()}
    ran = set()
    notes: list[str] = []  # fallbacks of this module, reported with those of the facts
    if p["run_commands"]:
        for tool, (option, argv) in _COMMANDS.items():
            if texts[option] is None:
                texts[option] = _run(module, argv, notes)
                ran.add(tool)
    while True:
        try:
            facts = gather_hw_facts(
                root=p["root"],
                nvidia_smi_q_text=p["nvidia_smi_q_text"],
                mix_link_layers=p["mix_link_layers"],
                **texts,
            )
            break
        except ParseError as exc:
            # text the user passed must parse; output of a command we ran ourselves is only a hint
            option = _COMMANDS[exc.tool][0] if exc.tool in _COMMANDS else None
            if exc.tool in ran and texts.get(option) is not None:
                notes.append(f"ignoring unparsable output of {exc.tool}: {exc.reason}")
                texts[option] = None
                continue
            module.fail_json(msg=str(exc), tool=exc.tool)
    facts["warnings"] = notes + facts["warnings"]
    for w in facts["warnings"]:
        module.warn(w)
    module.exit_json(changed=False, ansible_facts={"railforge_hw": facts})


if __name__ == "__main__":
    main()
