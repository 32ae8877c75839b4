"""Table cells for text of unbounded length: a failed kernel's error.

A table gives an error a short cell: its first line, cut at a word boundary with an ellipsis when
it is longer (or when the error has more lines). The full error is printed once, under the table,
and only where the cell did not hold it all (``cut_errors``): never the same text twice. The text
is verbatim (a ``rich.text.Text``: ``y[j]`` in compiler output is an index, not markup). Pure
functions.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

ELLIPSIS = "…"
ERROR_CELL_CHARS = 120  # the most characters of an error a table cell shows


def cut_at_word(text: str, width: int) -> str:
    """``text`` as it is when it has at most ``width`` characters; else its words that fit in
    ``width - 1`` characters, then ``…``. A first word longer than that is cut inside (a path)."""
    if len(text) <= width:
        return text
    head = text[: max(width - 1, 0)]
    if not text[len(head)].isspace():  # the cut falls inside a word: end before that word
        space = max(head.rfind(" "), head.rfind("\t"))
        head = head[:space] if space > 0 else head
    return head.rstrip() + ELLIPSIS


def error_summary(error: str, width: int = ERROR_CELL_CHARS) -> str:
    """An error's first line, cut at a word to at most ``width`` characters; it ends with ``…``
    wherever the error has more than it shows (a longer line, or more lines)."""
    lines = error.strip().splitlines()
    if len(lines) <= 1:
        return cut_at_word(error.strip(), width)
    first = lines[0].rstrip()
    if len(first) + 2 <= width:
        return f"{first} {ELLIPSIS}"
    return cut_at_word(first, min(width, len(first) - 1))


def error_cell(error: str, width: int = ERROR_CELL_CHARS) -> Text:
    """A table's error cell: ``error_summary``, verbatim (never read as markup)."""
    return Text(error_summary(error, width))


def is_cut(error: str, width: int = ERROR_CELL_CHARS) -> bool:
    """Whether the error's cell holds less than the whole error (so it is printed below)."""
    return error_summary(error, width) != error.strip()


def cut_errors(errors: Iterable[tuple[str, str]], width: int = ERROR_CELL_CHARS) -> list[str]:
    """The lines to print under a table whose rows are ``(label, error)``: ``label: error`` in
    full for each error its cell cut, once; nothing for an error its cell shows whole."""
    return [
        f"{label}: {error.strip()}" if label else error.strip()
        for label, error in errors
        if error.strip() and is_cut(error, width)
    ]
