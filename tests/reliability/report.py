"""Summary tables of the reliability suite, collected by the tests and printed once at the end
(pytest's terminal summary), so they appear in the CI log with or without `-s`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(c) for c in header], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rendered = [line(cells[0]), "  ".join("-" * w for w in widths)]
    return rendered + [line(r) for r in cells[1:]]


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"
    return str(value)


@dataclass
class Report:
    sections: dict[str, list[str]] = field(default_factory=dict)

    def add(self, title: str, lines: Sequence[str]) -> None:
        self.sections[title] = list(lines)

    def lines(self) -> list[str]:
        out: list[str] = []
        for title, lines in self.sections.items():
            out += ["", f"== {title}", *lines]
        return out


REPORT = Report()
