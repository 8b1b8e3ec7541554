"""String literals in code, for every language family: the lexer (literals, comments and
interpolations, told apart by each language's `Syntax`), finding the literal assigned to a
variable, its runtime value, and the check that new content keeps it one valid literal. The
language-specific rules live in `dart.py`, `python.py` and `js.py`. Pure: no I/O."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from agents.names import did_you_mean
from optimizer.core.regions import dart, js, python
from optimizer.core.regions.model import (
    CODE_LANGUAGES,
    HEX,
    TRIM_MODES,
    BadEscape,
    Language,
    Region,
    RegionError,
    RegionSpec,
    Syntax,
    broken,
    hex_value,
    region_line,
)

_IDENT_RE = re.compile(r"[A-Za-z_$][\w$]*")
_SYNTAX: dict[str, Syntax] = {"dart": dart.SYNTAX, "python": python.SYNTAX,
                              "javascript": js.SYNTAX, "typescript": js.SYNTAX}


def syntax_of(lang: Language) -> Syntax:
    """The syntax table of a code language (KeyError for "other")."""
    return _SYNTAX[lang]


@dataclass(frozen=True)
class _Lit:
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
class _Body:
    content_end: int
    end: int
    interps: list[tuple[int, int]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)
    """(offset, what is wrong) of text the host language rejects: a Dart '$' that starts no
    interpolation, a single '}' in an f-string."""


class _Unterminated(Exception):
    def __init__(self, at: int) -> None:
        super().__init__(at)
        self.at = at


def _body(src: str, j: int, quote: str, raw: bool, fstring: bool, lang: Language) -> _Body:
    """Scan a literal's content from `j` to its closer; raises `_Unterminated`."""
    n = len(src)
    syntax = syntax_of(lang)
    single_line = len(quote) == 1 and quote != "`"
    escapes = syntax.raw_escapes or not raw
    dollar = syntax.dollar_interpolation and not raw
    out = _Body(-1, -1)
    while j < n:
        c = src[j]
        if c == "\\" and escapes:
            if (single_line and j + 1 < n and src[j + 1] == "\n"
                    and syntax.backslash_newline_breaks_line_string):
                raise _Unterminated(j + 1)
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
            raise _Unterminated(j)
        if quote == "`" and src.startswith("${", j):
            k = _lex(src, j + 2, lang, None, nested=True)
            out.interps.append((j, k))
            j = k
            continue
        if dollar and c == "$":
            if src.startswith("${", j):
                k = _lex(src, j + 2, lang, None, nested=True)
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
            k = _lex(src, j + 1, lang, None, nested=True)
            out.interps.append((j, k))
            j = k
            continue
        j += 1
    raise _Unterminated(n)


