"""``dcgmi diag -r N`` result table.

The table has section rows (``|-----  Metadata  ----+---|``, ``+-----  Hardware  ----+---+``), metadata rows
(``DCGM Version``), one row per test (``| GPU Memory | Fail - All |``) and ``Info`` / ``Warning`` rows whose text
DCGM wraps at a fixed width over continuation rows (``|   | ...ze CUDA library ... |``, cut mid-word). The
wrapped text is joined back. Results read as a status (Pass, Fail, Skip, Warn) and the GPUs it covers
(``All``, ``GPU: 0``, ``GPUs: 1, 2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from railforge.bench.errors import ParseError

HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|")
SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][\w ]*?)\s+-+\+")
BORDER = re.compile(r"^\+[-=+]+\+\s*$")
RESULT = re.compile(r"^(?P<status>Pass|Fail|Skip|Warn)\b(?:\s*-\s*(?P<scope>.+))?$")
NOTE_ROWS = {"Info": "info", "Warning": "warnings"}  # row name -> DiagTest field
NOTES = tuple(NOTE_ROWS.values())
METADATA = "Metadata"


@dataclass(frozen=True)
class DiagTest:
    section: str  # Deployment, Integration, Hardware, Stress
    name: str
    status: str  # Pass | Fail | Skip | Warn
    scope: str  # "All", "GPU: 0", "GPUs: 1, 2" or "" when DCGM names none
    info: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DcgmDiag:
    source: str
    metadata: dict[str, str]
    tests: tuple[DiagTest, ...]
    missing: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[DiagTest, ...]:
        return tuple(t for t in self.tests if t.status == "Fail")


def _cells(line: str, source: str, lineno: int) -> tuple[str, str]:
    parts = line.rstrip().split("|")
    if len(parts) < 4 or parts[0] or parts[-1]:
        raise ParseError(source, lineno, "a table row '| name | result |'", line)
    value = "|".join(parts[2:-1])
    # DCGM pads a result cell as ' ' + text + '  ' and wraps the text at a fixed width, mid-word: keep the
    # text's own spaces, which tell a word break from a wrap
    return parts[1].strip(), value[1:-2] if len(value) > 3 else value.strip()


def parse_dcgmi_diag(text: str, source: str = "") -> DcgmDiag:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if HEADER.match(ln)), None)
    if start is None:
        raise ParseError(source, None, "dcgmi diag's table header '| Diagnostic | Result |'")
    metadata: dict[str, str] = {}
    tests: list[dict] = []
    section, last_note, closed = "", None, False
    for lineno, line in enumerate(lines[start + 1 :], start + 2):
        if match := SECTION.match(line):
            section = match["name"]
            continue
        if BORDER.match(line):
            if tests or metadata:
                closed = True
                break
            continue
        name, value = _cells(line, source, lineno)
        if not name:  # continuation of the cell above
            if last_note is None:
                raise ParseError(source, lineno, "a named row before a continuation row", line)
            last_note[-1] += value
            continue
        if section == METADATA:
            metadata[name] = value.strip()
            last_note = None
        elif name in NOTE_ROWS:
            if not tests:
                raise ParseError(source, lineno, f"a test row before its {name} row", line)
            last_note = tests[-1][NOTE_ROWS[name]]
            last_note.append(value)
        else:
            result = RESULT.match(value.strip())
            if not result:
                raise ParseError(source, lineno, "a result 'Pass', 'Fail - All', 'Skip - GPU: 0' ...", value.strip())
            scope = result["scope"] or ""
            tests.append({"section": section, "name": name, "status": result["status"], "scope": scope})
            tests[-1].update({key: [] for key in NOTES})
            last_note = None
    if not tests:
        raise ParseError(source, None, "at least one test row in the dcgmi diag table")
    return DcgmDiag(
        source=source,
        metadata=metadata,
        tests=tuple(
            DiagTest(
                t["section"],
                t["name"],
                t["status"],
                t["scope"],
                info=tuple(" ".join(note.split()) for note in t["info"]),
                warnings=tuple(" ".join(note.split()) for note in t["warnings"]),
            )
            for t in tests
        ),
        missing=() if closed else ("the table's closing border line (cut paste)",),
    )
