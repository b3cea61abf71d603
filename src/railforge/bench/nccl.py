"""nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``gather_perf`` ... one format for all binaries).

Read: the ``# nThread`` header, the ``# Rank`` lines (ranks, hosts, GPUs), the results table (one row per
message size, out-of-place and in-place time / algbw / busbw / #wrong), ``# Out of bounds values`` and
``# Avg bus bandwidth``; and from ``NCCL_DEBUG=INFO`` lines and the command line: the network NCCL chose
(``Using network IB`` / ``Socket``), the HCAs (``NET/IB : Using [0]mlx5_0:1/IB``) and the path of each channel
(``via NET/IB/0/GDRDMA``, ``NET/Socket/0``, ``P2P/IPC``, ``SHM/direct/direct``, ``NVLS``).

Older releases print, instead of the ``#wrong`` count, each row's largest error (``error``, or ``res`` in the
earliest ones, whose header and summary lines also lack the ``#`` and whose time is in ms); their rows give
``wrong`` None (the ``Out of bounds values`` line still counts the bad values) and ``time_us`` in µs.

Lines may carry a launcher prefix (Slurm ``srun --label`` prints `` 0: ``); it is taken from the header line and
removed from every line. A paste cut before the summary parses: ``missing`` says what is absent. A results row
cut short, or no header / no table, raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeVar

from railforge.bench.errors import ParseError

HEADER = re.compile(
    r"(?P<hash>#\s*)?nThread (?P<threads>\d+) nGpus (?P<gpus>\d+) minBytes (?P<min>\d+) maxBytes (?P<max>\d+)"
    r" step: (?P<step>\d+)\((?P<step_kind>factor|bytes)\).*?validation: (?P<validation>\d+)"
)
RANK = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)(?:\s+Group\s+\d+)?(?:\s+Pid\s+\d+)?\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]+)\]\s+(?P<gpu>.+?)\s*$"
)
REDUCED_MAX = re.compile(r"^# Reducing maxBytes to (\d+)")
COLLECTIVE = re.compile(r"\b(?P<name>[a-z_]+)_perf(?:_mpi)?\b")
ENV_SETTING = re.compile(r"\b(NCCL_[A-Z0-9_]+)=(\S+)")
ENV_INFO = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to ([^\s.]+)")
NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
NET_DEVICES = re.compile(r"NCCL INFO NET/(?P<net>\w+) ?: Using (?P<list>(?:\[\d+\]\S+\s*)+)")
NET_DEVICE = re.compile(r"\[\d+\](?P<name>[^:\s]+):(?P<port>\d+)/(?P<link>\w+)")
CHANNEL = re.compile(
    r"NCCL INFO Channel (?P<channel>\d+)/\d+ : (?P<src>\d+)\[[^\]]*\] -> (?P<dst>\d+)\[[^\]]*\]"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<path>\S+)"
)
NVLS_CHANNELS = re.compile(r"NCCL INFO .*?(\d+) nvls channels")
NO_IB_DEVICE = re.compile(r"NCCL INFO NET/IB ?: No device found")
VERSION = re.compile(r"^NCCL version (\S+)")
VERSION_INFO = re.compile(r"NCCL INFO NCCL version (\S+)")
OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values : (\d+) (\w+)")
AVG_BUSBW = re.compile(r"^#?\s*Avg bus bandwidth\s*: ([\d.]+)")
ROW_START = re.compile(r"^\s+\d+\s+\d+\s+\w+\s")
CHECK_COLUMN = re.compile(r"^#.*\bbusbw\s+(#wrong|error|res)\b")  # the column header names the 4th of each half
_Number = TypeVar("_Number", int, float)


@dataclass(frozen=True)
class Rank:
    rank: int
    host: str
    device: int
    bus_id: str
    gpu: str


@dataclass(frozen=True)
class Measure:
    """One half of a row: out-of-place or in-place."""

    time_us: float
    algbw_gbps: float  # GB/s, as nccl-tests prints
    busbw_gbps: float
    wrong: int | None  # None where validation is off ("N/A"), and in older releases (an error, not a count)


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    out_of_place: Measure
    in_place: Measure


@dataclass(frozen=True)
class ChannelPath:
    channel: int
    src_rank: int
    dst_rank: int
    direction: str  # send | receive | "" (older NCCL prints no direction)
    path: str  # as printed after "via": NET/IB/0/GDRDMA, P2P/IPC, SHM/direct/direct, NVLS ...

    @property
    def transport(self) -> str:
        """ib | socket | net (another plugin) | p2p | shm | nvls | collnet | other."""
        head, _, rest = self.path.partition("/")
        if head == "NET":
            net = rest.split("/", 1)[0]
            return "ib" if net.startswith("IB") else "socket" if net == "Socket" else "net"
        return {"P2P": "p2p", "SHM": "shm", "NVLS": "nvls", "CollNet": "collnet"}.get(head, "other")

    @property
    def gdrdma(self) -> bool:
        return "/GDRDMA" in self.path


@dataclass(frozen=True)
class NetDevice:
    name: str
    port: int
    link: str  # IB | RoCE


@dataclass(frozen=True)
class NcclRun:
    source: str
    collective: str | None  # "all_reduce"; None when neither the output nor the caller names it
    threads: int
    gpus_per_process: int
    min_bytes: int
    max_bytes: int  # after "# Reducing maxBytes", when printed
    validation: bool
    ranks: tuple[Rank, ...]
    rows: tuple[Row, ...]
    out_of_bounds: int | None
    avg_busbw_gbps: float | None
    nccl_version: str | None
    network: str | None  # "IB", "IBext_v8", "Socket" from "Using network"
    net_devices: tuple[NetDevice, ...]
    channels: tuple[ChannelPath, ...]
    nvls_channels: int | None
    ib_device_missing: bool  # "NET/IB : No device found."
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* from the command line / "set by environment"
    missing: tuple[str, ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def label(self) -> str:
        """``all_reduce 8x2`` (GPUs per node x nodes), as verdicts name a run."""
        name = self.collective or "nccl-tests"
        nodes = len(self.hosts) or 1
        per_node, rest = divmod(len(self.ranks), nodes)
        shape = f"{per_node}x{nodes}" if not rest else f"{len(self.ranks)} ranks on {nodes} nodes"
        return f"{name} {shape}"

    @property
    def transports(self) -> tuple[str, ...]:
        """The channel paths' transports, with ``nvls`` where NCCL set up NVLink SHARP channels."""
        return tuple(sorted({c.transport for c in self.channels} | ({"nvls"} if self.nvls_channels else set())))

    @property
    def socket_fallback(self) -> str:
        """Why this run's inter-node traffic went over sockets; "" when nothing says so."""
        reasons = (
            ("NCCL chose network Socket", self.network == "Socket"),
            ("channels connect via NET/Socket", any(c.transport == "socket" for c in self.channels)),
            ("NCCL_IB_DISABLE=1 is set", self.env.get("NCCL_IB_DISABLE") == "1"),
            ("NCCL found no RDMA device (NET/IB : No device found)", self.ib_device_missing and not self.uses_rdma),
        )
        return "; ".join(reason for reason, holds in reasons if holds)

    @property
    def uses_rdma(self) -> bool:
        return any(c.transport == "ib" for c in self.channels) or (self.network or "").startswith("IB")


