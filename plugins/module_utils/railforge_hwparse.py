# Railforge - parsers for GPU / RDMA tool output.
#
# Pure Python, no third-party imports: this file is shipped to managed nodes as Ansible
# module_utils and is also imported directly by the unit tests.
#
# Every parser accepts the text as a human would paste it: shell prompts and command
# lines, wrapper lines (e.g. "NVIDIA Topology: "), TABs mixed with runs of spaces and
# trailing blanks are tolerated.  Anything that looks cut off raises ParseError with a
# message that names what is missing; a parser never returns a partial answer silently.
"""Parsers for nvidia-smi, nvidia-smi topo, ibdev2netdev, ibstat, ibv_devinfo and mlxconfig output."""

from __future__ import annotations

import csv
import re

__all__ = [
    "ParseError",
    "expand_cpu_list",
    "parse_cpu_ranges",
    "parse_ibdev2netdev",
    "parse_ibstat",
    "parse_ibv_devinfo",
    "parse_mlxconfig_query",
    "parse_nvidia_smi_list",
    "parse_nvidia_smi_q_fabric",
    "parse_nvidia_smi_query_csv",
    "parse_nvidia_smi_table",
    "parse_nvidia_smi_topo",
    "split_mlxconfig_value",
]


class ParseError(ValueError):
    """Raised when tool output cannot be parsed completely.

    ``tool`` names the parser; the message says what was missing or unexpected.
    """

    def __init__(self, tool: str, message: str):
        self.tool = tool
        self.reason = message
        super().__init__(f"{tool}: {message}")


# Terminal styling: nvidia-smi 580 underlines the topo matrix header with it, in a file too.
_ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _lines(text: str) -> list[str]:
    if text is None:
        return []
    return [ln.rstrip() for ln in _ANSI_SGR.sub("", str(text)).replace("\r\n", "\n").split("\n")]


def _none_if_na(value):
    if value is None:
        return None
    v = value.strip()
    if v in ("", "N/A", "[N/A]", "n/a", "NA", "[Not Supported]", "Not Supported"):
        return None
    return v


def _int_or_none(value):
    v = _none_if_na(value)
    if v is None:
        return None
    try:
        return int(v, 0) if v.lower().startswith("0x") else int(v)
    except ValueError:
        return None


def _snake(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.strip().lower()).strip("_")


