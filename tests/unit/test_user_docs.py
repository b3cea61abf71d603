"""User docs say what is, not when: no dated measurements, commit hashes or development history.

Dated figures belong in benchmarks/README.md (outside README.md and docs/, so not checked). Left out of the check:
docs/simulation-results.md and docs/simulation-results/ (written by `railforge simulate-report`, a results record)
and docs/simulation-notes.md, the hand-written notes that report inlines: they compare runs of the scheduler's
cores, which they can only name by commit.

Checksums, key fingerprints and key ids are facts, not history: hashes are flagged only after "commit", "at" or
"of", or alone in backticks at 7-12 characters (a short commit id), and only when they mix letters and digits.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXEMPT = ("docs/simulation-results.md", "docs/simulation-results/", "docs/simulation-notes.md")

_HEX = r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]"
VOLATILE = {
    "a date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "a commit": re.compile(rf"\b(?:[Cc]ommits?|at|of)\s+`?{_HEX}{{7,40}}\b"),
    "a short hash": re.compile(rf"`{_HEX}{{7,12}}`"),
    "a measurement's occasion": re.compile(r"\b[Mm]easured (?:on|by|at)\b|\bMeasured \("),
}


def volatile_figures(text: str) -> list[str]:
    """Each match as 'line N: <what>: <text>'."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in VOLATILE.items():
            found.extend(f"line {number}: {what}: {match.group(0)}" for match in pattern.finditer(line))
    return found


def user_docs() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [path for path in docs if not path.relative_to(ROOT).as_posix().startswith(EXEMPT)]


def test_user_docs_are_found() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in user_docs()}
    assert {"README.md", "docs/testing.md", "docs/operations/troubleshooting-cluster.md"} <= names
    assert not names & {"docs/simulation-results.md", "docs/simulation-notes.md"}


@pytest.mark.parametrize("path", user_docs(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_user_doc_has_no_volatile_figures(path: Path) -> None:
    assert volatile_figures(path.read_text()) == [], "dated figures go to benchmarks/README.md, with their date"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Build: measured 2026-11-24 at 3f03be2.",
            ["line 1: a date: 2026-11-24", "line 1: a commit: at 3f03be2"],
        ),
        (
            "ok\nin a cold run of commit `b6a1491`",
            ["line 2: a commit: commit `b6a1491", "line 2: a short hash: `b6a1491`"],
        ),
        ("Measured on a 2-core machine, 404 s", ["line 1: a measurement's occasion: Measured on"]),
        ("Measured (2 cores, so rough): 115 s", ["line 1: a measurement's occasion: Measured ("]),
    ],
)
def test_volatile_figures_are_found(text: str, expected: list[str]) -> None:
    assert volatile_figures(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "fingerprint `DE15B14486CD377B9E876E1A234654DA9A296436`",
        "checksum of sha256:78b0131f931fcc8d99f6ce0407281f41b62527e443ec691d26d9634b390ad3bb",
        "`railforge_benchmark_allreduce_elements` `1048576` doubles",
        "measured complete for gangs of up to 8 pods; every measured figure equals its fixture",
        "about 15 minutes on 2 cores; device id 0x2335; release 2.28.9",
    ],
)
def test_facts_are_not_flagged(text: str) -> None:
    assert volatile_figures(text) == []