def _strip_prefix(lines: list[str]) -> list[str]:
    """Remove the launcher prefix that the header line carries (e.g. ' 0: ') from every line that has it."""
    for line in lines:
        if header := HEADER.search(line):
            prefix = line[: header.start()]
            if re.fullmatch(r"\s*\d+:\s*", prefix):
                return ["" if ln == prefix.rstrip() else ln.removeprefix(prefix) for ln in lines]
            return lines
    return lines


def _row(line: str, source: str, lineno: int, check: str, time_unit: str) -> Row:
    """One results row; ``check`` is its column of each half (#wrong, error or res), ``time_unit`` us or ms."""
    columns = f"size count type redop [root] time({time_unit}) algbw busbw {check} (twice: out-of-place, in-place)"

    def number(token: str, kind: type[_Number]) -> _Number:
        try:
            return kind(token)
        except ValueError:
            raise ParseError(source, lineno, f"a number in a results row ({columns})", token) from None

    def number_or_na(token: str, kind: type[_Number]) -> _Number | None:  # "N/A": #wrong with validation off
        return None if token == "N/A" else number(token, kind)

    tokens = line.split()
    if len(tokens) not in (12, 13):
        raise ParseError(source, lineno, f"a results row of 12 or 13 columns ({columns})", line.strip())
    root = number_or_na(tokens[4], int) if len(tokens) == 13 else None
    half = tokens[-8:]

    def measure(cols: list[str]) -> Measure:
        time, algbw, busbw = (number(c, float) for c in cols[:3])
        if time_unit == "ms":
            time *= 1000
        if check == "#wrong":
            return Measure(time, algbw, busbw, number_or_na(cols[3], int))
        number_or_na(cols[3], float)  # the row's largest error: read as a number, counted by "Out of bounds values"
        return Measure(time, algbw, busbw, None)

    return Row(
        size_bytes=number(tokens[0], int),
        count=number(tokens[1], int),
        dtype=tokens[2],
        redop=tokens[3],
        root=root,
        out_of_place=measure(half[:4]),
        in_place=measure(half[4:]),
    )


