"""Parsers vs every real tool output in tests/fixtures/realdata (and the synthetic query-csv files)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from ansible.module_utils.railforge_hwparse import (
    ParseError,
    expand_cpu_list,
    parse_cpu_ranges,
    parse_ibdev2netdev,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_mlxconfig_query,
    parse_nvidia_smi_list,
    parse_nvidia_smi_q_fabric,
    parse_nvidia_smi_query_csv,
    parse_nvidia_smi_table,
    parse_nvidia_smi_topo,
    split_mlxconfig_value,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REALDATA = FIXTURES / "realdata"


def body(path: Path) -> str:
    lines = path.read_text().splitlines(keepends=True)
    assert lines[0].startswith("# source:") and lines[3].startswith("# ---"), path
    return "".join(lines[4:])


def files(tool: str, prefix: str = "") -> list[Path]:
    return sorted(p for p in (REALDATA / tool).glob("*.txt") if p.name.startswith(prefix))


def ids(paths):
    return [p.name for p in paths]


def truncated(path: Path) -> bool:
    return bool(re.search(r"PARTIAL|TRUNCATED", path.name))


# Expected key facts per fixture.  A fixture without an entry fails test_every_fixture_has_expectations.
# ------------------------------------------------------------------------------------------------
H100_BUSES = ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"]

# The lent H200 (benchmarks/gpu_node_capture.sh), idle and under load
H200_TABLE = {
    "driver": "580.159.04",
    "cuda": "13.0",
    "count": 1,
    "names": {"NVIDIA H200"},
    "persistence": ["On"],
    "pci": ["0000:00:06.0"],
    "mem_total": 143771,
    "mig": ["Disabled"],
}

SMI_TABLE = {
    "default-table-1x-a100-pcie-40gb-460.32.03-old-layout-in-k8s-pod.txt": {
        "driver": "460.32.03",
        "cuda": "11.2",
        "count": 1,
        "names": {"A100-PCIE-40GB"},
        "persistence": ["On"],
        "pci": ["0000:3b:00.0"],
        "mem_total": 40537,
        "mig": ["Disabled"],
    },
    "default-table-8x-h100-80gb-hbm3-560.35.03-persistence-off.txt": {
        "driver": "560.35.03",
        "cuda": "12.6",
        "count": 8,
        "names": {"NVIDIA H100 80GB HBM3"},
        "persistence": ["Off"] * 8,
        "pci": [f"0000:{b}:00.0" for b in H100_BUSES],
        "mem_total": 81559,
        "mig": ["Disabled"] * 8,
    },
    "default-table-b200-r610-kmd-umd-header-PARTIAL.txt": {"error": r"cut off after GPU 1.*Processes"},
    "default-table-1x-h200-580.159.04-under-load-one-process.txt": {
        **H200_TABLE,
        "busy": {"gpu_util_pct": 100, "memory_used_mib": 27195, "power_draw_w": 640, "temperature_c": 56},
    },
    "default-table-1x-h200-580.159.04-firecracker-vm.txt": H200_TABLE,
}

SMI_LIST = {
    "L-4x-a100-sxm4-80gb-gpu0-4x-mig-1g.20gb.txt": {
        "count": 4,
        "name": "NVIDIA A100-SXM4-80GB",
        "mig": {0: ["1g.20gb"] * 4},
        "uuid0": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        "mig_uuid": (0, 3, "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b"),
    },
    "L-4x-h100-80gb-hbm3-one-mig-2g.20gb.txt": {
        "count": 4,
        "name": "NVIDIA H100 80GB HBM3",
        "mig": {3: ["2g.20gb"]},
        "uuid0": "GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de",
        "mig_uuid": (3, 0, "MIG-55d07ceb-ef71-58e0-87c2-0477d96fa03f"),
    },
    "L-1x-h200-no-mig.txt": {
        "count": 1,
        "name": "NVIDIA H200",
        "mig": {},
        "uuid0": "GPU-abbbec21-cdc5-549a-60f8-80f9b2155111",
    },
}

# A driver-580 Fabric Health block with every field N/A
HEALTH_ALL_NA = dict.fromkeys(
    (
        "summary",
        "bandwidth",
        "route_recovery_in_progress",
        "route_unhealthy",
        "access_timeout_recovery",
        "incorrect_configuration",
        "partition_assigned",
    )
)

SMI_Q = {
    "q-fabric-block-azure-mnnvl-node-insufficient-resources.txt": {
        "state": "Completed",
        "status": "Insufficient Resources",
        "clique_id": 0,
        "cluster_uuid": "00000000-0000-0000-0000-000000000000",
        "health": {},
    },
    "q-fabric-block-in-progress-driver-580.txt": {
        "state": "In Progress",
        "status": None,
        "clique_id": None,
        "cluster_uuid": None,
        "health": HEALTH_ALL_NA,
    },
    "q-grep-fabric-clique-mnnvl-health-unhealthy.txt": {
        "state": "Completed",
        "status": "Success",
        "clique_id": 2,
        "cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278",
        "health": {"summary": "Unhealthy", "bandwidth": "Full"},
    },
    "q-full-1x-h200-fabric-all-na.txt": {
        "state": None,
        "status": None,
        "clique_id": None,
        "cluster_uuid": None,
        "health": HEALTH_ALL_NA,
    },
}

SMI_QUERY = {
    "query-gpu-1x-h200.txt": [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "driver_version": "580.159.04",
            "persistence_mode": "Enabled",
            "mig_mode_current": "Disabled",
            "pci_bus_id": "00000000:00:06.0",
            "pci_address": "0000:00:06.0",
        }
    ],
}

TOPO = {
    "1x-h200-no-nic-ansi-underlined-header.txt": {
        "gpus": 1,
        "nics": {},
        "cells": {},
        "aff": {"GPU0": ("0-15", [[0, 15]], [0], None)},
        "nvlink": 0,
    },
    "1x-a100-pcie-4nic-cx4lx-cx6-messy-alignment-ncclt350.txt": {
        "gpus": 1,
        "nics": {"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_2", "NIC3": "mlx5_3"},
        "cells": {
            ("GPU0", "NIC0"): "SYS",
            ("GPU0", "NIC2"): "NODE",
            ("NIC0", "NIC1"): "PIX",
            ("NIC2", "NIC3"): "PIX",
        },
        "aff": {"GPU0": ("64-127,192-255", [[64, 127], [192, 255]], [1], None)},
        "nvlink": 0,
    },
    "2x-rtx5090-pcie-phb-single-numa-club3090-1229.txt": {
        "gpus": 2,
        "nics": {},
        "cells": {("GPU0", "GPU1"): "PHB"},
        "aff": {"GPU1": ("0-63", [[0, 63]], [0], None)},
        "nvlink": 0,
    },
    "4x-a10-pcie-no-nvlink-2nic.txt": {
        "gpus": 4,
        "nics": {"NIC0": "mlx5_0", "NIC1": "mlx5_1"},
        "cells": {("GPU0", "GPU3"): "SYS", ("GPU2", "NIC1"): "SYS", ("NIC0", "NIC1"): "PIX"},
        "aff": {"GPU3": ("0-127", [[0, 127]], [0], None)},
        "nvlink": 0,
    },
    "8gpu-nv18-12nic-cx7-ib-plus-cx6dx-eth-mooncake2039.txt": {
        "gpus": 8,
        "nics": {f"NIC{i}": f"mlx5_{i}" for i in range(12)},
        "cells": {
            ("GPU0", "GPU7"): "NV18",
            ("GPU0", "NIC0"): "PIX",
            ("GPU0", "NIC2"): "PIX",
            ("GPU0", "NIC3"): "NODE",
            ("GPU0", "NIC6"): "SYS",
            ("GPU4", "NIC8"): "PIX",
            ("GPU7", "NIC11"): "PIX",
            ("NIC0", "NIC1"): "PIX",
            ("NIC5", "NIC6"): "SYS",
        },
        "aff": {
            "GPU0": ("4,6,8,10,12", [[4, 4], [6, 6], [8, 8], [10, 10], [12, 12]], [0], None),
            "GPU4": ("1,3,5,7,9,11", [[1, 1], [3, 3], [5, 5], [7, 7], [9, 9], [11, 11]], [1], None),
        },
        "nvlink": 18,
    },
    "8x-a100-nv12-17nic-2-per-pxb-plus-mlx5_bond_0.txt": {
        "gpus": 8,
        "nics": {**{f"NIC{i}": f"mlx5_{i + 2}" for i in range(16)}, "NIC16": "mlx5_bond_0"},
        "cells": {
            ("GPU0", "GPU1"): "NV12",
            ("GPU0", "NIC0"): "PXB",
            ("GPU1", "NIC3"): "PXB",
            ("GPU0", "NIC4"): "SYS",
            ("GPU7", "NIC15"): "PXB",
            ("NIC0", "NIC1"): "PIX",
            ("NIC0", "NIC2"): "PXB",
            ("GPU3", "NIC16"): "SYS",
        },
        "aff": {"GPU5": ("0-103", [[0, 103]], [0], None)},
        "nvlink": 12,
    },
    "8x-rtx4090-pcie-all-sys-2nic-go-gpuallocator17.txt": {
        "gpus": 8,
        "nics": {},  # no NIC Legend in this paste
        "nic_labels": ["NIC0", "NIC1"],
        "cells": {
            ("GPU6", "NIC0"): "PHB",
            ("GPU6", "NIC1"): "PHB",
            ("GPU7", "NIC0"): "SYS",
            ("NIC0", "NIC1"): "PIX",
        },
        "aff": {
            "GPU0": ("0-55,112-167", [[0, 55], [112, 167]], [0], None),
            "GPU7": ("56-111,168-223", [[56, 111], [168, 223]], [1], None),
        },
        "nvlink": 0,
        "legend": False,
    },
    "dell-r7525-2x-a100-pcie-sys-1nic-cx6-ncclt293.txt": {
        "gpus": 2,
        "nics": {"NIC0": "mlx5_0"},
        "cells": {("GPU0", "GPU1"): "SYS", ("GPU1", "NIC0"): "SYS"},
        "aff": {"GPU0": ("24-47,72-95", [[24, 47], [72, 95]], [1], None)},
        "nvlink": 0,
    },
    "dell-r760xa-l40s-1gpu-in-pod-10nic-topo-mp.txt": {
        "gpus": 1,
        "nics": {f"NIC{i}": f"mlx5_{i}" for i in range(10)},
        "cells": {
            ("GPU0", "NIC0"): "NODE",
            ("GPU0", "NIC9"): "NODE",
            ("NIC0", "NIC1"): "NODE",
            ("NIC1", "NIC9"): "PIX",
        },
        "aff": {"GPU0": ("0,2,4,6,8,10", [[0, 0], [2, 2], [4, 4], [6, 6], [8, 8], [10, 10]], [0], None)},
        "nvlink": 0,
    },
    "gb200-4gpu-nv18-6nic-numa-affinity-lists-PARTIAL.txt": {
        "error": r"cut off in row GPU3.*NIC0, NIC1, NIC2, NIC3, NIC4, NIC5.*NIC Legend"
    },
}

IBDEV2NETDEV = {
    "cx6-ib-pf-plus-sriov-vfs-ibpXXs0vN-PARTIAL.txt": {"error": r"truncated.*starts at mlx5_19.*mlx5_10, .*mlx5_18"},
    "dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt": {
        "count": 11,
        "up": 9,
        "map": {
            "mlx5_0": "ibp24s0",
            "mlx5_10": "ibp220s0",
            "mlx5_2": "enp41s0f1np1",
            "mlx5_7": "enp170s0np0",
        },
        "down": {"mlx5_1", "mlx5_2"},
    },
    "egx-stack-dual-port-100gbe-ens192f0-up-f1-down.txt": {
        "count": 2,
        "up": 1,
        "map": {"mlx5_0": "ens192f0", "mlx5_1": "ens192f1"},
        "down": {"mlx5_1"},
    },
    "in-pod-sriov-ib-vf-net1-down.txt": {"count": 1, "up": 0, "map": {"mlx5_3": "net1"}, "down": {"mlx5_3"}},
    "v-azure-nc24rs_v3-connectx3-vf-mlx4_0.txt": {
        "count": 1,
        "up": 0,
        "map": {"mlx4_0": "ib0"},
        "down": {"mlx4_0"},
        "verbose": {
            "pci": "0002:00:02.0",
            "board": "MT4100",
            "psid": None,
            "fw": "2.43.7008",
            "port_state": "ACTIVE",
        },
    },
}

IBSTAT = {
    "12hca-8xcx7-ndr400-ib-plus-cx6dx-eth-mooncake2039.txt": {
        "cas": sorted(f"mlx5_{i}" for i in range(12)),  # ibstat lists CAs in lexical order
        "ib_active_400": 8,
        "port": ("mlx5_7", "Active", "LinkUp", 100, "Ethernet"),
        "ca": ("mlx5_0", "MT4129", "28.41.1000", "0x58a2e103001b2576"),
    },
    "connectx3-mlx4_0-fdr56-single-port.txt": {
        "cas": ["mlx4_0"],
        "ib_active_400": 0,
        "port": ("mlx4_0", "Active", "LinkUp", 56, "InfiniBand"),
        "ca": ("mlx4_0", "MT4099", "2.42.5000", "0x98039b0300dccab0"),
        "port_guid": "0x98039b0300dccab1",
    },
    "cx4lx-roce25-plus-cx6-hdr-ib-a100-pcie-node-ncclt350.txt": {
        "cas": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],
        "ib_active_400": 0,
        "port": ("mlx5_3", "Down", "Disabled", 10, "InfiniBand"),
        "ca": ("mlx5_2", "MT4123", "20.43.1014", "0xb8cef603002d857a"),
        "lid": ("mlx5_3", 65535),
    },
}

IBV_DEVINFO = {
    "h100-4x8-dell-cx7-8hca-ib-fw28.41-tabs.txt": {
        "hcas": ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"],
        "fw": "28.41.1000",
        "board": "DEL0000000036",
        "part": 4129,
        "state": "PORT_ACTIVE",
        "mtu": 4096,
        "link": "InfiniBand",
        "lid": ("mlx5_11", 3735),
    },
}

MLXCONFIG = {
    "cx7-mcx715105as-weat-query-egrep-sriov-numvfs-linktype-eth.txt": {
        "count": 1,
        "device_type": "ConnectX7",
        "name": "MCX715105AS-WEAT_Ax",
        "sriov": True,
        "vfs": 8,
        "link": "ETH",
        "raw_link": "ETH(2)",
        "host": None,
    },
    "dgx-h100-basepod-sriov-linktype-grep-8-cx7.txt": {
        "count": 8,
        "device_type": None,
        "name": None,
        "sriov": True,
        "vfs": 8,
        "link": "IB",
        "raw_link": "IB(1)",
        "host": "dgx-01..dgx-04",
    },
}

EXPECTED = {
    "nvidia-smi": {**SMI_TABLE, **SMI_LIST, **SMI_Q, **SMI_QUERY},
    "nvidia-smi-topo": TOPO,
    "ibdev2netdev": IBDEV2NETDEV,
    "ibstat": IBSTAT,
    "ibv_devinfo": IBV_DEVINFO,
    "mlxconfig": MLXCONFIG,
}


def test_every_fixture_has_expectations():
    on_disk = {(p.parent.name, p.name) for p in REALDATA.glob("*/*.txt")}
    expected = {(tool, name) for tool, d in EXPECTED.items() for name in d}
    assert on_disk == expected
    for tool, name in on_disk:  # every truncated paste must be expected to fail
        if truncated(Path(name)):
            assert "error" in EXPECTED[tool][name], name


def _check_error(fn, path: Path, pattern: str):
    with pytest.raises(ParseError) as ei:
        fn(body(path))
    assert re.search(pattern, str(ei.value)), str(ei.value)


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", files("nvidia-smi", "default-table"), ids=ids(files("nvidia-smi", "default-table")))
def test_nvidia_smi_table(path):
    exp = SMI_TABLE[path.name]
    if "error" in exp:
        return _check_error(parse_nvidia_smi_table, path, exp["error"])
    r = parse_nvidia_smi_table(body(path))
    assert (r["driver_version"], r["cuda_version"], r["gpu_count"]) == (
        exp["driver"],
        exp["cuda"],
        exp["count"],
    )
    assert {g["name"] for g in r["gpus"]} == exp["names"]
    assert [g["persistence_mode"] for g in r["gpus"]] == exp["persistence"]
    assert [g["pci_address"] for g in r["gpus"]] == exp["pci"]
    assert [g["index"] for g in r["gpus"]] == list(range(exp["count"]))
    assert {g["memory_total_mib"] for g in r["gpus"]} == {exp["mem_total"]}
    assert [g["mig_mode"] for g in r["gpus"]] == exp["mig"]
    for key, value in exp.get("busy", {}).items():
        assert r["gpus"][0][key] == value, key


@pytest.mark.parametrize("path", files("nvidia-smi", "L-"), ids=ids(files("nvidia-smi", "L-")))
def test_nvidia_smi_list(path):
    exp = SMI_LIST[path.name]
    r = parse_nvidia_smi_list(body(path))
    assert r["gpu_count"] == exp["count"]
    assert {g["name"] for g in r["gpus"]} == {exp["name"]}
    assert {g["index"]: [m["profile"] for m in g["mig_devices"]] for g in r["gpus"] if g["mig_devices"]} == exp["mig"]
    assert r["gpus"][0]["uuid"] == exp["uuid0"]
    assert r["mig_device_count"] == sum(len(profiles) for profiles in exp["mig"].values())
    if "mig_uuid" in exp:
        gi, mi, uuid = exp["mig_uuid"]
        assert r["gpus"][gi]["mig_devices"][mi]["uuid"] == uuid


@pytest.mark.parametrize("path", files("nvidia-smi", "q-"), ids=ids(files("nvidia-smi", "q-")))
def test_nvidia_smi_q_fabric(path):
    exp = SMI_Q[path.name]
    (r,) = parse_nvidia_smi_q_fabric(body(path))
    for k in ("state", "status", "clique_id", "cluster_uuid", "health"):
        assert r[k] == exp[k], k


@pytest.mark.parametrize("path", files("nvidia-smi-topo"), ids=ids(files("nvidia-smi-topo")))
def test_nvidia_smi_topo(path):
    exp = TOPO[path.name]
    if "error" in exp:
        return _check_error(parse_nvidia_smi_topo, path, exp["error"])
    r = parse_nvidia_smi_topo(body(path))
    assert r["gpus"] == [f"GPU{i}" for i in range(exp["gpus"])]
    assert r["nic_devices"] == exp["nics"]
    assert r["nics"] == exp.get("nic_labels", list(exp["nics"]))
    for (a, b), v in exp["cells"].items():
        assert r["matrix"][a][b] == v and r["matrix"][b][a] == v, (a, b)
    for g, (cpus, ranges, numa, gnuma) in exp["aff"].items():
        a = r["gpu_affinity"][g]
        assert (a["cpu_affinity"], a["cpu_ranges"], a["numa_affinity"], a["gpu_numa_id"]) == (
            cpus,
            ranges,
            numa,
            gnuma,
        )
    assert r["nvlink"] == bool(exp["nvlink"]) and r["nvlink_max_links"] == exp["nvlink"]
    assert r["legend_present"] == exp.get("legend", True)


@pytest.mark.parametrize("path", files("ibdev2netdev"), ids=ids(files("ibdev2netdev")))
def test_ibdev2netdev(path):
    exp = IBDEV2NETDEV[path.name]
    if "error" in exp:
        return _check_error(parse_ibdev2netdev, path, exp["error"])
    r = parse_ibdev2netdev(body(path))
    assert len(r) == exp["count"]
    assert sum(e["link"] == "Up" for e in r) == exp["up"]
    by = {e["device"]: e for e in r}
    for dev, nd in exp["map"].items():
        assert by[dev]["netdev"] == nd and by[dev]["port"] == 1
    assert {d for d, e in by.items() if e["link"] == "Down"} == exp["down"]
    for k, v in exp.get("verbose", {}).items():
        assert r[0][k] == v, k


@pytest.mark.parametrize("path", files("ibstat"), ids=ids(files("ibstat")))
def test_ibstat(path):
    exp = IBSTAT[path.name]
    r = parse_ibstat(body(path))
    assert [c["ca"] for c in r] == exp["cas"]
    by = {c["ca"]: c for c in r}
    ib400 = [
        c
        for c in r
        for p in c["ports"]
        if p["link_layer"] == "InfiniBand" and p["rate"] == 400 and p["state"] == "Active"
    ]
    assert len(ib400) == exp["ib_active_400"]
    ca, state, phys, rate, layer = exp["port"]
    p = by[ca]["ports"][0]
    assert (p["port"], p["state"], p["physical_state"], p["rate"], p["link_layer"]) == (
        1,
        state,
        phys,
        rate,
        layer,
    )
    ca, typ, fw, guid = exp["ca"]
    assert (by[ca]["ca_type"], by[ca]["firmware_version"], by[ca]["node_guid"]) == (typ, fw, guid)
    if "port_guid" in exp:
        assert r[0]["ports"][0]["port_guid"] == exp["port_guid"]
    if "lid" in exp:
        assert by[exp["lid"][0]]["ports"][0]["base_lid"] == exp["lid"][1]


@pytest.mark.parametrize("path", files("ibv_devinfo"), ids=ids(files("ibv_devinfo")))
def test_ibv_devinfo(path):
    exp = IBV_DEVINFO[path.name]
    r = parse_ibv_devinfo(body(path))
    assert [h["hca_id"] for h in r] == exp["hcas"]
    assert {h["fw_ver"] for h in r} == {exp["fw"]}
    assert {h["board_id"] for h in r} == {exp["board"]}
    assert {h["vendor_part_id"] for h in r} == {exp["part"]}
    ports = [p for h in r for p in h["ports"]]
    assert {(p["state"], p["active_mtu"], p["link_layer"]) for p in ports} == {(exp["state"], exp["mtu"], exp["link"])}
    assert {h["hca_id"]: h["ports"][0]["port_lid"] for h in r}[exp["lid"][0]] == exp["lid"][1]


@pytest.mark.parametrize("path", files("mlxconfig"), ids=ids(files("mlxconfig")))
def test_mlxconfig(path):
    exp = MLXCONFIG[path.name]
    r = parse_mlxconfig_query(body(path))
    assert len(r) == exp["count"]
    for d in r:
        assert (d["device_type"], d["name"], d["host"]) == (exp["device_type"], exp["name"], exp["host"])
        assert (d["sriov_en"], d["num_of_vfs"], d["link_types"]) == (
            exp["sriov"],
            exp["vfs"],
            {"P1": exp["link"]},
        )
        assert d["config"]["LINK_TYPE_P1"] == exp["raw_link"]
        assert d["config"]["SRIOV_EN"] == "True(1)"


@pytest.mark.parametrize("path", files("nvidia-smi", "query-"), ids=ids(files("nvidia-smi", "query-")))
def test_nvidia_smi_query_csv_real(path):
    assert parse_nvidia_smi_query_csv(body(path)) == SMI_QUERY[path.name]


SYNTH = sorted((FIXTURES / "synthetic" / "nvidia-smi-query-gpu").glob("*.txt"))


@pytest.mark.parametrize("path", SYNTH, ids=ids(SYNTH))
def test_nvidia_smi_query_csv(path):
    assert "SYNTHETIC" in path.read_text().splitlines()[0]
    rows = parse_nvidia_smi_query_csv(body(path))
    assert [r["index"] for r in rows] == list(range(len(rows)))
    if "8x-h100" in path.name:
        assert len(rows) == 8
        assert {r["driver_version"] for r in rows} == {"560.35.03"}
        assert [r["index"] for r in rows if r["mig_mode_current"] == "Enabled"] == [3]
        assert [r["index"] for r in rows if r["persistence_mode"] == "Disabled"] == [7]
        assert [r["pci_address"] for r in rows] == [f"0000:{b}:00.0" for b in H100_BUSES]
    else:
        assert rows == [
            {
                "index": 0,
                "name": "Tesla T4",
                "driver_version": "535.104.05",
                "persistence_mode": "Disabled",
                "mig_mode_current": None,
                "pci_bus_id": "00000000:00:1E.0",
                "pci_address": "0000:00:1e.0",
            }
        ]


def test_nvidia_smi_query_csv_cut_line():
    text = body(SYNTH[-1]).rstrip("\n")
    with pytest.raises(ParseError, match=r"line 9 has 4 of 6 fields"):
        parse_nvidia_smi_query_csv(text[: text.rindex(", Disabled")])
    with pytest.raises(ParseError, match="no GPU rows"):
        parse_nvidia_smi_query_csv("")


# ------------------------------------------------------------------------------------------------
# Cut-anywhere robustness: every prefix of every complete fixture either parses or raises ParseError
# (never another exception); prefixes cut inside the matrix / GPU table must raise ParseError.
# ------------------------------------------------------------------------------------------------
PARSERS = {
    "nvidia-smi-topo": parse_nvidia_smi_topo,
    "ibdev2netdev": parse_ibdev2netdev,
    "ibstat": parse_ibstat,
    "ibv_devinfo": parse_ibv_devinfo,
    "mlxconfig": parse_mlxconfig_query,
}


def _parser_for(path: Path):
    if path.parent.name != "nvidia-smi":
        return PARSERS[path.parent.name]
    if path.name.startswith("L-"):
        return parse_nvidia_smi_list
    if path.name.startswith("q-"):
        return parse_nvidia_smi_q_fabric
    if path.name.startswith("query-"):
        return parse_nvidia_smi_query_csv
    return parse_nvidia_smi_table


ALL = sorted(REALDATA.glob("*/*.txt"))


def _cuts(n: int, limit: int = 150):
    step = max(1, n // limit)
    return range(0, n, step)


@pytest.mark.parametrize("path", ALL, ids=[f"{p.parent.name}/{p.name}" for p in ALL])
def test_any_prefix_parses_or_raises_parse_error(path):
    fn = _parser_for(path)
    text = body(path)
    for cut in _cuts(len(text)):
        with contextlib.suppress(ParseError):
            fn(text[:cut])


def _matrix_end(text: str) -> int:
    """Offset just past the last non-blank matrix character."""
    lines = text.splitlines(keepends=True)
    pos, end, started = 0, 0, False
    for ln in lines:
        s = ln.strip()
        if re.match(r"^(GPU|NIC)\d+\s", s):
            started = True
            end = pos + len(ln.rstrip())
        elif started and (not s or s.startswith("Legend")):
            break
        pos += len(ln)
    return end


COMPLETE_TOPO = [p for p in files("nvidia-smi-topo") if not truncated(p)]


@pytest.mark.parametrize("path", COMPLETE_TOPO, ids=ids(COMPLETE_TOPO))
def test_topo_cut_inside_matrix_is_parse_error(path):
    text = body(path)
    end = _matrix_end(text)
    parse_nvidia_smi_topo(text[:end])  # the matrix alone is complete
    for cut in _cuts(end - 1, 120):
        with pytest.raises(ParseError):
            parse_nvidia_smi_topo(text[: cut + 1] if cut + 1 < end else text[: end - 1])


COMPLETE_TABLE = [p for p in files("nvidia-smi", "default-table") if not truncated(p)]


@pytest.mark.parametrize("path", COMPLETE_TABLE, ids=ids(COMPLETE_TABLE))
def test_smi_table_cut_before_closing_border_is_parse_error(path):
    text = body(path)
    # offset of the end of the GPU table = end of the first full border line followed by a blank line
    m = re.search(r"\n(\+-[-+]+\+)\n\s*\n", text)
    end = m.end(1)
    assert parse_nvidia_smi_table(text[: end + 1])["gpus"]  # border + newline: complete
    for cut in [*_cuts(end - 1, 120), end]:
        with pytest.raises(ParseError):
            parse_nvidia_smi_table(text[:cut])


def test_topo_nic_legend_cut_is_parse_error():
    text = body(REALDATA / "nvidia-smi-topo/8gpu-nv18-12nic-cx7-ib-plus-cx6dx-eth-mooncake2039.txt")
    with pytest.raises(ParseError, match=r"NIC Legend is incomplete.*NIC10, NIC11"):
        parse_nvidia_smi_topo(text[: text.index("  NIC10: mlx5_10")])


def test_topo_misaligned_matrix_is_parse_error():
    text = body(REALDATA / "nvidia-smi-topo/4x-a10-pcie-no-nvlink-2nic.txt")
    broken = text.replace(
        "NIC0    SYS     SYS     SYS     SYS      X      PIX",
        "NIC0    SYS     SYS     SYS     PIX      X      SYS",
    )
    with pytest.raises(ParseError):
        parse_nvidia_smi_topo(broken)


def test_ibstat_missing_port_fields():
    text = body(REALDATA / "ibstat/connectx3-mlx4_0-fdr56-single-port.txt")
    with pytest.raises(ParseError, match=r"mlx4_0 port 1: missing link_layer"):
        parse_ibstat(text[: text.index("\t\tLink layer")])
    with pytest.raises(ParseError, match=r"'Number of ports: 1' but 0 port blocks"):
        parse_ibstat(text[: text.index("\tPort 1:")])


def test_ibv_devinfo_missing_port():
    text = body(REALDATA / "ibv_devinfo/h100-4x8-dell-cx7-8hca-ib-fw28.41-tabs.txt")
    with pytest.raises(ParseError, match=r"hca mlx5_11: phys_port_cnt 1 but 0 port blocks"):
        parse_ibv_devinfo(text[: text.rindex("\t\tport:")])


def test_ibdev2netdev_vf_and_gap_in_middle():
    # lines of the partial paste that are complete on their own: VF netdevs are flagged
    r = parse_ibdev2netdev("mlx5_20 port 1 ==> ibp141s0v0 (Down)\nmlx5_21 port 1 ==> ibp141s0 (Up)\n")
    assert [e["vf"] for e in r] == [True, False]
    # a device missing *between* printed lines is a real gap, not a cut (mlx5_11 absent on the DGX paste)
    text = body(REALDATA / "ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt")
    assert len(parse_ibdev2netdev(text.replace("mlx5_4 port 1 ==> ibp79s0 (Up)\n", ""))) == 10
    with pytest.raises(ParseError, match=r"line 1 is not '<device> port <n> ==> <netdev> \(Up\|Down\)'"):
        parse_ibdev2netdev("mlx5_0 port 1 ==> ibp24s0 (U")


@pytest.mark.parametrize(
    "path",
    sorted((FIXTURES / "derived/ibdev2netdev").glob("*.txt")),
    ids=lambda p: p.name,
)
def test_ibdev2netdev_any_whitespace_alignment(path):
    """The real paste realigned by `column -t` or separated by TABs parses to the same entries."""
    original = body(REALDATA / "ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt")
    assert parse_ibdev2netdev(body(path)) == parse_ibdev2netdev(original)


def test_ibdev2netdev_verbose_realigned_by_column():
    """-v output through `column -t` (runs of spaces inside the board field too) keeps every field."""
    text = body(REALDATA / "ibdev2netdev/v-azure-nc24rs_v3-connectx3-vf-mlx4_0.txt")
    realigned = re.sub(r"(?<=\S) (?=\S)", "   ", text)
    assert parse_ibdev2netdev(realigned) == parse_ibdev2netdev(text)


def test_nvidia_smi_list_cut_line():
    text = body(REALDATA / "nvidia-smi/L-4x-a100-sxm4-80gb-gpu0-4x-mig-1g.20gb.txt")
    with pytest.raises(ParseError, match="line 5 is incomplete"):
        parse_nvidia_smi_list(text[: text.index("Device  2:") + 5])


def test_cpu_lists_and_mlx_values():
    assert parse_cpu_ranges("0,3-9,11-17") == [[0, 0], [3, 9], [11, 17]]
    assert expand_cpu_list("1,19-21") == [1, 19, 20, 21]
    assert parse_cpu_ranges("N/A") == []
    with pytest.raises(ValueError):
        parse_cpu_ranges("5-3")
    assert split_mlxconfig_value("ETH(2)") == ("ETH", 2)
    assert split_mlxconfig_value("True(1)") == ("True", 1)
    assert split_mlxconfig_value("8") == (None, 8)


def test_topo_numeric_gpu_numa_id_and_multi_range_numa():
    # the first two rows of the (truncated) GB200 paste, narrowed to a complete 2-GPU matrix
    rows = body(REALDATA / "nvidia-smi-topo/gb200-4gpu-nv18-6nic-numa-affinity-lists-PARTIAL.txt").splitlines()
    text = "\n".join(
        [
            "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
            "GPU0\t" + "\t".join(rows[2].split()[1:3] + rows[2].split()[-3:]),
            "GPU1\t" + "\t".join(rows[3].split()[1:3] + rows[3].split()[-3:]),
        ]
    )
    r = parse_nvidia_smi_topo(text)
    assert r["matrix"]["GPU0"]["GPU1"] == "NV18"
    a = r["gpu_affinity"]["GPU1"]
    assert (a["cpu_affinity"], a["numa_affinity"], a["gpu_numa_id"]) == (
        "0-71",
        [0, *range(3, 10), *range(11, 18)],
        10,
    )
    assert r["gpu_affinity"]["GPU0"]["gpu_numa_id"] == 2