def normalize_pci_address(bus_id: str) -> str:
    """'00000000:19:00.0' (nvidia-smi) or '19:00.0' -> '0000:19:00.0' (sysfs form, lower case)."""
    m = re.match(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", bus_id.strip())
    if not m:
        raise ValueError(f"not a PCI address: {bus_id!r}")
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


# --------------------------------------------------------------------------------------
# CPU / NUMA lists ("0-55,112-167", "0,3-9,11-17")
# --------------------------------------------------------------------------------------


def parse_cpu_ranges(text: str) -> list[list[int]]:
    """'0-55,112-167' -> [[0, 55], [112, 167]]; 'N/A' or '' -> []."""
    v = _none_if_na(text)
    if v is None:
        return []
    out = []
    for part in v.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^(\d+)(?:-(\d+))?$", part)
        if not m:
            raise ValueError(f"bad CPU/NUMA list element {part!r} in {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"descending range {part!r} in {text!r}")
        out.append([lo, hi])
    return out


def expand_cpu_list(text: str) -> list[int]:
    """'0,3-5' -> [0, 3, 4, 5]."""
    out: list[int] = []
    for lo, hi in parse_cpu_ranges(text):
        out.extend(range(lo, hi + 1))
    return out


# --------------------------------------------------------------------------------------
# nvidia-smi (default table)
# --------------------------------------------------------------------------------------

_SMI_HEADER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+(?P<dkey>Driver Version|KMD Version):\s*(?P<driver>\S+)"
    r"(?:\s+(?P<ckey>CUDA Version|CUDA UMD Version):\s*(?P<cuda>\S+))?"
)
_BORDER = re.compile(r"^\+[-+=]*\+?$")


def _split_cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def parse_nvidia_smi_table(text: str) -> dict:
    """Parse the default ``nvidia-smi`` table (pre-R510 narrow, R555+ wide and R610 KMD/UMD headers).

    Returns ``{"smi_version", "driver_version", "cuda_version", "gpus": [...], "gpu_count"}``; every GPU
    has ``index, name, persistence_mode, bus_id, pci_address, memory_used_mib, memory_total_mib,
    mig_mode`` and a few more columns.
    """
    tool = "nvidia-smi"
    lines = _lines(text)
    hdr_i = None
    m = None
    for i, ln in enumerate(lines):
        m = _SMI_HEADER.search(ln)
        if m:
            hdr_i = i
            break
    if hdr_i is None:
        raise ParseError(tool, "no 'NVIDIA-SMI <ver>  Driver Version: ...' header line found")
    if not m.group("cuda"):
        raise ParseError(tool, "header line has no 'CUDA Version:' field (cut line?)")
    top = lines[hdr_i - 1].strip() if hdr_i > 0 else ""
    width = len(top) if _BORDER.match(top) else len(lines[hdr_i].strip())
    result = {
        "smi_version": m.group("smi"),
        "driver_version": m.group("driver"),
        "cuda_version": m.group("cuda"),
        "header_style": "kmd-umd" if m.group("dkey") == "KMD Version" else "driver-cuda",
        "gpus": [],
    }
    # column header block: lines between the first border after the header and the '|====' line
    i = hdr_i + 1
    if i >= len(lines) or (not _BORDER.match(lines[i].strip()) and not lines[i].strip().startswith("|-")):
        raise ParseError(tool, "table ends right after the version header (no GPU column header)")
    i += 1
    header_rows = 0
    while i < len(lines) and not lines[i].strip().startswith("|="):
        if not lines[i].strip().startswith("|"):
            raise ParseError(tool, "GPU column header block is incomplete (no '|====' separator line)")
        header_rows += 1
        i += 1
    if i >= len(lines):
        raise ParseError(tool, "GPU column header block is incomplete (no '|====' separator line)")
    if header_rows < 2:
        raise ParseError(tool, f"expected at least 2 column header rows, found {header_rows}")
    i += 1
    block: list[str] = []
    closed = False
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("|"):
            block.append(s)
        elif _BORDER.match(s) and s:
            if len(s) < width:
                if len(block) == header_rows:
                    result["gpus"].append(_smi_gpu_block(tool, block))
                last = result["gpus"][-1]["index"] if result["gpus"] else None
                raise ParseError(
                    tool,
                    f"GPU table is cut off after GPU {last}: border line is {len(s)} of {width} characters "
                    "(remaining GPUs and the Processes table are missing)",
                )
            if len(block) != header_rows:
                raise ParseError(
                    tool,
                    f"GPU block has {len(block)} rows, expected {header_rows} (truncated or mangled table)",
                )
            result["gpus"].append(_smi_gpu_block(tool, block))
            block = []
            if i + 1 >= len(lines):
                # a GPU's border line is identical to the table's closing border: text that stops
                # right here may have lost more GPUs (complete output continues with a blank line)
                raise ParseError(
                    tool,
                    f"output stops right after the border line of GPU {result['gpus'][-1]['index']}; "
                    "cannot tell whether more GPUs and the Processes table were cut off",
                )
            if not lines[i + 1].strip().startswith("|"):
                closed = True
                break
        else:
            break
        i += 1
    if not closed:
        last = result["gpus"][-1]["index"] if result["gpus"] else None
        what = f"after GPU {last}" if last is not None else "before the first GPU"
        raise ParseError(tool, f"GPU table is cut off {what}: no closing '+---+' border line")
    if not result["gpus"]:
        raise ParseError(tool, "no GPU rows in the table")
    result["gpu_count"] = len(result["gpus"])
    return result


def _smi_gpu_block(tool: str, block: list[str]) -> dict:
    c0 = _split_cells(block[0])
    c1 = _split_cells(block[1])
    if len(c0) < 3 or len(c1) < 3:
        raise ParseError(tool, f"GPU row has too few '|' cells: {block[0]!r}")
    m = re.match(r"^(\d+)\s+(.*?)\s+(On|Off)$", c0[0])
    if not m:
        raise ParseError(tool, f"cannot read 'GPU Name Persistence-M' from {c0[0]!r}")
    m2 = re.match(r"^(\S+)\s+(\S+)$", c0[1])
    if not m2:
        raise ParseError(tool, f"cannot read 'Bus-Id Disp.A' from {c0[1]!r}")
    gpu = {
        "index": int(m.group(1)),
        "name": m.group(2),
        "persistence_mode": m.group(3),
        "bus_id": m2.group(1),
        "pci_address": normalize_pci_address(m2.group(1)),
        "display_active": m2.group(2),
        "ecc_uncorrected": _none_if_na(c0[2]),
    }
    f = c1[0].split()
    # Fan Temp Perf Pwr:Usage/Cap  e.g. "N/A 38C P0 70W / 700W"
    if len(f) >= 3:
        gpu["fan"] = _none_if_na(f[0])
        gpu["temperature_c"] = _int_or_none(f[1].rstrip("C"))
        gpu["perf_state"] = f[2]
    pm = re.search(r"(\S+)\s*/\s*(\S+)$", c1[0])
    if pm:
        gpu["power_draw_w"] = _int_or_none(pm.group(1).rstrip("W"))
        gpu["power_cap_w"] = _int_or_none(pm.group(2).rstrip("W"))
    mm = re.match(r"^(\d+)MiB\s*/\s*(\d+)MiB$", c1[1])
    if not mm:
        raise ParseError(tool, f"cannot read 'Memory-Usage' from {c1[1]!r} (GPU {gpu['index']})")
    gpu["memory_used_mib"] = int(mm.group(1))
    gpu["memory_total_mib"] = int(mm.group(2))
    um = re.match(r"^(\S+)\s+(.+)$", c1[2])
    if um:
        gpu["gpu_util_pct"] = _int_or_none(um.group(1).rstrip("%"))
        gpu["compute_mode"] = um.group(2)
    gpu["mig_mode"] = None
    if len(block) >= 3:
        c2 = _split_cells(block[2])
        gpu["mig_mode"] = _none_if_na(c2[-1]) if c2 else None
    return gpu


# --------------------------------------------------------------------------------------
# nvidia-smi -L
# --------------------------------------------------------------------------------------

_L_GPU = re.compile(r"^\s*GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_L_MIG = re.compile(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")


def parse_nvidia_smi_list(text: str) -> dict:
    """Parse ``nvidia-smi -L``: ``{"gpus": [{index, name, uuid, mig_devices: [{profile, index, uuid}]}]}``."""
    tool = "nvidia-smi -L"
    gpus: list[dict] = []
    for n, ln in enumerate(_lines(text), 1):
        if not ln.strip():
            continue
        g = _L_GPU.match(ln)
        if g:
            gpus.append({"index": int(g.group(1)), "name": g.group(2), "uuid": g.group(3), "mig_devices": []})
            continue
        mg = _L_MIG.match(ln)
        if mg:
            if not gpus:
                raise ParseError(tool, f"line {n}: MIG device listed before any GPU line")
            gpus[-1]["mig_devices"].append({"profile": mg.group(1), "index": int(mg.group(2)), "uuid": mg.group(3)})
            continue
        if re.match(r"^\s*(GPU \d|MIG )", ln):
            raise ParseError(tool, f"line {n} is incomplete (cut paste?): {ln.strip()!r}")
        # anything else (prompt, command line) is ignored
    if not gpus:
        raise ParseError(tool, "no 'GPU n: <name> (UUID: GPU-...)' lines found")
    for want, g in enumerate(gpus):
        if g["index"] != want:
            raise ParseError(tool, f"GPU indices are not contiguous: expected GPU {want}, found GPU {g['index']}")
    return {
        "gpus": gpus,
        "gpu_count": len(gpus),
        "mig_device_count": sum(len(g["mig_devices"]) for g in gpus),
    }


# --------------------------------------------------------------------------------------
# nvidia-smi -q  (Fabric section)
# --------------------------------------------------------------------------------------

_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")


def parse_nvidia_smi_q_fabric(text: str) -> list[dict]:
    """Parse every ``Fabric`` section of ``nvidia-smi -q`` (full output, an excerpt or a grep of it).

    Returns a list, one entry per GPU: ``{gpu_bus_id, state, status, clique_id, cluster_uuid,
    health: {summary, bandwidth, ...}}``.  ``N/A`` becomes None; clique_id is an int.
    """
    tool = "nvidia-smi -q"
    lines = _lines(text)
    out: list[dict] = []
    gpu_bus = None
    i = 0
    while i < len(lines):
        ln = lines[i]
        gm = re.match(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$", ln)
        if gm:
            gpu_bus = gm.group(1)
        if ln.strip() == "Fabric":
            indent = len(ln) - len(ln.lstrip())
            entry: dict = {"gpu_bus_id": gpu_bus, "health": {}}
            raw: dict = {}
            sub = None
            sub_indent = None
            i += 1
            while i < len(lines):
                s = lines[i]
                if not s.strip() or s.strip() == "--":
                    break
                ind = len(s) - len(s.lstrip())
                if ind <= indent:
                    break
                kv = _KV.match(s)
                if kv:
                    if sub is not None and ind <= sub_indent:
                        sub = None
                    key = _snake(kv.group(2))
                    val = _none_if_na(kv.group(3))
                    (entry["health"] if sub == "health" else raw)[key] = val
                else:
                    sub = _snake(s)
                    sub_indent = ind
                i += 1
            missing = [k for k in ("state", "status") if k not in raw]
            if missing:
                raise ParseError(tool, f"Fabric section lacks {', '.join(missing)} (cut paste?)")
            entry["state"] = raw.get("state")
            entry["status"] = raw.get("status")
            entry["clique_id"] = _int_or_none(raw.get("cliqueid"))
            entry["cluster_uuid"] = raw.get("clusteruuid")
            for k, v in raw.items():
                if k not in ("state", "status", "cliqueid", "clusteruuid"):
                    entry[k] = v
            out.append(entry)
            continue
        i += 1
    if not out:
        raise ParseError(tool, "no 'Fabric' section found")
    return out


# --------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv,noheader
# --------------------------------------------------------------------------------------

DEFAULT_QUERY_FIELDS = (
    "index",
    "name",
    "driver_version",
    "persistence_mode",
    "mig.mode.current",
    "pci.bus_id",
)


def parse_nvidia_smi_query_csv(text: str, fields=DEFAULT_QUERY_FIELDS) -> list[dict]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv,noheader`` (a header line is skipped too).

    Keys are the query field names with '.' replaced by '_'.  '[N/A]' becomes None, ``index`` an
    int, ``pci.bus_id`` also yields ``pci_address`` in sysfs form.
    """
    tool = "nvidia-smi --query-gpu"
    fields = list(fields)
    keys = [f.replace(".", "_") for f in fields]
    rows = []
    for n, ln in enumerate(_lines(text), 1):
        if not ln.strip() or re.match(r"^\s*\S*[$#>]\s*nvidia-smi\b|^\s*nvidia-smi\b", ln):
            continue
        cells = next(csv.reader([ln], skipinitialspace=True))
        cells = [c.strip() for c in cells]
        if [c.split(" [")[0] for c in cells] == fields:
            continue  # header line from --format=csv
        if len(cells) != len(fields):
            raise ParseError(
                tool,
                f"line {n} has {len(cells)} of {len(fields)} fields ({', '.join(fields)}): {ln.strip()!r}",
            )
        row = {k: _none_if_na(v) for k, v in zip(keys, cells, strict=True)}
        if "index" in row:
            if row["index"] is None or not row["index"].isdigit():
                raise ParseError(tool, f"line {n}: index {cells[0]!r} is not a number")
            row["index"] = int(row["index"])
        if row.get("pci_bus_id"):
            try:
                row["pci_address"] = normalize_pci_address(row["pci_bus_id"])
            except ValueError as exc:
                raise ParseError(tool, f"line {n}: {exc}") from None
        rows.append(row)
    if not rows:
        raise ParseError(tool, "no GPU rows found")
    return rows


# --------------------------------------------------------------------------------------
# nvidia-smi topo -m / -mp
# --------------------------------------------------------------------------------------

_TOPO_LABEL = re.compile(r"GPU NUMA ID|CPU Affinity|NUMA Affinity|GPU\d+|NIC\d+|mlx\d+_\w+")
_TOPO_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
_AFFINITY_KEYS = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}


def _is_topo_header(line: str) -> bool:
    found = _TOPO_LABEL.findall(line)
    if not any(re.match(r"GPU\d+|NIC\d+|mlx", f) for f in found):
        return False
    return _TOPO_LABEL.sub("", line).strip() == ""


def parse_nvidia_smi_topo(text: str) -> dict:
    """Parse ``nvidia-smi topo -m`` / ``-mp``.

    Returns ``{gpus: [GPU0..], nics: [NIC0..], nic_devices: {NIC0: mlx5_0}, matrix: {row: {col: link}},
    gpu_affinity: {GPU0: {cpu_affinity, cpu_ranges, numa_affinity, gpu_numa_id}}, nvlink: bool,
    legend_present, nic_legend_present}``.  ``nic_devices`` is empty when the paste has no NIC Legend.
    """
    tool = "nvidia-smi topo"
    lines = _lines(text)
    hi = next((i for i, ln in enumerate(lines) if _is_topo_header(ln)), None)
    if hi is None:
        raise ParseError(tool, "no matrix header line (GPU0 ... CPU Affinity) found")
    labels = _TOPO_LABEL.findall(lines[hi])
    cols = [lb for lb in labels if lb not in _AFFINITY_KEYS]
    aff_cols = [lb for lb in labels if lb in _AFFINITY_KEYS]
    if len(set(cols)) != len(cols):
        raise ParseError(tool, "duplicate column labels in the matrix header")
    gpus = [c for c in cols if c.startswith("GPU")]
    nics = [c for c in cols if not c.startswith("GPU")]
    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict] = {}
    i = hi + 1
    while i < len(lines):
        ln = lines[i]
        if not ln.strip() or ln.strip().startswith("Legend"):
            break
        tok = ln.split()
        label = tok[0]
        if label not in cols:
            raise ParseError(tool, f"unexpected matrix row {label!r} (not in the header)")
        if label in matrix:
            raise ParseError(tool, f"matrix row {label} appears twice")
        cells = tok[1 : 1 + len(cols)]
        rest = tok[1 + len(cols) :]
        if len(cells) < len(cols):
            raise ParseError(
                tool,
                f"matrix row {label} has {len(cells)} of {len(cols)} cells - the paste is cut off in row "
                f"{label}; missing: the rest of {label}"
                + "".join(f", {c}" for c in cols if c not in matrix and c != label)
                + " and anything after the matrix (Legend / NIC Legend)",
            )
        for col, cell in zip(cols, cells, strict=True):
            if not _TOPO_CELL.match(cell):
                raise ParseError(tool, f"row {label}, column {col}: unexpected cell {cell!r}")
        if cells[cols.index(label)] != "X":
            raise ParseError(tool, f"row {label}: diagonal cell is {cells[cols.index(label)]!r}, expected 'X'")
        matrix[label] = {c: v for c, v in zip(cols, cells, strict=True) if c != label}
        if label.startswith("GPU") and aff_cols:
            if len(rest) < len(aff_cols):
                raise ParseError(
                    tool,
                    f"row {label} has {len(rest)} of {len(aff_cols)} affinity values ({', '.join(aff_cols)})",
                )
            vals = dict(zip(aff_cols, rest, strict=False))
            aff: dict = {"cpu_affinity": None, "cpu_ranges": [], "numa_affinity": [], "gpu_numa_id": None}
            try:
                if "CPU Affinity" in vals:
                    aff["cpu_affinity"] = _none_if_na(vals["CPU Affinity"])
                    aff["cpu_ranges"] = parse_cpu_ranges(vals["CPU Affinity"])
                if "NUMA Affinity" in vals:
                    aff["numa_affinity"] = expand_cpu_list(vals["NUMA Affinity"])
            except ValueError as exc:
                raise ParseError(tool, f"row {label}: {exc}") from None
            if "GPU NUMA ID" in vals:
                if not re.match(r"^(N/A|\d+)$", vals["GPU NUMA ID"]):
                    raise ParseError(tool, f"row {label}: GPU NUMA ID {vals['GPU NUMA ID']!r} is cut or malformed")
                aff["gpu_numa_id"] = _int_or_none(vals["GPU NUMA ID"])
            affinity[label] = aff
        i += 1
    missing_rows = [c for c in cols if c not in matrix]
    if missing_rows:
        raise ParseError(tool, f"matrix rows missing (truncated paste?): {', '.join(missing_rows)}")
    for a in cols:
        for b in cols:
            if a != b and matrix[a][b] != matrix[b][a]:
                raise ParseError(
                    tool,
                    f"matrix is not symmetric: {a}/{b}={matrix[a][b]} but {b}/{a}={matrix[b][a]} (misaligned columns?)",
                )
    legend_present = any(ln.strip() == "Legend:" for ln in lines[i:])
    nic_devices: dict[str, str] = {}
    nic_legend_present = False
    for j in range(i, len(lines)):
        if lines[j].strip() == "NIC Legend:":
            nic_legend_present = True
            for ln in lines[j + 1 :]:
                lm = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", ln)
                if lm:
                    nic_devices[lm.group(1)] = lm.group(2)
                elif ln.strip():
                    break
            break
    for c in nics:
        if c.startswith("mlx"):
            nic_devices[c] = c
    if nic_legend_present:
        missing = [c for c in nics if c not in nic_devices]
        if missing:
            raise ParseError(tool, f"NIC Legend is incomplete (truncated paste?); no device for {', '.join(missing)}")
    nvlink = any(v.startswith("NV") for r in matrix.values() for v in r.values())
    widths = [int(v[2:]) for r in matrix.values() for v in r.values() if re.match(r"NV\d+$", v)]
    return {
        "gpus": gpus,
        "nics": nics,
        "nic_devices": nic_devices,
        "matrix": matrix,
        "gpu_affinity": affinity,
        "nvlink": nvlink,
        "nvlink_max_links": max(widths) if widths else 0,
        "legend_present": legend_present,
        "nic_legend_present": nic_legend_present,
    }


# --------------------------------------------------------------------------------------
# ibdev2netdev  (plain and -v)
# --------------------------------------------------------------------------------------

# Fields may be separated by any run of blanks (column -t, TABs), not only the single spaces the tool prints.
_I2N = re.compile(
    r"^\s*(?P<dev>[A-Za-z]\w*)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<netdev>\S+)\s+\((?P<link>Up|Down)\)\s*$"
)
_I2N_V = re.compile(
    r"^\s*(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<dev>[A-Za-z]\w*)\s+"
    r"\((?P<board>[^)]*)\)(?P<desc>.*?)\s+fw\s+(?P<fw>\S+)\s+port\s+(?P<port>\d+)\s+\((?P<pstate>[^)]+)\)\s+"
    r"==>\s+(?P<netdev>\S+)\s+\((?P<link>Up|Down)\)\s*$"
)
_VF_NETDEV = re.compile(r"^(ib|en)\w*?v\d+$")


def _dev_key(name: str):
    m = re.match(r"^(.*?)(\d+)$", name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


def parse_ibdev2netdev(text: str) -> list[dict]:
    """Parse ``ibdev2netdev`` and ``ibdev2netdev -v``.

    Returns one dict per line: ``{device, port, netdev, link, vf}`` (+ ``pci, board, psid, fw,
    port_state`` for ``-v``).  ``link`` is "Up"/"Down".  A paste whose device numbering shows it was
    cut (ibdev2netdev lists devices in lexical order) raises ParseError naming the missing devices.
    """
    tool = "ibdev2netdev"
    out: list[dict] = []
    for n, ln in enumerate(_lines(text), 1):
        if not ln.strip():
            continue
        m = _I2N_V.match(ln) or _I2N.match(ln)
        if m:
            d = m.groupdict()
            e = {
                "device": d["dev"],
                "port": int(d["port"]),
                "netdev": d["netdev"],
                "link": d["link"],
                "vf": bool(_VF_NETDEV.match(d["netdev"])),
            }
            if d.get("pci"):
                board = [p.strip() for p in re.split(r"\s+-\s+", d["board"], maxsplit=1)]
                e.update(
                    {
                        "pci": d["pci"].lower(),
                        "board": board[0],
                        "psid": _none_if_na(board[1]) if len(board) > 1 else None,
                        "description": " ".join(d["desc"].split()) or None,
                        "fw": d["fw"],
                        "port_state": d["pstate"],
                    }
                )
            out.append(e)
            continue
        if "==>" in ln or re.match(r"^\s*(mlx\d+|mlx5_bond)_?\w*\s+port", ln):
            raise ParseError(
                tool,
                f"line {n} is not '<device> port <n> ==> <netdev> (Up|Down)' (the -v form adds PCI address, board,"
                f" firmware and port state before '==>'); a line cut short looks like this: {ln.strip()!r}",
            )
    if not out:
        raise ParseError(tool, "no '<dev> port <n> ==> <netdev> (Up|Down)' lines found")
    _check_lexical_cut(tool, [e["device"] for e in out])
    return out


def _check_lexical_cut(tool: str, names: list[str]) -> None:
    """Detect a paste cut at the start or end.

    ibdev2netdev walks /sys/class/infiniband in lexical order (mlx5_0, mlx5_1, mlx5_10, ... mlx5_2).
    Numbers missing from inside the numbering that would sort *before the first* or *after the last*
    printed device mean lines were lost at the edges of the paste.  Gaps between printed lines are
    real (a device can be absent).
    """
    if names != sorted(names):
        return  # not in lexical order: nothing to infer
    by_prefix: dict[str, list[int]] = {}
    for nm in names:
        p, k = _dev_key(nm)
        if k >= 0:
            by_prefix.setdefault(p, []).append(k)
    lost = []
    for p, nums in by_prefix.items():
        lo, hi = min(nums), max(nums)
        present = set(nums)
        for k in range(lo + 1, hi):
            if k in present:
                continue
            cand = f"{p}{k}"
            if cand < names[0] or cand > names[-1]:
                lost.append(cand)
    if lost:
        lost.sort(key=_dev_key)
        raise ParseError(
            tool,
            f"paste looks truncated: it starts at {names[0]} / ends at {names[-1]} but the lexical listing "
            f"must also contain {', '.join(lost)} (missing lines)",
        )


# --------------------------------------------------------------------------------------
# ibstat
# --------------------------------------------------------------------------------------

_IBSTAT_PORT_REQUIRED = ("state", "physical_state", "rate", "link_layer")
_IBSTAT_CA_REQUIRED = ("ca_type", "number_of_ports", "firmware_version")


def parse_ibstat(text: str) -> list[dict]:
    """Parse ``ibstat``: one dict per CA ``{ca, ca_type, number_of_ports, firmware_version,
    hardware_version, node_guid, system_image_guid, ports: [{port, state, physical_state, rate,
    base_lid, lmc, sm_lid, capability_mask, port_guid, link_layer}]}``."""
    tool = "ibstat"
    cas: list[dict] = []
    port = None
    for n, ln in enumerate(_lines(text), 1):
        if not ln.strip():
            continue
        cm = re.match(r"^\s*CA '([^']+)'\s*$", ln)
        if cm:
            cas.append({"ca": cm.group(1), "ports": []})
            port = None
            continue
        if not cas:
            continue  # prompt / command line before the first CA
        pm = re.match(r"^\s*Port (\d+):\s*$", ln)
        if pm:
            port = {"port": int(pm.group(1))}
            cas[-1]["ports"].append(port)
            continue
        kv = re.match(r"^\s*([A-Za-z][A-Za-z ]*?):\s*(.*?)\s*$", ln)
        if not kv:
            raise ParseError(tool, f"line {n} not understood (cut paste?): {ln.strip()!r}")
        key = _snake(kv.group(1))
        val = kv.group(2)
        if key in ("number_of_ports", "rate", "base_lid", "lmc", "sm_lid"):
            val = _int_or_none(val) if val != "" else None
        (port if port is not None else cas[-1])[key] = val
    if not cas:
        raise ParseError(tool, "no \"CA '<name>'\" block found")
    for ca in cas:
        miss = [k for k in _IBSTAT_CA_REQUIRED if ca.get(k) in (None, "")]
        if miss:
            raise ParseError(tool, f"CA {ca['ca']}: missing {', '.join(miss)} (truncated paste?)")
        if len(ca["ports"]) != ca["number_of_ports"]:
            raise ParseError(
                tool,
                f"CA {ca['ca']}: 'Number of ports: {ca['number_of_ports']}' but "
                f"{len(ca['ports'])} port blocks "
                "(truncated paste?)",
            )
        for p in ca["ports"]:
            miss = [k for k in _IBSTAT_PORT_REQUIRED if p.get(k) in (None, "")]
            if miss:
                raise ParseError(tool, f"CA {ca['ca']} port {p['port']}: missing {', '.join(miss)} (truncated paste?)")
    return cas


# --------------------------------------------------------------------------------------
# ibv_devinfo
# --------------------------------------------------------------------------------------


def parse_ibv_devinfo(text: str) -> list[dict]:
    """Parse ``ibv_devinfo`` (and -v key lines): one dict per HCA ``{hca_id, transport, fw_ver,
    node_guid, sys_image_guid, vendor_id, vendor_part_id, hw_ver, board_id, phys_port_cnt,
    ports: [{port, state, max_mtu, active_mtu, sm_lid, port_lid, port_lmc, link_layer}]}``.
    ``state`` is e.g. "PORT_ACTIVE"; MTUs are ints (bytes)."""
    tool = "ibv_devinfo"
    hcas: list[dict] = []
    port = None
    for n, ln in enumerate(_lines(text), 1):
        if not ln.strip():
            continue
        hm = re.match(r"^\s*hca_id:\s*(\S+)\s*$", ln)
        if hm:
            hcas.append({"hca_id": hm.group(1), "ports": []})
            port = None
            continue
        if not hcas:
            continue
        pm = re.match(r"^\s*port:\s*(\d+)\s*$", ln)
        if pm:
            port = {"port": int(pm.group(1))}
            hcas[-1]["ports"].append(port)
            continue
        kv = re.match(r"^\s*([A-Za-z_][\w\[\] ]*?):\s*(.*?)\s*$", ln)
        if not kv:
            if port is not None:
                continue  # continuation lines of -v (e.g. GID lists)
            raise ParseError(tool, f"line {n} not understood (cut paste?): {ln.strip()!r}")
        key, val = kv.group(1).strip(), kv.group(2)
        if key in ("state", "phys_state"):
            val = re.sub(r"\s*\(\d+\)$", "", val)
        elif key in ("max_mtu", "active_mtu", "phys_port_cnt", "sm_lid", "port_lid", "vendor_part_id"):
            val = _int_or_none(re.sub(r"\s*\(\d+\)$", "", val))
        elif key == "transport":
            val = re.sub(r"\s*\(\d+\)$", "", val)
        (port if port is not None else hcas[-1])[key] = val
    if not hcas:
        raise ParseError(tool, "no 'hca_id:' block found")
    for h in hcas:
        miss = [k for k in ("fw_ver", "phys_port_cnt") if h.get(k) in (None, "")]
        if miss:
            raise ParseError(tool, f"hca {h['hca_id']}: missing {', '.join(miss)} (truncated paste?)")
        if len(h["ports"]) != h["phys_port_cnt"]:
            raise ParseError(
                tool,
                f"hca {h['hca_id']}: phys_port_cnt {h['phys_port_cnt']} but {len(h['ports'])} port blocks "
                "(truncated paste?)",
            )
        for p in h["ports"]:
            miss = [k for k in ("state", "active_mtu", "link_layer") if p.get(k) in (None, "")]
            if miss:
                raise ParseError(tool, f"hca {h['hca_id']} port {p['port']}: missing {', '.join(miss)}")
    return hcas


# --------------------------------------------------------------------------------------
# mlxconfig q
# --------------------------------------------------------------------------------------

_MLX_ATTR = re.compile(r"^\s*(Device type|Name|Description|Device|PCI device):\s*(.*?)\s*$")
_MLX_CFG = re.compile(r"^\s*(\*\s*)?([A-Z][A-Z0-9_]*(?:\[\d+(?:\.\.\d+)?\])?)(?:\s+(.*?))?\s*$")


def split_mlxconfig_value(raw: str):
    """'ETH(2)' -> ('ETH', 2); 'True(1)' -> ('True', 1); '8' -> (None, 8); 'foo' -> ('foo', None)."""
    v = raw.strip()
    m = re.match(r"^(.*?)\((-?\d+)\)$", v)
    if m:
        return m.group(1), int(m.group(2))
    if re.match(r"^-?\d+$", v):
        return None, int(v)
    if re.match(r"^0x[0-9a-fA-F]+$", v):
        return None, int(v, 16)
    return v, None


def parse_mlxconfig_query(text: str) -> list[dict]:
    """Parse ``mlxconfig [-d dev] q`` (full or grep-filtered, also aggregated by pdsh/cmsh).

    Returns one dict per device: ``{host, device, device_type, name, description, config:
    {KEY: raw_next_boot}, config_all: {KEY: {default, current, next_boot}} (when -e), sriov_en,
    num_of_vfs, link_types: {"P1": "ETH"}}``.  A grep-filtered dump without device headers is split
    into devices where a key repeats.
    """
    tool = "mlxconfig"
    devs: list[dict] = []
    host = None
    in_cfg = False
    cur = None

    def new_dev():
        d = {
            "host": host,
            "device": None,
            "device_type": None,
            "name": None,
            "description": None,
            "config": {},
        }
        devs.append(d)
        return d

    for n, ln in enumerate(_lines(text), 1):
        s = ln.strip()
        if not s or set(s) <= {"-"}:
            continue
        hm = re.match(r"^\[([^\]\s]+)\]$", s)
        if hm:
            host = hm.group(1)
            cur = None
            in_cfg = False
            continue
        if re.match(r"^Device #\d+:$", s):
            cur = new_dev()
            in_cfg = False
            continue
        if s.startswith("Configurations:"):
            if cur is None:
                cur = new_dev()
            in_cfg = True
            continue
        am = _MLX_ATTR.match(ln)
        if am:
            key = {"Device type": "device_type", "PCI device": "device"}.get(am.group(1), _snake(am.group(1)))
            if cur is None or (cur.get(key) is not None and key == "device_type"):
                cur = new_dev()
                in_cfg = False
            cur[key] = am.group(2) or None
            continue
        if ln[:1] in ("[", "$", "#") or "mlxconfig " in ln or s.startswith(("mst ", "for ", "sudo ")):
            continue  # prompt / command line
        cm = _MLX_CFG.match(ln)
        if cm and (in_cfg or "_" in cm.group(2)):
            key = cm.group(2)
            vals = (cm.group(3) or "").split()
            if not vals:
                raise ParseError(tool, f"line {n}: configuration {key} has no value (cut paste?)")
            if cur is None or key in cur["config"]:
                cur = new_dev()  # grep-filtered dumps: a repeated key starts the next device
            cur["config"][key] = vals[-1]
            if len(vals) == 3:
                cur.setdefault("config_all", {})[key] = dict(
                    zip(("default", "current", "next_boot"), vals, strict=True)
                )
            continue
        raise ParseError(tool, f"line {n} not understood: {s!r}")
    devs = [d for d in devs if d["config"] or d["device"] or d["device_type"]]
    if not devs:
        raise ParseError(tool, "no device configuration found")
    for d in devs:
        if not d["config"]:
            raise ParseError(tool, f"device {d['device'] or d['name']}: no configuration values (truncated paste?)")
        cfg = d["config"]
        d["sriov_en"] = None
        if "SRIOV_EN" in cfg:
            label, code = split_mlxconfig_value(cfg["SRIOV_EN"])
            d["sriov_en"] = bool(code) if code is not None else (label or "").lower() == "true"
        d["num_of_vfs"] = split_mlxconfig_value(cfg["NUM_OF_VFS"])[1] if "NUM_OF_VFS" in cfg else None
        d["link_types"] = {}
        for k, v in cfg.items():
            lm = re.match(r"^LINK_TYPE_P(\d+)$", k)
            if lm:
                d["link_types"][f"P{lm.group(1)}"] = split_mlxconfig_value(v)[0]
    return devs