def _rows_missing(rows: list[Row], header: re.Match, max_bytes: int) -> str:
    """What the size sweep still owed when the rows stop ("" when it reached maxBytes)."""
    last = rows[-1].size_bytes
    step = int(header["step"])
    following = last * step if header["step_kind"] == "factor" else last + step
    if following <= max_bytes and following != last:
        return f"result rows after {last} B (the sweep runs to {max_bytes} B)"
    return ""


def parse_nccl_tests(text: str, source: str = "", collective: str | None = None) -> NcclRun:
    """Parse one nccl-tests output. ``collective`` names the binary where the output does not."""
    lines = _strip_prefix(text.splitlines())
    header, header_line = None, 0
    for lineno, line in enumerate(lines, 1):
        header = HEADER.search(line)
        if header:
            header_line = lineno
            break
    if header is None:
        raise ParseError(source, None, "an nccl-tests header line '# nThread N nGpus N minBytes ... maxBytes ...'")
    named = COLLECTIVE.search("\n".join(lines[: header_line - 1]))
    collective = named["name"] if named else collective

    max_bytes = int(header["max"])
    ranks, rows, channels = [], [], []
    env: dict[str, str] = {}
    devices: list[NetDevice] = []
    network = nccl_version = avg = out_of_bounds = nvls = None
    ib_device_missing = False
    earliest = header["hash"] is None  # the earliest releases: time in ms, a "res" column
    time_unit, check = ("ms", "res") if earliest else ("us", "#wrong")
    for line in lines[: header_line - 1]:
        env.update(ENV_SETTING.findall(line))
    for lineno, line in enumerate(lines[header_line:], header_line + 1):
        if match := RANK.match(line):
            ranks.append(
                Rank(int(match["rank"]), match["host"], int(match["device"]), match["bus"], match["gpu"].strip())
            )
        elif match := REDUCED_MAX.match(line):
            max_bytes = int(match[1])
        elif ROW_START.match(line):
            rows.append(_row(line, source, lineno, check, time_unit))
        elif match := CHECK_COLUMN.match(line):
            check = match[1]
        elif match := OUT_OF_BOUNDS.match(line):
            out_of_bounds = int(match[1])
        elif match := AVG_BUSBW.match(line):
            avg = float(match[1])
        elif match := VERSION.match(line):
            nccl_version = match[1]
        elif "NCCL INFO" in line:
            if match := CHANNEL.search(line):
                channels.append(
                    ChannelPath(
                        int(match["channel"]), int(match["src"]), int(match["dst"]), match["dir"] or "", match["path"]
                    )
                )
            elif match := NETWORK.search(line):
                network = match[1]
            elif match := NET_DEVICES.search(line):
                devices.extend(
                    NetDevice(d["name"], int(d["port"]), d["link"]) for d in NET_DEVICE.finditer(match["list"])
                )
            elif match := NVLS_CHANNELS.search(line):
                nvls = max(nvls or 0, int(match[1]))
            elif match := ENV_INFO.search(line):
                env[match[1]] = match[2]
            elif match := VERSION_INFO.search(line):
                nccl_version = nccl_version or match[1]
            elif NO_IB_DEVICE.search(line):
                ib_device_missing = True
    if not rows:
        raise ParseError(source, None, "result rows after the '#  size  count  type ...' column header")
    missing = [
        what
        for what, absent in (
            (_rows_missing(rows, header, max_bytes), True),
            ("the 'Out of bounds values' line", out_of_bounds is None),
            ("the 'Avg bus bandwidth' line", avg is None),
        )
        if what and absent
    ]
    return NcclRun(
        source=source,
        collective=collective,
        threads=int(header["threads"]),
        gpus_per_process=int(header["gpus"]),
        min_bytes=int(header["min"]),
        max_bytes=max_bytes,
        validation=header["validation"] == "1",
        ranks=tuple(ranks),
        rows=tuple(rows),
        out_of_bounds=out_of_bounds,
        avg_busbw_gbps=avg,
        nccl_version=nccl_version,
        network=network,
        net_devices=tuple(dict.fromkeys(devices)),
        channels=tuple(dict.fromkeys(channels)),
        nvls_channels=nvls,
        ib_device_missing=ib_device_missing,
        env=env,
        missing=tuple(missing),
    )
