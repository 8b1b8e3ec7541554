"""Prompt regions: a prompt that is a string literal, or the text between two marker lines,
inside a source file.

A `RegionSpec` names the file and either a variable (the string literal assigned to it) or a
begin and an end marker, or neither (the whole file). `locate` finds the region's content in
the file text; `value_of` decodes it into the string the agent receives at run time; `splice`
writes new content (in source form, as the proposer edits it) back into the file, after
`check_literal` has refused any text that would break the literal for the host language: its
closing delimiter, an escaping backslash at its end, a newline in a one-line string, a new
interpolation, an invalid escape, or one of the markers.

Supported literals: Dart triple-quoted and one-line strings, raw or not (`const`, `final`, `static
const`, typed `const String x = ...`); Python strings with any prefix (triple-quoted or not, `r`,
f-strings); JavaScript/TypeScript template literals (also `String.raw`) and quoted strings after
`const`/`let`/`var` (`export`, `: string` annotations). A trailing `.trim()` (`.strip()` in
Python) is understood. Comments and other strings are skipped, so a commented-out declaration or
one quoted inside a prompt never counts. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Literal

from agents.names import did_you_mean

Language = Literal["dart", "python", "javascript", "typescript", "other"]
RegionKind = Literal["literal", "markers", "file"]

_SUFFIXES: dict[str, Language] = {
    ".dart": "dart", ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
}
_CODE_LANGUAGES = ("dart", "python", "javascript", "typescript")
_PY_STRING_RE = re.compile(r"([rRbBuUfF]{0,2})(\"\"\"|'''|\"|')")
_DART_STRING_RE = re.compile(r"(r?)(\"\"\"|'''|\"|')")
_IDENT_RE = re.compile(r"[A-Za-z_$][\w$]*")
_DART_INTERP_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JS_REGEX_BEFORE = set("(,=:[!&|?{};+-*%<>~^")
_JS_REGEX_WORDS = {"return", "typeof", "case", "do", "else", "in", "of", "new", "delete",
                   "void", "throw", "yield", "await", "instanceof"}
_TRIM_CALLS = {".trim()": "both", ".trimLeft()": "start", ".trimStart()": "start",
               ".trimRight()": "end", ".trimEnd()": "end", ".strip()": "both",
               ".lstrip()": "start", ".rstrip()": "end"}
_HEX = "0123456789abcdefABCDEF"


class RegionError(ValueError):
    """A region that cannot be found, is ambiguous, is not a supported literal, or new text
    that would break it. The message names the file and the variable or markers."""


class BreaksLiteralError(RegionError):
    """New text that would break the region for its host language (`check_literal`)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        """The line of the new text (1-based, region-relative) where it breaks, if known."""


def language_of(path: str) -> Language:
    """The host language of `path`, from its suffix ("other" for Markdown, YAML...)."""
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:]:
        return "other"
    return _SUFFIXES.get(path[dot:].lower(), "other")


@dataclass(frozen=True)
class RegionSpec:
    """Where a prompt lives: the whole file `path`, the string literal assigned to `variable`
    in it, or the lines between the lines holding `begin` and `end`."""

    path: str
    variable: str | None = None
    begin: str | None = None
    end: str | None = None

    def __post_init__(self) -> None:
        if self.variable is not None and (self.begin is not None or self.end is not None):
            raise RegionError(f"{self.path}: a prompt region is a variable or a begin/end pair "
                              f"of markers, not both (variable {self.variable!r})")
        if (self.begin is None) != (self.end is None):
            raise RegionError(f"{self.path}: a marker region needs both begin and end "
                              f"(got begin={self.begin!r}, end={self.end!r})")
        for name, value in (("variable", self.variable), ("begin", self.begin),
                            ("end", self.end)):
            if value is not None and (not value.strip() or "\n" in value):
                raise RegionError(f"{self.path}: {name} must be non-empty text on one line, "
                                  f"got {value!r}")

    @property
    def kind(self) -> RegionKind:
        if self.variable is not None:
            return "literal"
        return "markers" if self.begin is not None else "file"

    def name(self) -> str:
        """The variable or the markers, as messages name them."""
        if self.variable is not None:
            return self.variable
        if self.begin is not None:
            return f"markers {self.begin!r} ... {self.end!r}"
        return "the whole file"


