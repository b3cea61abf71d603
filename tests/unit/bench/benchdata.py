"""Real benchmark outputs of tests/fixtures/realdata/bench (the 4 header lines stripped)."""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "fixtures" / "realdata" / "bench"


def read_body(rel: str) -> str:
    lines = (BENCH / rel).read_text().splitlines(keepends=True)
    assert lines[3].startswith("# ---"), rel
    return "".join(lines[4:])


def fixture_names(tool: str) -> list[str]:
    return sorted(f"{tool}/{p.name}" for p in (BENCH / tool).glob("*.txt"))


def prefixes(text: str, limit: int = 120):
    """Cuts of ``text`` at about ``limit`` offsets, as a paste cut anywhere would be."""
    step = max(1, len(text) // limit)
    return (text[:cut] for cut in range(0, len(text), step))
