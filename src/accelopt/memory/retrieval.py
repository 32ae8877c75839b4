"""What the planner is given from the optimization memory: the top-k lessons for this problem and
this kernel.

The published AccelOpt pasted a random list of 16 experiences, lost after each problem. Here the
memory persists in the workspace and is ranked:

- **Query**: the salient words of the problem (name, description) and of the kernel source
  (identifiers such as intrinsics and pragma names, and comment words), without C keywords or very
  common words, at most ``MAX_TERMS`` (the store's FTS5 query cap). See ``query_terms``.
- **Relevance**: the store's FTS5 BM25 over title, description, before, after and problem, negated
  so that higher is better. ``4 * k`` candidates are fetched, so that merging leaves k.
- **Scope by backend**: a lesson's code is in one language (C for ``cpu``, Python for
  ``triton``), so only lessons of the planner's backend are candidates. The store filters by
  ``backend=``, and every candidate is checked again here (``exp.backend == backend``), so that
  an older store that ignores the filter still never shows a Triton lesson to a C planner.
- **Score** = relevance × log2(1 + speedup) × preference. See ``score`` and ``preference``.
  Only a speedup measured in this workspace counts: an imported lesson's is the exporter's claim
  (``Experience.measured_here`` False), so it is ranked as if it had none (``evidence``: 1),
  whatever it claims, and a measured lesson as relevant comes before it.
- **Preference** for lessons measured where they will be used: ×``SAME_PROBLEM_FACTOR`` (1.5)
  for a lesson of the same problem, ×``SAME_HARDWARE_FACTOR`` (1.25) for one measured on the same
  hardware (a ``HardwareSpec.key``; not for an imported lesson, whose hardware is claimed too);
  both multiply (1.875). A lesson from elsewhere still ranks
  first when it is clearly more relevant or faster: the factors only tip near-ties.
- **Near-duplicates** (similar titles, or the same ``after`` snippet) are merged, keeping the
  higher-scored one. See ``near_duplicate`` and ``dedupe``.
- **Filling**: when fewer than k lessons match, the rest of the scope fills the list, by
  preference (same problem and hardware first), then measured speedup, as the published system
  showed lessons regardless of relevance.

Ties are broken by score, then preference, then measured speedup, then id, then title:
deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from accelopt.errors import UserError
from accelopt.memory.records import Experience

SCOPES = ("off", "run", "workspace")
MAX_TERMS = 64  # the store's FTS5 query keeps at most 64 tokens; choose them here, in order
CANDIDATES_PER_RESULT = 4
DUPLICATE_TITLE_JACCARD = 0.6
SAME_PROBLEM_FACTOR = 1.5  # a lesson learned on this very problem
SAME_HARDWARE_FACTOR = 1.25  # a lesson measured on this hardware (its speedup holds here)


class ExperienceSource(Protocol):
    """The part of ``accelopt.store.Store`` that retrieval reads."""

    def search_experiences(
        self, query: str, *, limit: int, run_id: str | None, backend: str | None
    ) -> list[tuple[Experience, float]]: ...

    def experiences(self, *, run_id: str | None, backend: str | None) -> list[Experience]: ...


# --- query -----------------------------------------------------------------------------------

# Word tokens as the store's FTS5 tokenizer (unicode61) cuts them: letters and digits, with "_"
# a separator, so `_mm256_fmadd_ps` gives mm256, fmadd, ps.
_WORD = re.compile(r"[^\W_]+")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


C_KEYWORDS = _wordset(
    """auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while bool alignas alignof atomic complex generic imaginary
    noreturn include define undef ifdef ifndef endif elif pragma
    defined null true false"""
)
# Words every kernel of this project carries (the contract, common headers and types).
KERNEL_BOILERPLATE = _wordset(
    """kernel baseline expert size ptrdiff stdlib stdint stddef stdio stdbool string math immintrin
    h int8 int16 int32 int64 uint8 uint16 uint32 uint64 uintptr intptr"""
)
STOPWORDS = _wordset(
    """a about above after again all also an and any are as at be because been before being
    below between both but by can could did do does doing down during each either etc every few
    from further had has have having here how i if in into is it its itself just may might more
    most much must no nor not now of off on once one only or other our out over own per same
    should so some such than that the their them then there these they this those through to too
    two under until up upon us use used uses using very via was we were what when where which
    while who whom why will with within without would yet you your"""
)
_DROPPED = C_KEYWORDS | KERNEL_BOILERPLATE | STOPWORDS
_CONTRACT_ARG = re.compile(r"^(in|out)\d+$")  # in0, out1: the kernel contract's generic names


def _salient(word: str, min_len: int = 2) -> bool:
    return (
        len(word) >= min_len
        and not word[0].isdigit()  # numbers and literals: 0, 1e, 0f, 0x1f
        and word not in _DROPPED
        and not _CONTRACT_ARG.match(word)
    )


def words(text: str, min_len: int = 2) -> list[str]:
    """The salient words of ``text``, lowercased, in order, repeats kept."""
    return [w for w in (t.lower() for t in _WORD.findall(text)) if _salient(w, min_len)]


def query_terms(problem_text: str, kernel_text: str, cap: int = MAX_TERMS) -> list[str]:
    """The query: the problem's salient words in order (the name first, as the caller gives it),
    then the kernel's by how often they occur (ties: first seen), each once, at most ``cap``.
    Kernel words need 3 letters: variable names such as ``xr`` or ``s0`` say nothing."""
    terms = list(dict.fromkeys(words(problem_text)))
    counts = Counter(words(kernel_text, min_len=3))  # keys first-seen first; sorted() is stable
    seen = set(terms)
    terms += sorted((w for w in counts if w not in seen), key=lambda w: -counts[w])
    return terms[:cap]


# --- score -----------------------------------------------------------------------------------


def weight(speedup: float) -> float:
    """log2(1 + speedup): 1 at no speedup, 1.58 at 2x, 2.32 at 4x, 3.46 at 10x. It grows with
    the measured gain (for a negative, how much the undone change cost) but slowly, so that one
    10x lesson from a naive baseline does not outrank lessons that are much more relevant."""
    return math.log2(1.0 + max(speedup, 1.0))


def evidence(exp: Experience) -> float:
    """The speedup ranking may use: the measured one, or 1 (none) for an imported claim."""
    return exp.speedup if exp.measured_here else 1.0


def score(relevance: float, speedup: float, prefer: float = 1.0) -> float:
    """relevance × weight(speedup) × prefer; relevance is -bm25 (higher is better, > 0 for a
    match), floored at 0 so that a larger speedup never lowers a score."""
    return max(relevance, 0.0) * weight(speedup) * prefer


def preference(exp: Experience, *, problem: str | None, hardware: str | None) -> float:
    """``SAME_PROBLEM_FACTOR`` if the lesson comes from ``problem``, times
    ``SAME_HARDWARE_FACTOR`` if it was measured on ``hardware``; 1 otherwise (or when None)."""
    same_problem = problem is not None and exp.problem == problem
    same_hardware = hardware is not None and exp.measured_here and exp.hardware == hardware
    return (SAME_PROBLEM_FACTOR if same_problem else 1.0) * (
        SAME_HARDWARE_FACTOR if same_hardware else 1.0
    )


# --- near-duplicates -------------------------------------------------------------------------

_TITLE_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    """A crude stem: one of -ing, -ed, -es, -s (not -ss) off, then a final -e; at least 3 letters
    stay. tile, tiles, tiled, tiling → til; pack, packs, packed, packing → pack."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def title_key(title: str) -> frozenset[str]:
    """The stemmed words of a title, stopwords dropped."""
    return frozenset(stem(w) for w in _TITLE_WORD.findall(title.lower()) if w not in STOPWORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_C_TOKEN = re.compile(r"\w+|[^\w\s]")


def snippet_key(code: str) -> str:
    """A code snippet with comments dropped and its tokens joined by single spaces, so that
    layout and comments do not tell two snippets apart."""
    return " ".join(_C_TOKEN.findall(_COMMENT.sub(" ", code)))


def near_duplicate(a: Experience, b: Experience) -> bool:
    """Titles whose stemmed words overlap by Jaccard ≥ 0.6, or the same non-empty ``after``."""
    if jaccard(title_key(a.lesson.title), title_key(b.lesson.title)) >= DUPLICATE_TITLE_JACCARD:
        return True
    after = snippet_key(a.lesson.after)
    return bool(after) and after == snippet_key(b.lesson.after)


Prefer = Callable[[Experience], float]


def _no_preference(exp: Experience) -> float:
    return 1.0


def _rank_key(
    item: tuple[Experience, float], prefer: Prefer
) -> tuple[float, float, float, int, str]:
    exp, s = item
    ident = exp.id if exp.id is not None else 1 << 62
    return (-s, -prefer(exp), -evidence(exp), ident, exp.lesson.title)


def dedupe(
    scored: Iterable[tuple[Experience, float]], prefer: Prefer = _no_preference
) -> list[tuple[Experience, float]]:
    """Best first (score, then ``prefer``, then measured speedup, then id), each kept only if it
    is no near-duplicate of one kept before it."""
    kept: list[tuple[Experience, float]] = []
    for item in sorted(scored, key=lambda item: _rank_key(item, prefer)):
        if not any(near_duplicate(item[0], k[0]) for k in kept):
            kept.append(item)
    return kept


# --- retrieval -------------------------------------------------------------------------------


def _scope_run(scope: str, run_id: str | None) -> str | None:
    if scope not in SCOPES:
        raise UserError(f"unknown memory scope {scope!r}; choose one of: {', '.join(SCOPES)}.")
    if scope == "run" and not run_id:
        raise ValueError("memory scope 'run' needs the run id")
    return run_id if scope == "run" else None


@dataclass(frozen=True)
class Lookup:
    """What the planner asks of the memory: the arguments of ``retrieve``, which says what each
    one means."""

    problem_text: str
    kernel_text: str
    backend: str | None
    hardware: str | None = None
    problem: str | None = None
    k: int = 16
    scope: str = "workspace"
    run_id: str | None = None


def rank(store: ExperienceSource, lookup: Lookup) -> list[tuple[Experience, float]]:
    """The top ``k`` experiences of the lookup's backend with their scores, best first,
    preferring those of its problem and hardware (see the module doc)."""
    run = _scope_run(lookup.scope, lookup.run_id)
    k, backend = lookup.k, lookup.backend
    if lookup.scope == "off" or k <= 0:
        return []

    def prefer(exp: Experience) -> float:
        return preference(exp, problem=lookup.problem, hardware=lookup.hardware)

    hits = _search(store, query_terms(lookup.problem_text, lookup.kernel_text), k, run, backend)
    kept = dedupe(((exp, score(rel, evidence(exp), prefer(exp))) for exp, rel in hits), prefer)
    if len(kept) < k:
        pool = [e for e in store.experiences(run_id=run, backend=backend) if _of(e, backend)]
        kept = _fill(kept, pool, {exp.id for exp, _ in hits}, prefer)
    return kept[:k]


def _search(
    store: ExperienceSource, terms: list[str], k: int, run: str | None, backend: str | None
) -> list[tuple[Experience, float]]:
    """The ``CANDIDATES_PER_RESULT * k`` best matches of the terms, of ``backend`` only."""
    if not terms:
        return []
    limit = CANDIDATES_PER_RESULT * k
    found = store.search_experiences(" ".join(terms), limit=limit, run_id=run, backend=backend)
    return [(exp, rel) for exp, rel in found if _of(exp, backend)]


def _of(exp: Experience, backend: str | None) -> bool:
    """Whether ``exp`` is in scope: the store filters already; this guards an older store."""
    return backend is None or exp.backend == backend


def _fill(
    kept: Sequence[tuple[Experience, float]],
    pool: Iterable[Experience],
    matched: set[int | None],
    prefer: Prefer,
) -> list[tuple[Experience, float]]:
    """``kept`` followed by the unmatched experiences of the pool (score 0: by preference, then
    measured speedup)."""
    rest = [(exp, 0.0) for exp in pool if exp.id not in matched]
    return dedupe([*kept, *rest], prefer)


def retrieve(
    store: ExperienceSource,
    *,
    problem_text: str,
    kernel_text: str,
    backend: str | None,
    hardware: str | None = None,
    problem: str | None = None,
    k: int = 16,
    scope: str = "workspace",
    run_id: str | None = None,
) -> list[Experience]:
    """The lessons for the planner: only those of ``backend`` (the planner's language; None
    only for tools that want every backend); ``scope`` "off" gives none, "run" this run's,
    "workspace" all; the top ``k`` by relevance × speedup weight × preference for the same
    ``problem`` (its name) and ``hardware`` (a ``HardwareSpec.key``), near-duplicates merged,
    best first."""
    lookup = Lookup(problem_text, kernel_text, backend, hardware, problem, k, scope, run_id)
    return [exp for exp, _ in rank(store, lookup)]