@dataclass(frozen=True)
class Region:
    """Where a region's content sits in its file, and how it is delimited there."""

    spec: RegionSpec
    start: int
    """Offset of the content's first character (just after the opener or the begin line)."""
    end: int
    """Offset just after the content (the closer or the end line starts here)."""
    start_line: int
    end_line: int
    """1-based file lines the content spans (end_line < start_line for empty marker content)."""
    text: str
    """The content as written in the source, between the delimiters."""
    opener: str
    """e.g. '\"\"\"', "'''", '`', 'r\"\"\"', 'String.raw`'; '' for markers and whole files."""
    closer: str
    language: Language
    raw: bool = False
    fstring: bool = False
    trim: str = ""
    """'both', 'start' or 'end' when the literal is followed by a trim call; '' otherwise."""
    enclosing: tuple[str, str, bool, bool] | None = field(default=None, compare=False)
    """For a marker region inside a string literal: that literal's (opener quote, closer,
    raw, fstring), so new text is checked against it too."""

    @property
    def path(self) -> str:
        return self.spec.path

    @property
    def kind(self) -> RegionKind:
        return self.spec.kind

    def _what(self) -> str:
        quote = self.closer
        if quote == "`":
            return "raw template literal" if self.raw else "template literal"
        if len(quote) == 3:
            return "raw triple-quoted string" if self.raw else "triple-quoted string"
        return "raw string literal" if self.raw else "string literal"

    def lines(self) -> str:
        if self.end_line < self.start_line:
            return f"empty, after line {self.end_line}"
        if self.end_line == self.start_line:
            return f"line {self.start_line}"
        return f"lines {self.start_line}-{self.end_line}"

    def describe(self, *, with_path: bool = True) -> str:
        """'template literal SYSTEM_PROMPT in agent/prompt.js (lines 4-31)'; without the path
        ('template literal SYSTEM_PROMPT (lines 4-31)') for a trial request's `region`."""
        where = f" in {self.path}" if with_path else ""
        if self.kind == "file":
            return f"the whole file {self.path}" if with_path else "the whole file"
        if self.kind == "markers":
            return (f"the region between {self.spec.begin!r} and {self.spec.end!r}{where} "
                    f"({self.lines()})")
        return f"{self._what()} {self.spec.variable}{where} ({self.lines()})"

    def file_line(self, region_line: int) -> int:
        """The file line of the region's line `region_line` (both 1-based)."""
        return self.start_line + region_line - 1


# --- lexing ------------------------------------------------------------------------------


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


def _string_start(src: str, i: int, lang: Language) -> tuple[str, str] | None:
    """(prefix, quote) when a string literal starts at `i`."""
    if lang in ("javascript", "typescript"):
        c = src[i]
        return ("", c) if c in "'\"`" else None
    m = (_PY_STRING_RE if lang == "python" else _DART_STRING_RE).match(src, i)
    if m is None:
        return None
    prefix = m.group(1)
    if lang == "python" and (len(set(prefix.lower())) != len(prefix)
                             or prefix.lower() in ("ub", "bu", "uf", "fu", "ur", "ru", "bf",
                                                   "fb")):
        return None
    return prefix, m.group(2)


def _body(src: str, j: int, quote: str, raw: bool, fstring: bool, lang: Language) -> _Body:
    """Scan a literal's content from `j` to its closer; raises `_Unterminated`."""
    n = len(src)
    single_line = len(quote) == 1 and quote != "`"
    escapes = not (lang == "dart" and raw)
    dart_interp = lang == "dart" and not raw
    out = _Body(-1, -1)
    while j < n:
        c = src[j]
        if c == "\\" and escapes:
            if single_line and j + 1 < n and src[j + 1] == "\n" and lang == "dart":
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
        if dart_interp and c == "$":
            if src.startswith("${", j):
                k = _lex(src, j + 2, lang, None, nested=True)
                out.interps.append((j, k))
                j = k
                continue
            m = _DART_INTERP_NAME_RE.match(src, j + 1)
            if m is not None:
                out.interps.append((j, m.end()))
                j = m.end()
                continue
            out.bad.append((j, "a '$' not followed by a name or '{' is an error in a Dart "
                               "string; write '\\$'"))
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


