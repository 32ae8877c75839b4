"""Rendering the report pages: strict, auto-escaping Jinja2 templates under ``templates/``, whose
filters write figures as ``accelopt.formatting`` does. Charts arrive as SVG text and are marked
safe here only."""

from __future__ import annotations

import datetime
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from accelopt import __version__, formatting, templating


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "file" | "hunk" | "add" | "del" | "ctx"
    text: str


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> list[DiffLine]:
    """The unified diff of two sources, each line classified for colouring (text not escaped:
    the template escapes it)."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), before_name, after_name, lineterm=""
    )
    return [DiffLine(_diff_kind(line), line) for line in lines]


def _diff_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


_ENV = templating.environment("accelopt.reports", kind="html")
_ENV.filters.update(
    ms=formatting.latency,
    pct=formatting.percent,
    speedup=formatting.speedup,
    usd=formatting.usd,
    rate=formatting.giga,
    num=formatting.integer,
    duration=lambda s: "—" if s is None else duration(s),
)


def duration(seconds: float) -> str:
    """A wall time as people read it: ``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def svg(text: str) -> Markup:
    """Chart SVG from ``plots`` (our own output, not user text) as markup the page inlines."""
    return Markup(text)


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>.jinja``; a missing variable is an error."""
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = _ENV.get_template(f"{template}.jinja")
    return page.render(version=__version__, generated=generated, **context)


def write_page(path: Path, text: str) -> Path:
    """Write a page, creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
