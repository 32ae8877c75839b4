"""Tables as a user reads them: parse the text rich renders (its default box, heavy head), and
check that a table says one thing (issue 46): every % of peak is that table's own peak column over
its ms column, within the rounding of the cells.

``parse_tables(text)`` finds every table in a command's output; ``check_one_ceiling(table)``
recomputes each % cell and returns how many it checked. The columns are paired by their headers,
as the CLI names them (``cli/one_ceiling.py``):

- ``% of peak`` is ``peak ms`` over ``ms``; ``calibrated %`` is ``calibrated peak ms`` over ``ms``;
- ``<kind> %`` is ``peak ms`` over ``<kind> ms``; ``<kind> ms (%)`` holds both, over ``peak ms``.

A % column whose ms or peak column is not in the table fails the check, and so does a table with
more than one ``peak ms`` column. Importable as ``rendered_tables`` (tests/conftest.py puts this
folder on ``sys.path``).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

NUMBER = re.compile(r"^-?[\d,]*\.?\d+$")
PERCENT = re.compile(r"^(-?[\d,]*\.?\d+)%$")
IN_ONE_CELL = re.compile(r"^(-?[\d,]*\.?\d+) \((-?[\d,]*\.?\d+)%\)$")


@dataclass
class RenderedTable:
    """One table of a command's output: the lines above its top border (its title first), its
    headers (a wrapped header joined), its rows (a wrapped row joined) and the lines below it, up
    to the next table (its caption, notes)."""

    above: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    below: list[str] = field(default_factory=list)

    @property
    def first_line(self) -> str:
        """The first line a reader meets: the title's first line (the header's without one)."""
        return next((line for line in self.above if line.strip()), " ".join(self.headers))

    def column(self, header: str) -> list[str]:
        return [row.get(header, "") for row in self.rows]


def render(table: Table, width: int = 250) -> str:
    """``table`` as a terminal of ``width`` columns shows it."""
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _cells(line: str, bar: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip(bar).split(bar)]


def _joined(parts: list[list[str]]) -> list[str]:
    return [" ".join(p for p in column if p) for column in zip(*parts, strict=True)]


def parse_tables(text: str) -> list[RenderedTable]:
    """Every table in ``text`` (rich's default box), in order."""
    tables: list[RenderedTable] = []
    loose: list[str] = []
    state = "out"
    header: list[list[str]] = []
    body: list[list[list[str]]] = []
    for line in text.splitlines():
        edge = line.strip()[:1]
        if state == "out" and edge == "┏":
            if tables:
                tables[-1].below = loose
            tables.append(RenderedTable(above=loose if not tables else []))
            loose, header, body, state = [], [], [], "head"
        elif state == "head" and edge == "┃":
            header.append(_cells(line, "┃"))
        elif state == "head" and edge == "┡":
            tables[-1].headers, state = _joined(header), "body"
        elif state == "body" and edge == "│":
            cells = _cells(line, "│")
            if cells[0] or not body:
                body.append([cells])
            else:  # a wrapped row goes on with an empty first cell
                body[-1].append(cells)
        elif state == "body" and edge == "└":
            tables[-1].rows = [dict(zip(tables[-1].headers, _joined(row), strict=True))
                               for row in body]  # fmt: skip
            state = "out"
        elif state == "out":
            loose.append(line)
    if tables:
        tables[-1].below = loose
    return tables


def _number(cell: str) -> float | None:
    return float(cell.replace(",", "")) if NUMBER.match(cell) else None


def _pct(cell: str) -> float | None:
    found = PERCENT.match(cell)
    return float(found.group(1).replace(",", "")) if found else None


def pairs(headers: list[str]) -> list[tuple[str, str, str]]:
    """(% column, ms column, peak column) of every % of peak in a table, by the headers' names
    (the module says how); a % column named otherwise fails."""
    found = []
    for h in headers:
        if h == "% of peak":
            found.append((h, "ms", "peak ms"))
        elif h.endswith(" ms (%)"):
            found.append((h, h, "peak ms"))
        elif h == "calibrated %":
            found.append((h, "ms", "calibrated peak ms"))
        elif h.endswith(" %"):
            found.append((h, f"{h[:-2]} ms", "peak ms"))
        else:
            assert not h.startswith("%") and not h.endswith("%"), f"a % column named {h!r}"
    return found


def within_rounding(shown_pct: float, peak_ms: float, ms: float) -> bool:
    """Whether a % cell (to a tenth) is peak / ms, each cell rounded as the CLI writes it (3
    decimals from 1 ms, 4 significant digits below)."""
    exact = 100 * peak_ms / ms
    return abs(shown_pct - exact) <= 0.05 + exact * 2e-3 + 1e-9


def check_one_ceiling(table: RenderedTable) -> int:
    """Assert that every % of peak in ``table`` is its own peak column over its ms column
    (within rounding), with one ``peak ms`` column; how many % cells were checked."""
    headers = table.headers
    assert headers.count("peak ms") <= 1, f"several peak columns: {headers}"
    checked = 0
    for pct_col, ms_col, peak_col in pairs(headers):
        assert ms_col in headers, f"{pct_col!r} has no {ms_col!r} column in {headers}"
        assert peak_col in headers, f"{pct_col!r} has no {peak_col!r} column in {headers}"
        for row in table.rows:
            peak = _number(row[peak_col])
            if pct_col == ms_col:
                both = IN_ONE_CELL.match(row[pct_col])
                ms, pct = (float(both.group(1)), float(both.group(2))) if both else (None, None)
            else:
                ms, pct = _number(row[ms_col]), _pct(row[pct_col])
            if peak is None or ms is None or pct is None or ms == 0:
                continue
            assert within_rounding(pct, peak, ms), (
                f"{pct_col!r} {pct}% is not {peak_col} {peak} / {ms_col} {ms} in {row}"
            )
            checked += 1
    return checked