def _skip_regex(src: str, i: int) -> int:
    """End of a JS regex literal starting at `i` ('/'), or i + 1 when it is not one."""
    j, in_class, n = i + 1, False, len(src)
    while j < n and src[j] != "\n":
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            j += 1
            while j < n and (src[j].isalnum()):
                j += 1
            return j
        j += 1
    return i + 1


def _lex(src: str, i: int, lang: Language, tokens: list[_Lit | tuple[int, int]] | None,
         *, nested: bool = False) -> int:
    """Scan code from `i`. Top level: record string literals (`_Lit`) and comments (spans) in
    `tokens` and return len(src). Nested (an interpolation): return the offset after its
    closing brace (len(src) when there is none)."""
    n, depth = len(src), 0
    prev, prev_word = "", ""
    js = lang in ("javascript", "typescript")
    while i < n:
        c = src[i]
        if (lang == "python" and c == "#") or (lang != "python" and src.startswith("//", i)):
            k = src.find("\n", i)
            k = n if k < 0 else k
            if tokens is not None:
                tokens.append((i, k))
            i = k
            continue
        if lang != "python" and src.startswith("/*", i):
            k, level = i + 2, 1
            while k < n and level:
                if src.startswith("*/", k):
                    level, k = level - 1, k + 2
                elif lang == "dart" and src.startswith("/*", k):
                    level, k = level + 1, k + 2
                else:
                    k += 1
            if tokens is not None:
                tokens.append((i, k))
            i = k
            continue
        start = _string_start(src, i, lang) if (c in "'\"`" or c.isalpha()) else None
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
        if js and c == "/" and (prev == "" or prev in _JS_REGEX_BEFORE
                                or prev_word in _JS_REGEX_WORDS):
            i, prev, prev_word = _skip_regex(src, i), '"', ""
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


class _Lexed:
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
    if lang == "python":
        head = rf"^[ \t]*(?P<name>{v})[ \t]*(?::[^=\n]*)?"
    elif lang == "dart":
        head = (r"^[ \t]*(?:(?:static|late|external|const|final|var)[ \t]+)*"
                rf"(?:[A-Za-z_]\w*(?:<[^=\n]*>)?\??[ \t]+)?(?P<name>{v})[ \t]*")
    else:
        head = (r"^[ \t]*(?:export[ \t]+)?(?:(?:const|let|var|static|readonly|public|private"
                rf"|protected|declare)[ \t]+)*(?P<name>{v})[ \t]*(?:[?!]?[ \t]*:[^=\n]*)?")
    return re.compile(head + r"=(?![=>])\s*", re.MULTILINE)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _lines_of(text: str, start: int, end: int) -> tuple[int, int]:
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
    for call, mode in _TRIM_CALLS.items():
        if text.startswith(call, i) and (lang == "python") == (call in (".strip()", ".lstrip()",
                                                                         ".rstrip()")):
            trim, i = mode, i + len(call)
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
        m = re.compile(r"(?:as[ \t]+const|satisfies[ \t]+\w+)[ \t]*").match(text, i)
        i = m.end() if m else i
    rest = text[i:i + 2]
    if (i >= n or rest[:1] in (";", ",", "\n", "\r", "}", ")") or rest == "//"
            or (lang == "python" and rest[:1] == "#") or rest == "/*"):
        return trim
    what = ("a concatenation" if rest[:1] in "+'\"`" or text[i:i + 2] in ('r"', "r'")
            else "an expression")
    raise RegionError(f"{_where(spec)} (line {_line_of(text, lit.start)}) is {what}, not one "
                      f"string literal: it goes on with {_snippet(text, i)!r}. Make the prompt "
                      "a single literal, or mark it with begin/end marker comments")


