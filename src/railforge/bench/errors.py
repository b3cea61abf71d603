"""The one error every parser raises on output it cannot read."""

from __future__ import annotations


class ParseError(ValueError):
    """Output that is not what the parser expects: names the file, the line (1-based) and what was expected."""

    def __init__(self, source: str, line: int | None, expected: str, found: str = "") -> None:
        where = f"{source or '<text>'}" + (f":{line}" if line else "")
        message = f"{where}: expected {expected}"
        if found:
            message += f", found {found!r}"
        super().__init__(message)
        self.source, self.line, self.expected, self.found = source, line, expected, found
