"""The lexer of source files in code: string literals (with their interpolations and the
text the host language rejects in them) and comments, for every language family, told apart
by each language's `Syntax` (`dart.py`, `python.py`, `js.py`). Pure: no I/O."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from promptloop.optimizer.core.regions import dart, js, python
from promptloop.optimizer.core.regions.model import (
    Language,
    Syntax,
)

_IDENT_RE = re.compile(r"[A-Za-z_$][\w$]*")
_SYNTAX: dict[str, Syntax] = {"dart": dart.SYNTAX, "python": python.SYNTAX,
                              "javascript": js.SYNTAX, "typescript": js.SYNTAX}


def syntax_of(lang: Language) -> Syntax:
    """The syntax table of a code language (KeyError for "other")."""
    return _SYNTAX[lang]


@dataclass(frozen=True)
class Lit:
    start: int
    content_start: int
    content_end: int
    end: int
    prefix: str
    quote: str
    raw: bool
    fstring: bool
    terminated: bool = True


@dataclass
class Body:
    content_end: int
    end: int
    interps: list[tuple[int, int]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)
    """(offset, what is wrong) of text the host language rejects: a Dart '$' that starts no
    interpolation, a single '}' in an f-string."""


class Unterminated(Exception):
    def __init__(self, at: int) -> None:
        super().__init__(at)
        self.at = at


def scan_body(src: str, j: int, quote: str, raw: bool, fstring: bool, lang: Language) -> Body:
    """Scan a literal's content from `j` to its closer; raises `Unterminated`."""
    n = len(src)
    syntax = syntax_of(lang)
    single_line = len(quote) == 1 and quote != "`"
    escapes = syntax.raw_escapes or not raw
    dollar = syntax.dollar_interpolation and not raw
    out = Body(-1, -1)
    while j < n:
        c = src[j]
        if c == "\\" and escapes:
            if (single_line and j + 1 < n and src[j + 1] == "\n"
                    and syntax.backslash_newline_breaks_line_string):
                raise Unterminated(j + 1)
            if fstring and not raw and src.startswith("N{", j + 1):
                close = src.find("}", j)
                j = n if close < 0 else close + 1  # \N{NAME}: an escape, not a field
                continue
            # in an f-string a backslash does not escape a brace: '\{' still opens a field
            j += 1 if (fstring and src[j + 1:j + 2] in ("{", "}")) else 2
            continue
        if src.startswith(quote, j):
            out.content_end, out.end = j, j + len(quote)
            return out
        if c == "\n" and single_line:
            raise Unterminated(j)
        if quote == "`" and src.startswith("${", j):
            k = lex(src, j + 2, lang, None, nested=True)
            out.interps.append((j, k))
            j = k
            continue
        if dollar and c == "$":
            if src.startswith("${", j):
                k = lex(src, j + 2, lang, None, nested=True)
                out.interps.append((j, k))
                j = k
                continue
            m = dart.INTERP_NAME_RE.match(src, j + 1)
            if m is not None:
                out.interps.append((j, m.end()))
                j = m.end()
                continue
            out.bad.append((j, dart.BARE_DOLLAR))
        if fstring and c == "}":
            if src.startswith("}}", j):
                j += 2
                continue
            out.bad.append((j, "a single '}' is an error in an f-string; write '}}'"))
        if fstring and c == "{":
            if src.startswith("{{", j):
                j += 2
                continue
            k = lex(src, j + 1, lang, None, nested=True)
            out.interps.append((j, k))
            j = k
            continue
        j += 1
    raise Unterminated(n)


def lex(src: str, i: int, lang: Language, tokens: list[Lit | tuple[int, int]] | None,
         *, nested: bool = False) -> int:
    """Scan code from `i`. Top level: record string literals (`Lit`) and comments (spans) in
    `tokens` and return len(src). Nested (an interpolation): return the offset after its
    closing brace (len(src) when there is none)."""
    n, depth = len(src), 0
    prev, prev_word = "", ""
    syntax = syntax_of(lang)
    block = syntax.line_comment == "//"
    while i < n:
        c = src[i]
        if src.startswith(syntax.line_comment, i):
            k = src.find("\n", i)
            k = n if k < 0 else k
            if tokens is not None:
                tokens.append((i, k))
            i = k
            continue
        if block and src.startswith("/*", i):
            k, level = i + 2, 1
            while k < n and level:
                if src.startswith("*/", k):
                    level, k = level - 1, k + 2
                elif syntax.nested_block_comments and src.startswith("/*", k):
                    level, k = level + 1, k + 2
                else:
                    k += 1
            if tokens is not None:
                tokens.append((i, k))
            i = k
            continue
        start = syntax.string_start(src, i) if (c in "'\"`" or c.isalpha()) else None
        if start is not None:
            prefix, quote = start
            j = i + len(prefix) + len(quote)
            raw, fstring = "r" in prefix.lower(), "f" in prefix.lower()
            try:
                body = scan_body(src, j, quote, raw, fstring, lang)
                lit = Lit(i, j, body.content_end, body.end, prefix, quote, raw, fstring)
            except Unterminated as err:
                stop = err.at if (len(quote) == 1 and quote != "`" and err.at < n) else n
                lit = Lit(i, j, stop, stop, prefix, quote, raw, fstring, terminated=False)
            if tokens is not None:
                tokens.append(lit)
            i, prev, prev_word = lit.end, '"', ""
            continue
        if c.isalpha() or c in "_$":
            m = _IDENT_RE.match(src, i)
            word = m.group(0) if m else c
            i += len(word)
            prev, prev_word = "a", word
            continue
        if syntax.regex_literals and c == "/" and (prev == "" or prev in js.REGEX_BEFORE
                                                   or prev_word in js.REGEX_WORDS):
            i, prev, prev_word = js.skip_regex(src, i), '"', ""
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            if nested and depth == 0:
                return i + 1
            depth -= 1
        if not c.isspace():
            prev, prev_word = c, ""
        i += 1
    return n


class Lexed:
    """The string literals and comments of a file, for lookups by offset."""

    def __init__(self, src: str, lang: Language) -> None:
        tokens: list[Lit | tuple[int, int]] = []
        lex(src, 0, lang, tokens)
        self.literals = {t.start: t for t in tokens if isinstance(t, Lit)}
        spans = sorted((t.start, t.end) if isinstance(t, Lit) else t for t in tokens)
        self.starts = [s for s, _ in spans]
        self.spans = spans
        self.src = src

    def in_token(self, pos: int) -> bool:
        k = bisect_right(self.starts, pos) - 1
        return k >= 0 and self.spans[k][0] <= pos < self.spans[k][1]

    def literal_around(self, a: int, b: int) -> Lit | None:
        """The string literal whose content holds the offsets a..b, if any."""
        for lit in self.literals.values():
            if lit.content_start <= a and b <= lit.content_end:
                return lit
        return None
