"""What the planner is given from the optimization memory: the top-k lessons for this problem and
this kernel.

The published AccelOpt pasted a random list of 16 experiences, lost after each problem. Here the
memory persists in the workspace and is ranked (issue 5, point 4):

- **Query**: the salient words of the problem (name, description) and of the kernel source
  (identifiers such as intrinsics and pragma names, and comment words), without C keywords or very
  common words, at most ``MAX_TERMS`` (the store's FTS5 query cap). See ``query_terms``.
- **Relevance**: the store's FTS5 BM25 over title, description, before, after and problem, negated
  so that higher is better. ``4 * k`` candidates are fetched, so that merging leaves k.
- **Score** = relevance × log2(1 + speedup). See ``score``.
- **Near-duplicates** (similar titles, or the same ``after`` snippet) are merged, keeping the
  higher-scored one. See ``near_duplicate`` and ``dedupe``.
- **Filling**: when fewer than k lessons match, the rest of the scope fills the list by speedup
  weight, as the published system showed lessons regardless of relevance.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from accelopt.errors import UserError
from accelopt.memory.records import Experience

SCOPES = ("off", "run", "workspace")
MAX_TERMS = 64  # the store's FTS5 query keeps at most 64 tokens; choose them here, in order
CANDIDATES_PER_RESULT = 4
DUPLICATE_TITLE_JACCARD = 0.6


class ExperienceSource(Protocol):
    """The part of ``accelopt.store.Store`` that retrieval reads."""

    def search_experiences(
        self, query: str, *, limit: int = 50, run_id: str | None = None
    ) -> list[tuple[Experience, float]]: ...

    def experiences(
        self, *, run_id: str | None = None, problem: str | None = None
    ) -> list[Experience]: ...


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


def score(relevance: float, speedup: float) -> float:
    """relevance × weight(speedup); relevance is -bm25 (higher is better, > 0 for a match),
    floored at 0 so that a larger speedup never lowers a score."""
    return max(relevance, 0.0) * weight(speedup)


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


def _rank_key(item: tuple[Experience, float]) -> tuple[float, float, int, str]:
    exp, s = item
    return (-s, -exp.speedup, exp.id if exp.id is not None else 1 << 62, exp.lesson.title)


def dedupe(scored: Iterable[tuple[Experience, float]]) -> list[tuple[Experience, float]]:
    """Best first (score, then speedup, then id), each kept only if it is no near-duplicate of
    one kept before it."""
    kept: list[tuple[Experience, float]] = []
    for item in sorted(scored, key=_rank_key):
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


def rank(
    store: ExperienceSource,
    *,
    problem_text: str,
    kernel_text: str,
    k: int = 16,
    scope: str = "workspace",
    run_id: str | None = None,
) -> list[tuple[Experience, float]]:
    """The top ``k`` experiences with their scores, best first (see the module doc)."""
    run = _scope_run(scope, run_id)
    if scope == "off" or k <= 0:
        return []
    query = " ".join(query_terms(problem_text, kernel_text))
    hits = (
        store.search_experiences(query, limit=CANDIDATES_PER_RESULT * k, run_id=run)
        if query
        else []
    )
    kept = dedupe((exp, score(rel, exp.speedup)) for exp, rel in hits)[:k]
    if len(kept) < k:
        kept = _fill(kept, store.experiences(run_id=run), {exp.id for exp, _ in hits})[:k]
    return kept


def _fill(
    kept: Sequence[tuple[Experience, float]], pool: Iterable[Experience], matched: set[int | None]
) -> list[tuple[Experience, float]]:
    """``kept`` followed by the unmatched experiences of the pool (score 0: by speedup)."""
    rest = [(exp, 0.0) for exp in pool if exp.id not in matched]
    return dedupe([*kept, *rest])


def retrieve(
    store: ExperienceSource,
    *,
    problem_text: str,
    kernel_text: str,
    k: int = 16,
    scope: str = "workspace",
    run_id: str | None = None,
) -> list[Experience]:
    """The lessons for the planner: ``scope`` "off" gives none, "run" this run's, "workspace"
    all; the top ``k`` by relevance × speedup weight, near-duplicates merged, best first."""
    ranked = rank(
        store,
        problem_text=problem_text,
        kernel_text=kernel_text,
        k=k,
        scope=scope,
        run_id=run_id,
    )
    return [exp for exp, _ in ranked]
