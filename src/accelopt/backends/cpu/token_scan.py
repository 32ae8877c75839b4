"""One pass over C tokens for what only the token structure shows: forbidden attributes however
spelled (``__attribute__((...))``, ``[[...]]``) and GNU nested functions (``TokenScanner``).
Linear in the length of the code: the checks run it on text an LLM wrote."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Why each attribute is refused; it is refused in any spelling: __attribute__((__alias__)),
# __attribute ((alias)), [[gnu::alias]], and through macros (on the preprocessed kernel).
_ATTRIBUTE_WHY = {
    "constructor": "a kernel runs only when called",
    "destructor": "a kernel runs only when called",
    "ifunc": "its resolver would run when the object is loaded",
    "target_clones": "its resolver would run when the object is loaded",
    "alias": "it makes one symbol stand for another",
    "weakref": "it makes one symbol stand for another",
    "symver": "it makes one symbol stand for another",
    "copy": "it copies the attributes of another declaration",
    "section": "it places code or data where the loader would run or execute it",
    "naked": "a naked function is a body of assembly",
}
FORBIDDEN_ATTRIBUTES = frozenset(_ATTRIBUTE_WHY)
_ATTRIBUTE_KEYWORDS = frozenset({"__attribute__", "__attribute"})
_BRACKET_ATTRIBUTE = "[[...]] attributes are not allowed; use __attribute__ for what is permitted"
# The tokens the attribute scan needs (identifiers, numbers so that 0x1f is no name, brackets of
# every kind with their digraphs); ``_EVERY_TOKEN`` adds each other character as one token.
_TOKEN = re.compile(r"[A-Za-z_$][\w$]*|\.?\d(?:[eEpP][+-]|[\w.$])*|<:|:>|<%|%>|[()\[\]{}]")
_EVERY_TOKEN = re.compile(_TOKEN.pattern + r"|\S")
# Words that may stand before `( ... ) {` inside a function body without making it a function
# definition: `if (x) {`, `return (struct s){...}`, `sizeof (T){...}`.
_NOT_A_FUNCTION = frozenset(
    {
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "else",
        "do",
        "case",
        "goto",
        "_Alignof",
        "__alignof__",
        "__alignof",
        "alignof",
        "typeof",
        "__typeof__",
        "__typeof",
        "_Generic",
        "__extension__",
        "__real__",
        "__imag__",
        "_Static_assert",
        "static_assert",
    }
)
_ATTRIBUTE_PAREN = "(__attribute__"  # what the stack holds for an attribute's outer "("


@dataclass
class TokenScanner:
    """One pass over C tokens with stacks for parentheses and brackets (linear time, one tight
    loop), for what only the token structure shows: the names inside ``__attribute__((...))``
    and ``[[...]]``, and (``nested``) a function defined inside a function body.
    ``brackets_allowed=False`` refuses every ``[[`` (the source check); the check of the
    preprocessed kernel reads the names inside instead. ``scan`` may be called line by line."""

    nested: bool = False
    brackets_allowed: bool = True
    # The token before each open "(" (a name makes it a call or a declarator), or
    # _ATTRIBUTE_PAREN for the outer one of an attribute; for those, the (prev, closed) state
    # before the keyword, restored when it closes: `f(int x) __attribute__((...)) {` is `f(...) {`.
    parens: list[str] = field(default_factory=list)
    restores: list[tuple[str, str]] = field(default_factory=list)
    brackets: list[bool] = field(default_factory=list)  # True: the second `[` of a `[[`
    state: tuple[int, int, str, str, tuple[str, str]] = (0, 0, "", "", ("", ""))

    def scan(self, code: str, every_token: bool = False) -> str | None:
        """Feed the tokens of ``code``; the reason to reject, or None. One loop with the state
        in local variables: a call per token would make a 1 MiB source take seconds."""
        parens, restores, brackets = self.parens, self.restores, self.brackets
        # open braces, open attribute regions, the previous token, when it is ")" the token
        # before its "(", and (prev, closed) before the last __attribute__ keyword
        braces, attributes, prev, closed, saved = self.state
        for token in (_EVERY_TOKEN if every_token else _TOKEN).findall(code):
            if token == "(":
                if prev in _ATTRIBUTE_KEYWORDS:
                    parens.append(_ATTRIBUTE_PAREN)
                    restores.append(saved)
                    attributes += 1
                else:
                    parens.append(prev)
            elif token == ")":
                before = parens.pop() if parens else ""
                if before is _ATTRIBUTE_PAREN:
                    attributes -= 1
                    prev, closed = restores.pop()
                else:
                    prev, closed = ")", before
                continue
            elif token in _OPEN_BRACKETS:
                attribute = prev in _OPEN_BRACKETS
                brackets.append(attribute)
                attributes += attribute
                if attribute and not self.brackets_allowed:
                    return _BRACKET_ATTRIBUTE
            elif token in _CLOSE_BRACKETS:
                if brackets and brackets.pop():
                    attributes -= 1
            elif token in _OPEN_BRACES:
                if self.nested and braces and prev == ")" and _defines_a_function(closed):
                    return _nested_function(closed)
                braces += 1
            elif token in _CLOSE_BRACES:
                braces = max(0, braces - 1)
            elif token in _ATTRIBUTE_KEYWORDS:
                saved = (prev, closed)
            elif attributes and token.strip("_") in FORBIDDEN_ATTRIBUTES:
                return f"the {token!r} attribute is not allowed: {_ATTRIBUTE_WHY[token.strip('_')]}"
            prev = token
        self.state = (braces, attributes, prev, closed, saved)
        return None


_OPEN_BRACKETS = frozenset({"[", "<:"})
_CLOSE_BRACKETS = frozenset({"]", ":>"})
_OPEN_BRACES = frozenset({"{", "<%"})
_CLOSE_BRACES = frozenset({"}", "%>"})


def _defines_a_function(name: str) -> bool:
    """Whether `name ( ... ) {` inside braces is a function definition: a name, not a keyword."""
    return bool(name) and (name[0].isalpha() or name[0] in "_$") and name not in _NOT_A_FUNCTION


def _nested_function(name: str) -> str:
    return (
        f"a function defined inside another function ({name}) is not allowed: define it at "
        "file scope (a nested function can need an executable stack)"
    )