def _locate_literal(spec: RegionSpec, text: str, lang: Language) -> Region:
    assert spec.variable is not None
    if lang not in _CODE_LANGUAGES:
        raise RegionError(f"{_where(spec)}: string literals are found by variable only in "
                          "Dart, Python, JavaScript and TypeScript files; use begin/end "
                          "markers in this file")
    lexed = _Lexed(text, lang)
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
    tag = re.compile(r"String\.raw[ \t]*").match(text, at)
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
    first, last = _lines_of(text, lit.content_start, lit.content_end)
    return Region(spec, lit.content_start, lit.content_end, first, last,
                  text[lit.content_start:lit.content_end],
                  opener_extra + lit.prefix + lit.quote, lit.quote, lang,
                  raw=lit.raw or raw_tag, fstring=lit.fstring, trim=trim)


def _marker_lines(text: str, marker: str) -> list[int]:
    """0-based indexes of the lines holding `marker` (not followed by more of a name)."""
    pattern = re.compile(re.escape(marker) + r"(?![\w-])")
    return [i for i, line in enumerate(text.split("\n")) if pattern.search(line)]


def _locate_markers(spec: RegionSpec, text: str, lang: Language) -> Region:
    assert spec.begin is not None and spec.end is not None
    where = f"{spec.path}: markers {spec.begin!r} ... {spec.end!r}"
    begins, ends = _marker_lines(text, spec.begin), _marker_lines(text, spec.end)
    for what, marker, hits in (("begin", spec.begin, begins), ("end", spec.end, ends)):
        if not hits:
            raise RegionError(f"{where}: the {what} marker {marker!r} is not found")
        if len(hits) > 1:
            raise RegionError(f"{where}: the {what} marker {marker!r} is found twice, at lines "
                              f"{', '.join(str(h + 1) for h in hits)}")
    b, e = begins[0], ends[0]
    if e <= b:
        raise RegionError(f"{where}: the end marker (line {e + 1}) does not come after the "
                          f"begin marker (line {b + 1})")
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    start, end = offsets[b + 1], offsets[e]
    enclosing = None
    if lang in _CODE_LANGUAGES:
        lit = _Lexed(text, lang).literal_around(start, end)
        if lit is not None:
            enclosing = (lit.quote, lit.quote, lit.raw, lit.fstring)
    return Region(spec, start, end, b + 2, e, text[start:end], "", "", lang,
                  enclosing=enclosing)


def locate(spec: RegionSpec, file_text: str) -> Region:
    """The region `spec` names in `file_text`; RegionError when it is not found, is found
    twice, is not one supported literal, or its literal is unterminated."""
    lang = language_of(spec.path)
    if spec.kind == "literal":
        return _locate_literal(spec, file_text, lang)
    if spec.kind == "markers":
        return _locate_markers(spec, file_text, lang)
    first, last = _lines_of(file_text, 0, len(file_text))
    return Region(spec, 0, len(file_text), first, last, file_text, "", "", lang)


# --- values ------------------------------------------------------------------------------


class _BadEscape(Exception):
    pass


def _hex(text: str, i: int, count: int, seq: str) -> int:
    digits = text[i:i + count]
    if len(digits) != count or any(d not in _HEX for d in digits):
        raise _BadEscape(seq)
    return int(digits, 16)


