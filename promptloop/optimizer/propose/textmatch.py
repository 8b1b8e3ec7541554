"""Text normalisation for literal matching: folding, de-obfuscation, quoted spans, hidden text.

A proposer that wants a task's literal in the prompt can re-case it, write it in full-width
letters or look-alike Cyrillic, hide a zero-width space or markdown inside it, space its letters
out, or quote a task's whole input. `variants` gives the texts to search so all of these still
match; `quoted_spans` finds text between quotes of any kind; `hidden_characters` names the
invisible or control characters an added line must not carry.
"""

from __future__ import annotations

import re
import unicodedata

# Latin look-alikes from Cyrillic and Greek (lower case; text is lower-cased first).
_HOMOGLYPHS = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
    "ԛ": "q", "ԝ": "w", "ɡ": "g", "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v",
    "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
})
_ALLOWED_FORMAT = {"\u200c", "\u200d"}  # ZWNJ and ZWJ: Persian/Indic text and emoji sequences
_WORD_RE = re.compile(r"[^\W_]+")
_MARKUP_RE = re.compile(r"[*_~]+|<(?!!--)/?[A-Za-z][^>\n]{0,40}>")
_SPACED_RE = re.compile(r"(?<![^\W_])(?:[^\W_][ .·\-_*]){2,}[^\W_](?![^\W_])")
_NOT_WORD = r"(?<![^\W_])"
_NOT_WORD_AFTER = r"(?![^\W_])"
_QUOTE_RES = tuple(re.compile(p) for p in (
    r'"([^"\n]+)"',
    r"[“„”]([^“”„\n]+)[”“]",
    r"«([^«»\n]+)»", r"»([^«»\n]+)«", r"‹([^‹›\n]+)›", r"›([^‹›\n]+)‹",
    r"「([^「」\n]+)」", r"『([^『』\n]+)』",
    r"`+([^`\n]+)`+",
    # single quotes double as apostrophes: an opening quote follows no letter, a closing
    # one precedes none, and an apostrophe between two letters stays inside ("don't").
    _NOT_WORD + r"'((?:[^'\n]|(?<=[^\W_])'(?=[^\W_]))+)'" + _NOT_WORD_AFTER,
    _NOT_WORD + r"[‘‚]((?:[^‘’\n]|(?<=[^\W_])’(?=[^\W_]))+)[’‘]" + _NOT_WORD_AFTER,
))


def _visible(ch: str) -> bool:
    return unicodedata.category(ch) != "Cf" or ch in _ALLOWED_FORMAT


def fold(text: str) -> str:
    """Compatibility-normalised (NFKC), lower-cased, invisible format characters removed,
    Cyrillic and Greek look-alikes mapped to Latin."""
    text = unicodedata.normalize("NFKC", text)
    if not all(_visible(ch) for ch in text):
        text = "".join(ch for ch in text if _visible(ch))
    return text.lower().translate(_HOMOGLYPHS)


def _unspace(m: re.Match[str]) -> str:
    return re.sub(r"[ .·\-_*]", "", m.group(0))


def variants(text: str) -> list[str]:
    """`fold(text)` and, when different, the same with markdown emphasis and HTML tags removed
    and spaced-out letters ("o k a f o r", "o.k.a.f.o.r") joined."""
    folded = fold(text)
    bare = _SPACED_RE.sub(_unspace, _MARKUP_RE.sub("", folded))
    return [folded] if bare == folded else [folded, bare]


def words(text: str) -> list[str]:
    """Folded word runs (letters and digits, CJK included): the unit of input matching, so
    case, whitespace and punctuation do not matter."""
    return _WORD_RE.findall(fold(text))


def quoted_spans(text: str) -> list[str]:
    """Text between quotes of any kind: "..", '..', “..”, ‘..’, «..», ‹..›, 「..」, `..`."""
    return [m.group(1) for pattern in _QUOTE_RES for m in pattern.finditer(text)]


def hidden_characters(line: str) -> list[str]:
    """Names of the invisible or control characters in `line` (tab and a final CR allowed):
    zero-width spaces, bidirectional overrides and carriage returns can make a reviewer read
    something other than what the model reads."""
    body = line[:-1] if line.endswith("\r") else line
    found = []
    for ch in body:
        cat = unicodedata.category(ch)
        if (cat == "Cc" and ch != "\t") or (cat == "Cf" and ch not in _ALLOWED_FORMAT):
            found.append(unicodedata.name(ch, f"U+{ord(ch):04X}"))
    return list(dict.fromkeys(found))
