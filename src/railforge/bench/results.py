"""Read a directory of benchmark outputs into :class:`~railforge.bench.judge.Results`.

Each regular file is recognised by its content (nccl-tests header, perftest title, dcgmi diag table,
railforge-resnet50 lines, the CPU fallback's allreduce lines); other files are listed as skipped. perftest and
dcgmi output do not name the host, so the node is the first folder under the directory
(``DIR/dgx-03/ib_write_bw-mlx5_4.txt``) or, for a file directly in it, the file name without its suffix. An
nccl-tests output that does not name its binary takes it from the file name (``all_reduce_perf-8x2.txt``). The
allreduce ranks name their pods; ``nodes`` maps them to nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from railforge.bench.dcgm import HEADER as DCGM_HEADER
from railforge.bench.dcgm import parse_dcgmi_diag
from railforge.bench.judge import Results
from railforge.bench.mpi import is_mpi_allreduce, parse_mpi_allreduce
from railforge.bench.nccl import COLLECTIVE, parse_nccl_tests
from railforge.bench.nccl import HEADER as NCCL_HEADER
from railforge.bench.perftest import TITLE as PERFTEST_TITLE
from railforge.bench.perftest import parse_perftest
from railforge.bench.resnet import PREFIX as RESNET_PREFIX
from railforge.bench.resnet import parse_resnet


def _kind(text: str) -> str:
    if RESNET_PREFIX in text:
        return "resnet"
    if NCCL_HEADER.search(text):
        return "nccl"
    if is_mpi_allreduce(text):
        return "mpi"
    lines = text.splitlines()
    if any(PERFTEST_TITLE.match(ln) for ln in lines):
        return "perftest"
    if any(DCGM_HEADER.match(ln) for ln in lines):
        return "dcgm"
    return ""


def load_results(directory: Path, nodes: Mapping[str, str] | None = None) -> tuple[Results, list[Path]]:
    """Parse every recognised file under ``directory``; also return the files that were not recognised."""
    nccl, perftest, dcgm, resnet, mpi, skipped = [], [], [], [], [], []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        relative = path.relative_to(directory)
        node = relative.parts[0] if len(relative.parts) > 1 else path.stem
        source = str(path)
        match _kind(text):
            case "nccl":
                named = COLLECTIVE.search(path.name)
                nccl.append(parse_nccl_tests(text, source, collective=named["name"] if named else None))
            case "perftest":
                perftest.append((node, parse_perftest(text, source)))
            case "dcgm":
                dcgm.append((node, parse_dcgmi_diag(text, source)))
            case "resnet":
                resnet.append(parse_resnet(text, source, nodes))
            case "mpi":
                mpi.append(parse_mpi_allreduce(text, source, nodes))
            case _:
                skipped.append(path)
    return Results(tuple(nccl), tuple(perftest), tuple(dcgm), tuple(resnet), tuple(mpi)), skipped