def _decode(text: str, lang: Language, quote: str, raw: bool, fstring: bool) -> str:
    """The runtime value of literal content `text` (interpolations left as written)."""
    if lang == "dart" and len(quote) == 3:
        m = re.match(r"[ \t]*\\?[ \t]*\r?\n", text)
        if m is not None:  # Dart drops a first line of only whitespace
            text = text[m.end():]
    if lang in ("python", "javascript", "typescript"):
        text = text.replace("\r\n", "\n")
    if raw or lang == "other":
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
        simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}
        if e in simple:
            out.append(simple[e])
        elif e == "a" and lang == "python":
            out.append("\a")
        elif e == "x":
            out.append(chr(_hex(text, i, 2, "\\x" + text[i:i + 2])))
            i += 2
        elif e == "u" and text.startswith("{", i) and lang != "python":
            close = text.find("}", i)
            digits = text[i + 1:close] if close > 0 else ""
            if not digits or any(d not in _HEX for d in digits) or int(digits, 16) > 0x10FFFF:
                raise _BadEscape("\\u" + text[i:i + 8])
            out.append(chr(int(digits, 16)))
            i = close + 1
        elif e == "u":
            out.append(chr(_hex(text, i, 4, "\\u" + text[i:i + 4])))
            i += 4
        elif lang == "python" and e == "U":
            code = _hex(text, i, 8, "\\U" + text[i:i + 8])
            if code > 0x10FFFF:
                raise _BadEscape("\\U" + text[i:i + 8])
            out.append(chr(code))
            i += 8
        elif lang == "python" and e == "N":
            close = text.find("}", i)
            if not text.startswith("{", i) or close < 0:
                raise _BadEscape("\\N" + text[i:i + 10])
            try:
                out.append(unicodedata.lookup(text[i + 1:close]))
            except KeyError:
                raise _BadEscape(text[i - 2:close + 1]) from None
            i = close + 1
        elif lang == "python" and e in "01234567":
            m = re.compile(r"[0-7]{1,3}").match(text, i - 1)
            assert m is not None
            out.append(chr(int(m.group(0), 8)))
            i = m.end()
        elif lang in ("javascript", "typescript") and e == "0" and not text[i:i + 1].isdigit():
            out.append("\0")
        elif lang in ("javascript", "typescript") and e in "0123456789":
            raise _BadEscape("\\" + e)  # legacy octal: an error in templates and strict code
        elif e == "\n" and lang != "dart":
            pass  # line continuation
        elif e == "\r" and lang != "dart":
            i += 1 if text.startswith("\n", i) else 0
        elif lang == "python" and e not in "\\'\"":
            out.append("\\" + e)  # Python keeps unknown escapes as written
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
        except _BadEscape as err:
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
        except _BadEscape:
            return region.text
    return region.text


# --- checking and splicing ---------------------------------------------------------------


def _region_line(text: str, offset: int) -> int:
    return text.count("\n", 0, max(offset, 0)) + 1


def _broken(region: Region, why: str, line: int | None = None) -> BreaksLiteralError:
    return BreaksLiteralError(f"the new text would break {region.describe()}: {why}", line)


