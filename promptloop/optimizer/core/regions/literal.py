"""A string literal named by its variable: finding it (`locate_literal`, with what may follow
it: a trim call, a TypeScript `as const`), its runtime value (`value_of`: escapes decoded) and
the check that new content keeps it one valid literal (`check_in_literal`). The lexing is
`lexer.py`'s, the language-specific rules `dart.py`'s, `python.py`'s and `js.py`'s. Pure: no
I/O."""

from __future__ import annotations

import re

from promptloop.agents.names import did_you_mean
from promptloop.optimizer.core.regions import js
from promptloop.optimizer.core.regions.lexer import Lexed, Lit, Unterminated, scan_body, syntax_of
from promptloop.optimizer.core.regions.model import (
    CODE_LANGUAGES,
    HEX,
    TRIM_MODES,
    BadEscape,
    Language,
    Region,
    RegionError,
    RegionSpec,
    broken,
    dedent,
    hex_value,
    lines_at,
    region_line,
)

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


def _after_literal(spec: RegionSpec, text: str, lit: Lit, paren: bool,
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
        body = scan_body(text + quote, 0, quote, raw, fstring, lang)
    except Unterminated:
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
    if region.indent:  # a YAML block's indentation is the file's, not the prompt's
        return dedent(region.text, region.indent)
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
        raise broken(region, "it has a carriage return that does not end a line ("
                      f"{lines_at(region, at_line)}); write plain line breaks", at_line)
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
        body = scan_body(new_text + quote, 0, quote, raw, fstring, lang)
    except Unterminated:
        raise broken(region, "it opens an interpolation ('${' or '{') that is never closed, "
                      f"which would swallow the closing {quote!r}") from None
    if body.content_end < len(new_text):
        at = body.content_end
        line = region_line(new_text, at)
        if new_text.startswith(quote, at):
            raise broken(region, f"it contains {quote!r}, the literal's closing delimiter, "
                          f"unescaped ({lines_at(region, line)}); escape it "
                          f"({_escape_hint(lang, quote, raw)})", line)
        raise broken(region, f"it ends with {new_text[at:]!r}, which would run into the "
                      f"closing {quote!r} and end the literal early ({lines_at(region, line)}); "
                      "escape it", line)
    if body.bad:
        at, why = body.bad[0]
        line = region_line(new_text, at)
        raise broken(region, f"{why} ({lines_at(region, line)})", line)
    old = set(_interp_texts(region.text, lang, quote, raw, fstring))
    for start, end in body.interps:
        interp = new_text[start:end]
        if interp not in old:
            line = region_line(new_text, start)
            raise broken(region, f"it adds the interpolation {interp!r} ("
                          f"{lines_at(region, line)}), which the original does not "
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


def writing_rules(region: Region) -> str | None:
    """What text inside the region must respect to keep its source file valid, in one
    sentence for the proposer's package (None for Markdown files, whole files and markers
    outside any literal): the literal's closing delimiter and, where the language
    interpolates, its interpolation opener."""
    if region.indent:
        n = len(region.indent)
        return (f"This text is the content of a YAML block in {region.path}, not a file of "
                f"its own: every line that is not blank keeps the block's indentation of {n} "
                "space(s) before its text, since a line indented less ends the block and "
                "breaks the file. A text that breaks the file is refused before any trial.")
    if region.enclosing is not None:
        quote, _, raw, fstring = region.enclosing
    elif region.kind == "literal" and region.closer:
        quote, raw, fstring = region.closer, region.raw, region.fstring
    else:
        return None
    hint = syntax_of(region.language).interp_hint(fstring)
    what = (region.describe() if region.enclosing is None else
            f"a string literal holding {region.describe()}")
    escape = _escape_hint(region.language, quote, raw)
    rules = [f"it must not contain {quote!r} unescaped ({escape})"]
    if hint and not raw:
        rules.append(f"it must not add an interpolation: {hint}")
    return (f"This text is the content of the {what}, not a file of its own: "
            + "; ".join(rules) + ". A text that breaks the literal is refused before any "
            "trial.")


def _escape_hint(lang: Language, quote: str, raw: bool) -> str:
    if quote == "`":
        return "write \\` for a backtick"
    if raw:
        return "a raw string cannot escape it; reword the text"
    if len(quote) == 3:
        return f"write \\{quote[0]} for one of its quotes"
    return f"write \\{quote} for the quote"
