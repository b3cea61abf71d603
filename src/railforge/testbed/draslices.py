"""The publishing half of a DRA driver stand-in: fake GPUs and rail NICs of a DGX-shaped node as a ResourceSlice.

It stands in for what NVIDIA's DRA driver for GPUs (driver ``gpu.nvidia.com``) and a NIC DRA driver publish for a
node: one device per GPU and per rail NIC, with the attributes a claim selects on and constrains by (model, NUMA
node, PCIe root, rail). Devices are laid out as on a DGX H100: two GPUs and one NIC under each PCIe root, four roots
per NUMA node. The kubelet half (preparing a claimed device for a container) is not stood in for.
"""

from __future__ import annotations

from railforge.k8s import dra

GPU_DRIVER = "gpu.nvidia.com"
RAIL_DRIVER = "rail.railforge.io"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"  # the attribute Kubernetes standardises for it


def node_slice(node: str, gpus: int = 8, model: str = "NVIDIA H100 80GB HBM3") -> list[dict]:
    """The ResourceSlices (one per driver) of ``node``: ``gpus`` GPUs of ``model`` and one rail NIC per two GPUs."""

    def root(index: int) -> dict:  # the GPU ``index``'s PCIe root and NUMA node
        return {PCIE_ROOT: {"string": f"pci0000:{index // 2:02x}"}, "numaNode": {"int": index // 4}}

    gpu_devices = [
        {"name": f"gpu-{i}", "attributes": {**root(i), "productName": {"string": model}, "index": {"int": i}}}
        for i in range(gpus)
    ]
    nic_devices = [
        {"name": f"rail-{r}", "attributes": {**root(2 * r), "rail": {"int": r}}} for r in range((gpus + 1) // 2)
    ]
    return [
        {
            "apiVersion": f"{dra.GROUP}/{dra.VERSION}",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver.split('.')[0]}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
        for driver, devices in ((GPU_DRIVER, gpu_devices), (RAIL_DRIVER, nic_devices))
    ]


def device_classes() -> list[dict]:
    """A DeviceClass per driver, selecting its devices."""
    return [
        {
            "apiVersion": f"{dra.GROUP}/{dra.VERSION}",
            "kind": "DeviceClass",
            "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
        for driver in (GPU_DRIVER, RAIL_DRIVER)
    ]
