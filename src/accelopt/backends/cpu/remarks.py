"""What the compiler says about vectorizing a kernel's loops: a few lines for the planner.

GCC reports each loop it vectorized (``-fopt-info-vec-optimized``) and each one it could not, with
the reason on the next line (``-fopt-info-vec-missed``). The raw report is long and full of notes
about code the user did not write (OpenMP glue, basic-block SLP of argument structs); this keeps
one line per loop, about kernel.c only, each followed by the source line it is about.

Loops inside ``#pragma omp parallel`` regions are compiled in outlined functions
(``kernel._omp_fn.0``) but reported at their kernel.c lines, so they are kept like any other.
Clang does not understand ``-fopt-info``: with it, the compile fails and there are no remarks.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from accelopt.backends.cpu.compiler import SOURCE_NAME, BuildInputs, build_directory

REPORT_FLAGS = ("-fopt-info-vec-optimized", "-fopt-info-vec-missed")
SNIPPET_CHARS = 60

_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<kind>optimized|missed): ?")
_COULD_NOT = "couldn't vectorize loop"
_CLOBBERS = "statement clobbers memory:"
_CALL = re.compile(r"(?:^|=\s*)([A-Za-z_]\w*) \(")
# Reasons that say nothing actionable: an outer loop holding inner loops is not vectorized by
# design, the inner loop is what matters.
_LOW_VALUE_REASONS = ("multiple nested loops", "two or more consecutive inner loops")
_VERSIONED = "loop versioned for vectorization because of possible aliasing"


@dataclass(frozen=True)
class _Note:
    line: int
    col: int
    kind: str  # "optimized" | "missed"
    message: str


def _parse(output: str, source_path: str) -> list[_Note]:
    """The located optimized/missed notes of kernel.c, in the order GCC printed them."""
    notes: list[_Note] = []
    for raw in output.splitlines():
        text = raw.replace(source_path, SOURCE_NAME)
        match = _LOCATED.match(text)
        if not match or match["file"] != SOURCE_NAME:
            continue  # continuation lines, headers (e.g. intrinsics inlined from immintrin.h)
        message = text[match.end() :].strip().rstrip(".;").strip()
        notes.append(_Note(int(match["line"]), int(match["col"]), match["kind"], message))
    return notes


def _reason(note: _Note) -> str:
    """A missed note's reason, with GCC's internal temporaries left out of calls."""
    message = note.message.removeprefix("not vectorized:").strip()
    if message.startswith(_CLOBBERS):
        call = _CALL.search(message.removeprefix(_CLOBBERS).strip())
        if call:
            return f"call to {call.group(1)}() may write memory"
    return message


def _is_reason(note: _Note) -> bool:
    return note.kind == "missed" and not note.message.startswith(_COULD_NOT)


def _select(notes: list[_Note], pragma_lines: set[int]) -> list[tuple[_Note, str]]:
    """One optimized and one missed note per source line, each with the text to show."""
    optimized: dict[int, tuple[_Note, str]] = {}
    versioned: set[int] = set()
    missed: dict[int, tuple[_Note, str, int]] = {}  # with the line of the reason
    for i, note in enumerate(notes):
        if note.line in pragma_lines:
            continue  # OpenMP glue: reduction loops, the argument struct, GOMP_parallel calls
        if note.kind == "optimized":
            if note.message.startswith(_VERSIONED):
                versioned.add(note.line)
            elif "vectorized" in note.message:
                optimized.setdefault(note.line, (note, note.message))
            continue
        if note.message.startswith(_COULD_NOT):
            following = notes[i + 1] if i + 1 < len(notes) else None
            if following is None or not _is_reason(following):
                missed.setdefault(note.line, (note, _COULD_NOT, note.line))
                continue
            reason = _reason(following)
            if any(low in reason for low in _LOW_VALUE_REASONS):
                continue
            where = f" (line {following.line})" if following.line != note.line else ""
            missed.setdefault(note.line, (note, f"{_COULD_NOT}: {reason}{where}", following.line))
        elif note.message.startswith("not vectorized"):
            # A reason whose "couldn't vectorize loop" was not printed: keep it at its own line.
            previous = notes[i - 1] if i else None
            if previous is not None and previous.message.startswith(_COULD_NOT):
                continue
            reason = _reason(note)
            if not any(low in reason for low in _LOW_VALUE_REASONS):
                missed.setdefault(note.line, (note, f"not vectorized: {reason}", note.line))
        # other missed notes ("statement clobbers memory" on its own) come from basic-block SLP
    for line in versioned & optimized.keys():
        note, text = optimized[line]
        optimized[line] = (note, f"{text} (versioned: runtime check for possible aliasing)")
    # An outer loop whose reason lies past another reported loop failed on that inner loop's
    # statements (GCC tried outer-loop vectorization): the inner loop's own remark says it all.
    loops = optimized.keys() | missed.keys()
    chosen = [*optimized.values()]
    for line, (note, text, reason_line) in missed.items():
        if not any(line < other <= reason_line for other in loops):
            chosen.append((note, text))
    return sorted(chosen, key=lambda item: (item[0].line, item[0].kind != "optimized"))


def _format(note: _Note, text: str, source_lines: list[str]) -> str:
    line = f"{SOURCE_NAME}:{note.line}:{note.col}: {note.kind}: {text}"
    if 0 < note.line <= len(source_lines):
        snippet = " ".join(source_lines[note.line - 1].split())
        if len(snippet) > SNIPPET_CHARS:
            snippet = snippet[: SNIPPET_CHARS - 3] + "..."
        if snippet:
            line += f"  // {snippet}"
    return line


def vectorization_remarks(
    inputs: BuildInputs, timeout_s: float = 60.0, max_lines: int = 20
) -> list[str]:
    """GCC's vectorization report on the source, one line per loop, ordered by source line.

    Compiles to an object file (nothing is linked or run) with the contract's flags, prototype and
    sizes, in a fresh temporary directory. A compile error or a timeout gives ``[]``: the
    evaluation reports those. At most ``max_lines`` lines, then one ``(N more)`` line.
    """
    with build_directory(inputs, timeout_s, prefix="accelopt-remarks-") as build:
        cmd = build.command(*REPORT_FLAGS, "-c", "-o", "kernel.o", SOURCE_NAME, shared=False)
        try:
            code, output = build.execute(cmd)
        except (subprocess.TimeoutExpired, OSError):
            return []
    if code != 0:
        return []
    source_lines = inputs.source.splitlines()
    pragma_lines = {
        number
        for number, text in enumerate(source_lines, start=1)
        if re.match(r"\s*#\s*pragma\s+omp\b", text)
    }
    chosen = _select(_parse(output, str(build.dir / SOURCE_NAME)), pragma_lines)
    lines = [_format(note, text, source_lines) for note, text in chosen]
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"({len(lines) - max_lines} more)"]
    return lines