def _lex(src: str, i: int, lang: Language, tokens: list[_Lit | tuple[int, int]] | None,
         *, nested: bool = False) -> int:
    """Scan code from `i`. Top level: record string literals (`_Lit`) and comments (spans) in
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
                body = _body(src, j, quote, raw, fstring, lang)
                lit = _Lit(i, j, body.content_end, body.end, prefix, quote, raw, fstring)
            except _Unterminated as err:
                stop = err.at if (len(quote) == 1 and quote != "`" and err.at < n) else n
                lit = _Lit(i, j, stop, stop, prefix, quote, raw, fstring, terminated=False)
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
        tokens: list[_Lit | tuple[int, int]] = []
        _lex(src, 0, lang, tokens)
        self.literals = {t.start: t for t in tokens if isinstance(t, _Lit)}
        spans = sorted((t.start, t.end) if isinstance(t, _Lit) else t for t in tokens)
        self.starts = [s for s, _ in spans]
        self.spans = spans
        self.src = src

    def in_token(self, pos: int) -> bool:
        k = bisect_right(self.starts, pos) - 1
        return k >= 0 and self.spans[k][0] <= pos < self.spans[k][1]

    def literal_around(self, a: int, b: int) -> _Lit | None:
        """The string literal whose content holds the offsets a..b, if any."""
        for lit in self.literals.values():
            if lit.content_start <= a and b <= lit.content_end:
                return lit
        return None


# --- locating ----------------------------------------------------------------------------


def _decl_re(lang: Language, v: str) -> re.Pattern[str]:
    """A declaration (or assignment) of the name matched by regex `v` at the start of a line,
    up to its value."""
    return re.compile(syntax_of(lang).decl_head(v) + r"=(?![=>])\s*", re.MULTILINE)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def lines_of(text: str, start: int, end: int) -> tuple[int, int]:
    first = _line_of(text, start)
    last = _line_of(text, end - 1) if end > start else first
    return first, last


def _where(spec: RegionSpec) -> str:
    return f"{spec.path}: variable {spec.variable!r}"


def _snippet(text: str, at: int) -> str:
    line = text[at:text.find("\n", at) if "\n" in text[at:] else len(text)]
    return line.strip()[:60] or "(end of line)"


def _after_literal(spec: RegionSpec, text: str, lit: _Lit, paren: bool,
                   lang: Language) -> str:
    """The trim mode of what follows the literal; RegionError for concatenations and calls."""
    i, n = lit.end, len(text)
    trim = ""
    syntax = syntax_of(lang)
    for call in syntax.trim_calls:
        if text.startswith(call, i):
            trim, i = TRIM_MODES[call], i + len(call)
            break
    blanks = " \t\r\n" if paren else " \t"
    while i < n and text[i] in blanks:
        i += 1
    if paren:
        if text.startswith(")", i):
            i += 1
            while i < n and text[i] in " \t":
                i += 1
        else:
            raise RegionError(f"{_where(spec)} (line {_line_of(text, lit.start)}) is not one "
                              "string literal: the parentheses hold more (a concatenation?): "
                              f"{_snippet(text, i)!r}")
    if lang == "typescript":
        m = js.TS_SUFFIX.match(text, i)
        i = m.end() if m else i
    rest = text[i:i + 2]
    if (i >= n or rest[:1] in (";", ",", "\n", "\r", "}", ")") or rest == "//"
            or (syntax.line_comment == "#" and rest[:1] == "#") or rest == "/*"):
        return trim
    what = ("a concatenation" if rest[:1] in "+'\"`" or text[i:i + 2] in ('r"', "r'")
            else "an expression")
    raise RegionError(f"{_where(spec)} (line {_line_of(text, lit.start)}) is {what}, not one "
                      f"string literal: it goes on with {_snippet(text, i)!r}. Make the prompt "
                      "a single literal, or mark it with begin/end marker comments")


def locate_literal(spec: RegionSpec, text: str, lang: Language) -> Region:
    assert spec.variable is not None
    if lang not in CODE_LANGUAGES:
        raise RegionError(f"{_where(spec)}: string literals are found by variable only in "
                          "Dart, Python, JavaScript and TypeScript files; use begin/end "
                          "markers in this file")
    lexed = Lexed(text, lang)
    found = [m for m in _decl_re(lang, re.escape(spec.variable)).finditer(text)
             if not lexed.in_token(m.start("name"))]
    if not found:
        names = {m.group("name") for m in _decl_re(lang, r"[A-Za-z_$][\w$]*").finditer(text)
                 if not lexed.in_token(m.start("name"))}
        hint = did_you_mean(spec.variable, names)
        raise RegionError(f"{_where(spec)} is not found: no declaration "
                          f"'{spec.variable} = <string literal>' outside comments and strings."
                          f"{hint}")
    if len(found) > 1:
        lines = ", ".join(str(_line_of(text, m.start("name"))) for m in found)
        raise RegionError(f"{_where(spec)} is found twice: it is assigned at lines {lines}; "
                          "a prompt region must be declared once")
    m = found[0]
    line = _line_of(text, m.start("name"))
    at, paren = m.end(), False
    if text.startswith("(", at):
        at, paren = at + 1, True
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
    opener_extra, raw_tag = "", False
    tag = js.RAW_TAG.match(text, at)
    if lang in ("javascript", "typescript") and tag is not None:
        opener_extra, raw_tag, at = text[at:tag.end()], True, tag.end()
    lit = lexed.literals.get(at)
    if lit is None or (raw_tag and lit.quote != "`"):
        raise RegionError(f"{_where(spec)} (line {line}) is not assigned a supported string "
                          f"literal: it is assigned {_snippet(text, at)!r}")
    if not lit.terminated:
        until = "the end of the line" if lit.end < len(text) else "the end of the file"
        raise RegionError(f"{_where(spec)} (line {line}): its literal opened with "
                          f"{lit.prefix + lit.quote!r} is unterminated (no closing "
                          f"{lit.quote!r} before {until})")
    if lang == "python" and "b" in lit.prefix.lower():
        raise RegionError(f"{_where(spec)} (line {line}) is a bytes literal, not a text prompt")
    trim = _after_literal(spec, text, lit, paren, lang)
    first, last = lines_of(text, lit.content_start, lit.content_end)
    return Region(spec, lit.content_start, lit.content_end, first, last,
                  text[lit.content_start:lit.content_end],
                  opener_extra + lit.prefix + lit.quote, lit.quote, lang,
                  raw=lit.raw or raw_tag, fstring=lit.fstring, trim=trim)



# --- values ------------------------------------------------------------------------------


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}


def _decode(text: str, lang: Language, quote: str, raw: bool, fstring: bool) -> str:
    """The runtime value of literal content `text` (interpolations left as written)."""
    if lang == "other":
        return text
    syntax = syntax_of(lang)
    if syntax.strips_blank_first_line and len(quote) == 3:
        m = re.match(r"[ \t]*\\?[ \t]*\r?\n", text)
        if m is not None:  # Dart drops a first line of only whitespace
            text = text[m.end():]
    if syntax.normalizes_crlf:
        text = text.replace("\r\n", "\n")
    if raw:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    interp_spans = _interp_spans(text, lang, quote, raw, fstring)
    while i < n:
        if i in interp_spans:
            end = interp_spans[i]
            out.append(text[i:end])
            i = end
            continue
        c = text[i]
        if fstring and text.startswith(("{{", "}}"), i):
            out.append(c)
            i += 2
            continue
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        i += 2
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
        elif e == "x":
            out.append(chr(hex_value(text, i, 2, "\\x" + text[i:i + 2])))
            i += 2
        elif e == "u" and text.startswith("{", i) and syntax.braced_unicode:
            close = text.find("}", i)
            digits = text[i + 1:close] if close > 0 else ""
            if not digits or any(d not in HEX for d in digits) or int(digits, 16) > 0x10FFFF:
                raise BadEscape("\\u" + text[i:i + 8])
            out.append(chr(int(digits, 16)))
            i = close + 1
        elif e == "u":
            out.append(chr(hex_value(text, i, 4, "\\u" + text[i:i + 4])))
            i += 4
        elif (own := syntax.decode_escape(e, text, i)) is not None:
            decoded, i = own
            out.append(decoded)
        elif e == "\n" and syntax.line_continuation:
            pass  # line continuation
        elif e == "\r" and syntax.line_continuation:
            i += 1 if text.startswith("\n", i) else 0
        else:
            out.append(e)
    return "".join(out)


def _interp_spans(text: str, lang: Language, quote: str, raw: bool,
                  fstring: bool) -> dict[int, int]:
    """start -> end of each interpolation in literal content `text`."""
    try:
        body = _body(text + quote, 0, quote, raw, fstring, lang)
    except _Unterminated:
        return {}
    return dict(body.interps)


def value_of(region: Region) -> str:
    """The runtime string value of the region: escapes decoded (raw strings verbatim),
    interpolations left as written, a trailing trim call applied. Marker regions and whole
    files are their text (decoded when the markers sit inside a string literal)."""
    if region.kind == "literal":
        try:
            value = _decode(region.text, region.language, region.closer, region.raw,
                            region.fstring)
        except BadEscape as err:
            raise RegionError(f"{region.describe()} has an invalid escape {err.args[0]!r}") \
                from None
        if region.trim == "both":
            return value.strip()
        if region.trim == "start":
            return value.lstrip()
        return value.rstrip() if region.trim == "end" else value
    if region.enclosing is not None:
        quote, _, raw, fstring = region.enclosing
        try:
            return _decode(region.text, region.language, quote, raw, fstring)
        except BadEscape:
            return region.text
    return region.text



# --- checking ----------------------------------------------------------------------------


def check_in_literal(region: Region, new_text: str, quote: str, raw: bool,
                      fstring: bool) -> None:
    lang = region.language
    syntax = syntax_of(lang)
    escapes = syntax.raw_escapes or not raw
    single_line = len(quote) == 1 and quote != "`"
    lone_cr = re.search(r"\r(?!\n)", new_text)
    if lone_cr is not None:
        at_line = region_line(new_text, lone_cr.start())
        raise broken(region, "it has a carriage return that does not end a line (region line "
                      f"{at_line}); write plain line breaks", at_line)
    trailing = len(new_text) - len(new_text.rstrip("\\"))
    if escapes and trailing % 2 == 1:
        raise broken(region, f"it ends with an odd number of backslashes ({trailing}), which "
                      f"would escape the closing {quote!r}", region_line(new_text, len(new_text)))
    if single_line:
        for k, c in enumerate(new_text):
            if c != "\n":
                continue
            backslashes = len(new_text[:k]) - len(new_text[:k].rstrip("\\"))
            if not syntax.line_continuation or backslashes % 2 == 0:
                raise broken(region, "it has a line break, which a one-line string literal "
                              "cannot hold; write \\n instead of a new line",
                              region_line(new_text, k))
    try:
        body = _body(new_text + quote, 0, quote, raw, fstring, lang)
    except _Unterminated:
        raise broken(region, "it opens an interpolation ('${' or '{') that is never closed, "
                      f"which would swallow the closing {quote!r}") from None
    if body.content_end < len(new_text):
        at = body.content_end
        line = region_line(new_text, at)
        if new_text.startswith(quote, at):
            raise broken(region, f"it contains {quote!r}, the literal's closing delimiter, "
                          f"unescaped (region line {line}); escape it "
                          f"({_escape_hint(lang, quote, raw)})", line)
        raise broken(region, f"it ends with {new_text[at:]!r}, which would run into the "
                      f"closing {quote!r} and end the literal early (region line {line}); "
                      "escape it", line)
    if body.bad:
        at, why = body.bad[0]
        line = region_line(new_text, at)
        raise broken(region, f"{why} (region line {line})", line)
    old = set(_interp_texts(region.text, lang, quote, raw, fstring))
    for start, end in body.interps:
        interp = new_text[start:end]
        if interp not in old:
            line = region_line(new_text, start)
            raise broken(region, f"it adds the interpolation {interp!r} (region line "
                          f"{line}), which the original does not "
                          "have and would run code at run time; "
                          f"{syntax.interp_hint(fstring)}", line)
    try:
        _decode(new_text, lang, quote, raw, fstring)
    except BadEscape as err:
        try:
            _decode(region.text, lang, quote, raw, fstring)
        except BadEscape:
            return  # the original has such escapes too: the host accepts them
        raise broken(region, f"it has an invalid escape {err.args[0]!r}; write '\\\\' for "
                      "a backslash") from None


def _interp_texts(text: str, lang: Language, quote: str, raw: bool,
                  fstring: bool) -> list[str]:
    return [text[a:b] for a, b in _interp_spans(text, lang, quote, raw, fstring).items()]


def _escape_hint(lang: Language, quote: str, raw: bool) -> str:
    if quote == "`":
        return "write \\` for a backtick"
    if raw:
        return "a raw string cannot escape it; reword the text"
    if len(quote) == 3:
        return f"write \\{quote[0]} for one of its quotes"
    return f"write \\{quote} for the quote"
