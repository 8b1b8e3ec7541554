"""The region model every language shares: what a region spec names, where a located region
sits in its file, the errors, and the table of syntax a language family fills in
(`dart.py`, `python.py`, `js.py`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Language = Literal["dart", "python", "javascript", "typescript", "other"]
RegionKind = Literal["literal", "markers", "file"]

SUFFIXES: dict[str, Language] = {
    ".dart": "dart", ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
}
CODE_LANGUAGES = ("dart", "python", "javascript", "typescript")
HEX = "0123456789abcdefABCDEF"


class BadEscape(Exception):
    """An escape sequence the host language rejects (its text is the argument)."""


EscapeDecoder = Callable[[str, str, int], "tuple[str, int] | None"]
"""(escape letter, literal content, offset after the letter) -> (decoded text, offset after
the escape), or None when the letter is not one of the language's own escapes."""


@dataclass(frozen=True)
class Syntax:
    """What tells one language family's string literals, comments and declarations apart."""

    string_start: Callable[[str, int], tuple[str, str] | None]
    """(prefix, quote) when a string literal starts at the offset, else None."""
    decl_head: Callable[[str], str]
    """The regex of a declaration of the name matched by a regex, up to its '='."""
    line_comment: str = "//"
    nested_block_comments: bool = False
    regex_literals: bool = False
    """`/.../` literals exist and are skipped (JavaScript)."""
    raw_escapes: bool = True
    """A backslash still escapes the quote in a raw string (Python); Dart's raw strings have
    no escapes at all."""
    dollar_interpolation: bool = False
    """`$name` and `${...}` interpolate in non-raw strings (Dart)."""
    backslash_newline_breaks_line_string: bool = False
    strips_blank_first_line: bool = False
    """A triple-quoted string's first line of only whitespace is dropped (Dart)."""
    normalizes_crlf: bool = True
    line_continuation: bool = True
    """A backslash before a line break joins the lines (not Dart)."""
    braced_unicode: bool = True
    """`\\u{1F600}` (Dart and JavaScript, not Python)."""
    decode_escape: EscapeDecoder = field(default=lambda e, text, i: None)
    trim_calls: tuple[str, ...] = (".trim()", ".trimLeft()", ".trimStart()", ".trimRight()",
                                   ".trimEnd()")
    interp_hint: Callable[[bool], str] = field(default=lambda fstring: "")
    """How to write a literal interpolation opener (argument: in an f-string)."""


TRIM_MODES = {".trim()": "both", ".trimLeft()": "start", ".trimStart()": "start",
              ".trimRight()": "end", ".trimEnd()": "end", ".strip()": "both",
              ".lstrip()": "start", ".rstrip()": "end"}


def hex_value(text: str, i: int, count: int, seq: str) -> int:
    digits = text[i:i + count]
    if len(digits) != count or any(d not in HEX for d in digits):
        raise BadEscape(seq)
    return int(digits, 16)


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
    return SUFFIXES.get(path[dot:].lower(), "other")


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
    indent: str = ""
    """For a marker region of a YAML file whose lines share a leading indentation (a block
    scalar's content): that indentation, which belongs to the file, not to the prompt (the
    runtime value drops it; new text must keep it on every line)."""

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



YAML_SUFFIXES = (".yaml", ".yml")


def common_indent(text: str) -> str:
    """The leading whitespace every non-blank line of `text` starts with ('' if none)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return ""
    first = lines[0][:len(lines[0]) - len(lines[0].lstrip(" \t"))]
    n = len(first)
    for ln in lines[1:]:
        while n and not ln.startswith(first[:n]):
            n -= 1
    return first[:n]


def dedent(text: str, indent: str) -> str:
    """`text` with `indent` removed from the start of each line (blank lines emptied)."""
    return "\n".join(ln[len(indent):] if ln.startswith(indent) else ln.lstrip(" \t")
                     for ln in text.split("\n"))


def broken(region: Region, why: str, line: int | None = None) -> BreaksLiteralError:
    return BreaksLiteralError(f"the new text would break {region.describe()}: {why}", line)


def lines_at(region: Region, line: int) -> str:
    """`region line 6, file line 47`: a line of the region's (new) text, as the proposer's
    package numbers it and as the file does."""
    return f"region line {line}, file line {region.file_line(line)}"


def region_line(text: str, offset: int) -> int:
    return text.count("\n", 0, max(offset, 0)) + 1
