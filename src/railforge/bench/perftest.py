"""perftest client output: ``ib_write_bw`` / ``ib_read_bw`` (and ``ib_send_bw``) and ``ib_write_lat`` /
``ib_read_lat`` (and ``ib_send_lat``).

Read: the command line when the log has it (a paste's prompt line, before the title), the test title (``RDMA_Write
BW Test``), the parameter block (``Device``, ``Link type``, ``Mtu`` ...), the ``--use_cuda`` lines (GPU name,
``using DMA-BUF for GPU buffer``) and the results table. Bandwidth is kept as
printed and in Gb/s: perftest's ``MB/sec`` (without ``--report_gbits``; ``MiB/sec`` in later releases, which
name the unit they always meant) is 2^20 bytes per second, its ``Gb/sec``
10^9 bits per second. Lines between the table header and the rows (CPU frequency warnings) are skipped.
An output without its closing dashes line parses; ``missing`` says so. A row cut short raises ParseError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from railforge.bench.errors import ParseError

TITLE = re.compile(r"^\s*(?P<verb>RDMA_Write|RDMA_Read|Send|Atomic\w*)\b(?P<extra>.*?)\b(?P<kind>BW|Latency) Test\s*$")
TOOLS = {"RDMA_Write": "ib_write", "RDMA_Read": "ib_read", "Send": "ib_send"}
PARAMETER = re.compile(r"([A-Za-z][^:\t]*?)\s*:\s*(\S+)")
DASHES = re.compile(r"^-{20,}\s*$")
BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>Gb|MB|MiB)/sec\]\s+BW average\[(?:Gb|MB|MiB)/sec\]")
LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]")
LAT_COLUMNS = re.compile(r"t_min|t_max|t_typical|t_avg|t_stdev|99\.9% percentile|99% percentile")
ROW = re.compile(r"^\s*\d+\s+\d+\s")
CUDA_GPU = re.compile(r"device name = \[(?P<name>[^\]]+)\]")
CUDA_PICK = re.compile(r"^Picking device No\. (\d+)")
COMMAND = re.compile(r"(?:^|\s)ib_(?:write|read|send)_(?:bw|lat)\s+(?P<arguments>.*)$")
MIB_PER_S_TO_GBPS = 2**20 * 8 / 1e9


@dataclass(frozen=True)
class BandwidthRow:
    size_bytes: int
    iterations: int
    peak: float  # in the printed unit
    average: float
    msg_rate_mpps: float
    unit: str  # "Gb/sec" | "MB/sec" | "MiB/sec"

    @property
    def average_gbps(self) -> float:
        return self.average if self.unit == "Gb/sec" else self.average * MIB_PER_S_TO_GBPS

    @property
    def peak_gbps(self) -> float:
        return self.peak if self.unit == "Gb/sec" else self.peak * MIB_PER_S_TO_GBPS


@dataclass(frozen=True)
class LatencyRow:
    size_bytes: int
    iterations: int
    usec: dict[str, float]  # t_min, t_max, t_typical, t_avg, t_stdev, "99% percentile", "99.9% percentile"


@dataclass(frozen=True)
class PerftestRun:
    source: str
    tool: str  # ib_write_bw, ib_read_lat ...
    title: str
    parameters: dict[str, str]
    bandwidth: tuple[BandwidthRow, ...] = ()
    latency: tuple[LatencyRow, ...] = ()
    cuda_device: int | None = None  # --use_cuda: the GPU the buffer lives on
    cuda_gpu: str | None = None
    dma_buf: bool = False
    missing: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()  # of the command line, when the log has it

    @property
    def asked_dma_buf(self) -> bool:
        """The command asked for GPU buffers through DMA-BUF (perftest's --use_cuda_dmabuf)."""
        return "--use_cuda_dmabuf" in self.arguments

    @property
    def device(self) -> str:
        """The HCA (``mlx5_0``): the rail this run measured."""
        return self.parameters.get("Device", "")

    @property
    def gpu_memory(self) -> bool:
        return self.cuda_device is not None or self.cuda_gpu is not None or self.dma_buf


def _parameters(line: str) -> dict[str, str]:
    return {k.strip(): v for k, v in PARAMETER.findall(line)}


def parse_perftest(text: str, source: str = "") -> PerftestRun:
    lines = text.splitlines()
    found = next(((i, match) for i, ln in enumerate(lines) if (match := TITLE.match(ln))), None)
    if found is None:
        raise ParseError(source, None, "a perftest title line such as 'RDMA_Write BW Test'")
    title_at, title = found
    commands = [match for line in lines[:title_at] if (match := COMMAND.search(line))]
    arguments = tuple(commands[-1]["arguments"].split()) if commands else ()
    tool = f"{TOOLS.get(title['verb'], title['verb'].lower())}_{'bw' if title['kind'] == 'BW' else 'lat'}"

    cuda_device = cuda_gpu = None
    dma_buf = False
    for line in lines:
        if match := CUDA_PICK.match(line):
            cuda_device = int(match[1])
        elif match := CUDA_GPU.search(line):
            cuda_gpu = match["name"]
        elif line.startswith("using DMA-BUF for GPU buffer"):
            dma_buf = True

    parameters: dict[str, str] = {}
    index = title_at + 1
    while index < len(lines) and not DASHES.match(lines[index]):
        parameters.update(_parameters(lines[index]))
        index += 1

    header_at = next(
        (i for i in range(index, len(lines)) if BW_HEADER.search(lines[i]) or LAT_HEADER.search(lines[i])), None
    )
    if header_at is None:
        raise ParseError(source, None, "the results header ' #bytes  #iterations  BW peak[...]' or '... t_min[usec]'")
    header = lines[header_at]
    bw = BW_HEADER.search(header)
    columns = 5 if bw else 2 + len(LAT_COLUMNS.findall(header))
    bandwidth, latency, closed = [], [], False
    for lineno, line in enumerate(lines[header_at + 1 :], header_at + 2):
        if DASHES.match(line):
            closed = True
            break
        if not ROW.match(line):
            continue
        tokens = line.split()
        if len(tokens) != columns:
            raise ParseError(source, lineno, f"a results row of {columns} columns under {header.strip()!r}", line)
        try:
            size, iterations = int(tokens[0]), int(tokens[1])
            values = [float(t) for t in tokens[2:]]
        except ValueError:
            raise ParseError(source, lineno, "numbers in a results row", line) from None
        if bw:
            peak, average, msg_rate = values
            bandwidth.append(BandwidthRow(size, iterations, peak, average, msg_rate, unit=f"{bw['unit']}/sec"))
        else:
            latency.append(LatencyRow(size, iterations, dict(zip(LAT_COLUMNS.findall(header), values, strict=True))))
    if not bandwidth and not latency:
        raise ParseError(source, header_at + 1, "at least one results row after the header")
    return PerftestRun(
        source=source,
        tool=tool,
        title=lines[title_at].strip(),
        parameters=parameters,
        bandwidth=tuple(bandwidth),
        latency=tuple(latency),
        cuda_device=cuda_device,
        cuda_gpu=cuda_gpu,
        dma_buf=dma_buf,
        arguments=arguments,
        missing=() if closed else ("the dashes line that closes the results (cut paste or killed run)",),
    )
