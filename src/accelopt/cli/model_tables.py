"""``accelopt model profile`` / ``optimize``'s tables in the terminal: where the time goes, and
what the kernels made of it end to end. Every name, reason and advice comes from the user's
model and is printed as text (escaped), never as rich markup. The figures shared with the HTML
report (the Amdahl bound, a site's share, the check line) come from ``model.report``."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from accelopt.cli.output import console
from accelopt.formatting import DASH, milliseconds, percent, speedup_x
from accelopt.model.records import ModelResult, Speedup
from accelopt.model.report import (
    ACCELOPT,
    SHOWN_NAMES,
    SWAPPED,
    accelopt_gain,
    amdahl_sentence,
    check_line,
    half_width,
    site_share,
    sizes_text,
    speedup_over,
)

WORTH_IT = 1.2  # below this gain over the better of eager and Inductor, the Amdahl bound is said


def _title(result: ModelResult, what: str) -> str:
    shapes = ", ".join("x".join(str(d) for d in shape) for shape in result.inputs)
    return escape(f"{what}: {result.model} ({shapes or 'no inputs'})")


def _ms(ms: float) -> str:
    return milliseconds(ms / 1e3)


def _ratio(s: Speedup | None) -> str:
    if s is None:
        return DASH
    return f"{speedup_x(s.ratio)} ({s.low:.2f}-{s.high:.2f})"


def shares_table(result: ModelResult) -> Table:
    """Eager time per matched subgraph and remaining op, slowest first."""
    table = Table(
        title=_title(result, "where the time goes (eager)"),
        title_justify="left",
        caption_justify="left",
    )
    for name in ("part", "problem", "ms", "share"):
        table.add_column(name, justify="right" if name in {"ms", "share"} else "left")
    for s in sorted(result.before, key=lambda s: -s.ms):
        table.add_row(escape(s.label), escape(s.problem) or DASH, _ms(s.ms), percent(s.share))
    table.caption = "ms: per model call; share: of eager time"
    return table


def end_to_end_table(result: ModelResult) -> Table:
    """Eager, Inductor and accelopt: median ms, its interval, and accelopt's speedup over
    each."""
    table = Table(title=_title(result, "end to end"), title_justify="left", caption_justify="left")
    for name in ("model", "ms", "ms ± (95% CI)", "speedup of accelopt"):
        table.add_column(name, justify="left" if name == "model" else "right")
    for t in result.timings:
        versus = "" if t.name == ACCELOPT else _ratio(speedup_over(result, t.name))
        table.add_row(
            escape(SHOWN_NAMES.get(t.name, t.name)), _ms(t.ms), percent(half_width(t)), versus
        )
    rounds = max((t.rounds for t in result.timings), default=0)
    table.caption = (
        f"timed interleaved, {rounds} rounds; speedup: median of per-round ratios (95% CI)"
    )
    return table


def sites_table(result: ModelResult) -> Table:
    """Each matched subgraph: its problem and sizes, swapped or why kept, the kernel, its share
    of eager time and the kernel's speedup over the subgraph."""
    table = Table(title="matched subgraphs", title_justify="left", caption_justify="left")
    for name in ("site", "problem", "sizes", "status", "kernel", "share", "kernel speedup"):
        table.add_column(name, justify="right" if name in {"share", "kernel speedup"} else "left")
    for s in result.sites:
        state = f"[green]{SWAPPED}[/green]" if s.status == SWAPPED else escape(s.status)
        if s.reason:
            state += f": {escape(s.reason)}"
        table.add_row(
            escape(s.id),
            escape(s.problem),
            escape(sizes_text(s.sizes)),
            state,
            escape(s.kernel) or DASH,
            percent(site_share(result.before, s.id)),
            _ratio(s.speedup),
        )
    table.caption = "share: of eager time; kernel speedup: the subgraph's time over the kernel's"
    return table


def _unmatched_lines(result: ModelResult) -> list[str]:
    return [
        f"not matched: {escape(u.label)} ({percent(u.share)} of eager time): {escape(u.advice)}"
        for u in result.unmatched
    ]


def _notes(result: ModelResult) -> None:
    for note in result.notes:
        console.print(f"[dim]{escape(note)}[/dim]")


def print_profile(result: ModelResult) -> None:
    """Where the eager model's time goes, and the hot parts no problem matched."""
    console.print(shares_table(result))
    for line in _unmatched_lines(result):
        console.print(line)
    _notes(result)


def _check_markup(result: ModelResult) -> str:
    line = escape(check_line(result.check))
    passed = result.check.get("passed")
    if passed is True:
        return f"[green]{line}[/green]"
    return f"[red]{line}[/red]" if passed is False else line


def print_optimized(result: ModelResult) -> None:
    """End to end (eager, Inductor, accelopt), the output check, each matched subgraph, and
    where accelopt gained less than WORTH_IT over the better of eager and Inductor, the most the
    kernels could give (the Amdahl bound)."""
    console.print(end_to_end_table(result))
    console.print(_check_markup(result))
    if result.sites:
        console.print(sites_table(result))
    for line in _unmatched_lines(result):
        console.print(line)
    gain = accelopt_gain(result)
    if gain is None or gain < WORTH_IT:
        sentence = amdahl_sentence(result)
        console.print(escape(sentence[:1].upper() + sentence[1:]) + ".")
    _notes(result)