def _check_in_literal(region: Region, new_text: str, quote: str, raw: bool,
                      fstring: bool) -> None:
    lang = region.language
    escapes = not (lang == "dart" and raw)
    single_line = len(quote) == 1 and quote != "`"
    lone_cr = re.search(r"\r(?!\n)", new_text)
    if lone_cr is not None:
        at_line = _region_line(new_text, lone_cr.start())
        raise _broken(region, "it has a carriage return that does not end a line (region line "
                      f"{at_line}); write plain line breaks", at_line)
    trailing = len(new_text) - len(new_text.rstrip("\\"))
    if escapes and trailing % 2 == 1:
        raise _broken(region, f"it ends with an odd number of backslashes ({trailing}), which "
                      f"would escape the closing {quote!r}", _region_line(new_text, len(new_text)))
    if single_line:
        for k, c in enumerate(new_text):
            if c != "\n":
                continue
            backslashes = len(new_text[:k]) - len(new_text[:k].rstrip("\\"))
            if lang == "dart" or backslashes % 2 == 0:
                raise _broken(region, "it has a line break, which a one-line string literal "
                              "cannot hold; write \\n instead of a new line",
                              _region_line(new_text, k))
    try:
        body = _body(new_text + quote, 0, quote, raw, fstring, lang)
    except _Unterminated:
        raise _broken(region, "it opens an interpolation ('${' or '{') that is never closed, "
                      f"which would swallow the closing {quote!r}") from None
    if body.content_end < len(new_text):
        at = body.content_end
        line = _region_line(new_text, at)
        if new_text.startswith(quote, at):
            raise _broken(region, f"it contains {quote!r}, the literal's closing delimiter, "
                          f"unescaped (region line {line}); escape it "
                          f"({_escape_hint(lang, quote, raw)})", line)
        raise _broken(region, f"it ends with {new_text[at:]!r}, which would run into the "
                      f"closing {quote!r} and end the literal early (region line {line}); "
                      "escape it", line)
    if body.bad:
        at, why = body.bad[0]
        line = _region_line(new_text, at)
        raise _broken(region, f"{why} (region line {line})", line)
    old = set(_interp_texts(region.text, lang, quote, raw, fstring))
    for start, end in body.interps:
        interp = new_text[start:end]
        if interp not in old:
            line = _region_line(new_text, start)
            raise _broken(region, f"it adds the interpolation {interp!r} (region line "
                          f"{line}), which the original does not "
                          "have and would run code at run time; "
                          f"{_interp_hint(lang, fstring)}", line)
    try:
        _decode(new_text, lang, quote, raw, fstring)
    except _BadEscape as err:
        try:
            _decode(region.text, lang, quote, raw, fstring)
        except _BadEscape:
            return  # the original has such escapes too: the host accepts them
        raise _broken(region, f"it has an invalid escape {err.args[0]!r}; write '\\\\' for "
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


def _interp_hint(lang: Language, fstring: bool) -> str:
    if fstring:
        return "write '{{' and '}}' for literal braces"
    if lang == "dart":
        return "write '\\$' for a literal dollar sign"
    return "write '\\${' for a literal '${'"


def check_literal(region: Region, new_text: str) -> None:
    """BreaksLiteralError (a RegionError saying what is wrong and naming the region) when
    `new_text`, in source form, would break the region for its host language, or would change
    a line outside it."""
    if region.kind == "file":
        return
    if region.kind == "markers":
        assert region.spec.begin is not None and region.spec.end is not None
        for what, marker in (("begin", region.spec.begin), ("end", region.spec.end)):
            if marker in new_text:
                line = _region_line(new_text, new_text.find(marker))
                raise _broken(region, f"it contains the {what} marker {marker!r} (region "
                              f"line {line})", line)
        if region.enclosing is not None:
            quote, _, raw, fstring = region.enclosing
            _check_in_literal(region, new_text, quote, raw, fstring)
    else:
        _check_in_literal(region, new_text, region.closer, region.raw, region.fstring)
    ends_line = region.text.endswith("\n") or region.kind == "markers"
    if ends_line and new_text and not new_text.endswith("\n"):
        after = "end marker" if region.kind == "markers" else f"closing {region.closer!r}"
        raise _broken(region, f"it drops the line break before the {after}, which would join "
                      f"the {after} to the region's last line and change file line "
                      f"{region.end_line + 1} outside the region; keep the final line break",
                      _region_line(new_text, len(new_text)))


def splice(spec: RegionSpec, file_text: str, new_text: str) -> str:
    """`file_text` with only the region's content replaced by `new_text` (source form).
    RegionError when the region is not found or `new_text` would break it."""
    region = locate(spec, file_text)
    check_literal(region, new_text)
    out = file_text[:region.start] + new_text + file_text[region.end:]
    again = locate(spec, out)
    if again.start != region.start or again.text != new_text:
        raise _broken(region, "after the change the region no longer ends where the new text "
                      "does")
    return out


def edited_region_text(spec: RegionSpec, old_file: str, new_file: str) -> str:
    """The region's new text when `new_file` is `old_file` with only the region's content
    changed (an external proposer edits the whole file). RegionError when anything outside
    changed; BreaksLiteralError when the new content would break the literal."""
    old = locate(spec, old_file)
    prefix, suffix = old_file[:old.start], old_file[old.end:]
    if (len(new_file) < len(prefix) + len(suffix) or not new_file.startswith(prefix)
            or not new_file.endswith(suffix)):
        raise RegionError(f"the edit changes {spec.path} outside {old.describe()}; only the "
                          "region's text may change")
    new_text = new_file[len(prefix):len(new_file) - len(suffix)]
    splice(spec, old_file, new_text)
    return new_text
