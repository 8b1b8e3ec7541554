"""The eval-literal index: strings a proposer must not paste from the eval set into a prompt.

A patch that adds "Nguyen" or "ticket 4471" to the prompt passes the suite by memorising it,
not by improving the agent. The index collects what is distinctive in task inputs and grader
configs (paths, file names, URLs, markers, ids, numbers, phrases, rare words, CJK runs) and
leaves out whatever the base prompt or the manual already says, plus everyday English words
(`common_words`), so a general rule still passes. A quoted string that is a whole task input, or
holds four consecutive words of one, counts whatever its words' frequency ("hi there").
Matching is case-insensitive, word-bounded and sees through the tricks in `textmatch`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.propose.common_words import (
    COMMON_ZIPF,
    CONFIG_NAME_ZIPF,
    RARE_ZIPF,
    STOPWORDS,
    zipf,
)
from promptloop.optimizer.propose.textmatch import fold, quoted_spans, variants, words

LiteralKind = Literal["path", "file_name", "url", "marker", "phrase", "word", "cjk", "input",
                      "input_run"]

_TOKEN_RE = re.compile(r"[^\W_]+")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RE = re.compile(f"[{_CJK}]+")
_HAS_CJK_RE = re.compile(f"[{_CJK}]")
_URL_RE = re.compile(r"(?:https?://|www\.)[^\s<>\"'`)\]]+", re.IGNORECASE)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_YEAR_RE = re.compile(r"^(19|20)\d\d$")
_SENTENCE_SPLIT_RE = re.compile(r"[.!?;:\n]+\s*|\s[-–—]\s")
_QUOTED_RE = re.compile(r"\"([^\"\n]{3,120})\"|“([^”\n]{3,120})”|「([^」\n]{2,120})」")
_FILE_NAME_RE = re.compile(r"^[\w .-]*[^\W\d_][\w .-]*\.[A-Za-z][A-Za-z0-9]{0,4}$")
_EDGE_PUNCT = ".,;:!?()[]{}\"'“”‘’<>*`«»$€£¥"
_SUFFIXES = ("'s", "ies", "es", "s", "ing", "ed", "ly", "ers", "er", "est")
PHRASE_N = 3
INPUT_RUN_N = 4
MIN_WORD_LEN = 4
MIN_CONFIG_WORD_LEN = 4
MIN_MARKER_LEN = 4
CJK_WINDOW = 4


@dataclass(frozen=True)
class EvalLiteral:
    text: str
    """The literal as written in the eval set."""
    kind: LiteralKind
    sources: tuple[str, ...]
    """Where it came from: "<task id> (input)" or "<task id> (grader <name>.<key>)"."""

    def describe(self) -> str:
        more = f" and {len(self.sources) - 1} more" if len(self.sources) > 1 else ""
        text = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        what = {"input": "quoted task input", "input_run": "quoted run of a task input"}
        return f"{what.get(self.kind, self.kind)} {text!r} from {self.sources[0]}{more}"


def tokens(text: str) -> list[str]:
    """Folded word tokens (letters/digits, no CJK), the unit of word and phrase matching."""
    return [t for t in _TOKEN_RE.findall(fold(text)) if not _HAS_CJK_RE.search(t)]


def _stems(word: str) -> set[str]:
    """The word and its naive de-inflections ("booked" -> "book", "bakes" -> "bake")."""
    out = {word}
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            out.update({base, base + "e"})
            if suffix == "ies":
                out.add(base + "y")
            if len(base) >= 4 and base[-1] == base[-2]:
                out.add(base[:-1])  # "stopped" -> "stop"
    return out


def _frequency(word: str) -> float:
    """The highest Zipf frequency of the word and its de-inflections."""
    return max(zipf(s) for s in _stems(word.lower()))


@dataclass
class _Builder:
    excluded_text: str
    excluded_stems: set[str] = field(default_factory=set)
    excluded_token_text: str = ""
    excluded_words_text: str = ""
    found: dict[tuple[LiteralKind, str], tuple[str, list[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        toks = tokens(self.excluded_text)
        self.excluded_stems = {s for t in toks for s in _stems(t)}
        self.excluded_token_text = " " + " ".join(toks) + " "
        self.excluded_words_text = " " + " ".join(words(self.excluded_text)) + " "
        self.excluded_text = fold(self.excluded_text)

    def ordinary(self, word: str, threshold: float = COMMON_ZIPF) -> bool:
        """A word the base prompt or manual already uses, or one whose frequency (or its
        de-inflected form's: "Sundays") reaches `threshold`."""
        return _frequency(word) >= threshold or bool(_stems(word.lower()) & self.excluded_stems)

    def add(self, kind: LiteralKind, text: str, source: str) -> None:
        text = text.strip()
        if not text:
            return
        if kind == "input":  # a whole task input is never exempt
            key = " ".join(words(text))
            if not key:
                return
        elif kind == "input_run":
            key = text
            if f" {key} " in self.excluded_words_text:
                return
        elif kind in ("word", "phrase"):
            key = " ".join(tokens(text))
            if not key or f" {key} " in self.excluded_token_text:
                return
        else:
            key = fold(text)
            if key in self.excluded_text:
                return
        entry = self.found.setdefault((kind, key), (text, []))
        if source not in entry[1]:
            entry[1].append(source)

    def add_proper_nouns(self, text: str, source: str) -> None:
        """Capitalised words not opening a sentence ("dinner at Osteria Lupa") and all-caps
        words of five letters or more ("TODO" is vocabulary), when not everyday English.
        Lower-case words only count through phrases: a general rule must pass."""
        mid_capitals: list[str] = []
        for sentence in _SENTENCE_SPLIT_RE.split(text):
            for i, m in enumerate(_TOKEN_RE.finditer(sentence)):
                word = m.group(0)
                if not word.isalpha() or _HAS_CJK_RE.search(word) or not word[0].isupper():
                    continue
                if i > 0 or (word.isupper() and len(word) >= MIN_CONFIG_WORD_LEN):
                    mid_capitals.append(word)
        for word in mid_capitals:
            min_len = MIN_WORD_LEN + 1 if word.isupper() else MIN_WORD_LEN
            if len(word) >= min_len and not self.ordinary(word):
                self.add("word", word, source)

    def add_config_words(self, value: str, source: str) -> None:
        """Only distinctive config words count on their own: a name that is not everyday
        English ("Nguyen"), or a lone lower-case value that is rare ("sourdough"). A common
        word a grader happens to check ("deadline") must not refuse a general rule."""
        found = [w for w in _TOKEN_RE.findall(value) if not _HAS_CJK_RE.search(w)]
        for word in found:
            if not word.isalpha() or len(word) < MIN_CONFIG_WORD_LEN:
                continue
            if ((word[0].isupper() and not self.ordinary(word, CONFIG_NAME_ZIPF))
                    or (len(found) == 1 and not self.ordinary(word, RARE_ZIPF))):
                self.add("word", word, source)

    def add_config_phrase(self, value: str, source: str) -> None:
        """A config phrase counts when it has a word that is not everyday English ("biscuit
        tin") or three content words; "raw input" is vocabulary, not a marker."""
        toks = tokens(value)
        content = [w for w in toks if w not in STOPWORDS]
        if len(content) >= 3 or any(w.isalpha() and _frequency(w) < COMMON_ZIPF
                                    for w in content):
            self.add_phrase(toks, source)

    def add_phrase(self, toks: list[str], source: str) -> None:
        """A phrase needs two words outside STOPWORDS, one of them alphabetic (not only
        numbers, which markers cover)."""
        content = [w for w in toks if w not in STOPWORDS]
        if len(toks) >= 2 and len(content) >= 2 and any(
                w.isalpha() and len(w) >= 3 for w in content):
            self.add("phrase", " ".join(toks), source)

    def add_markers(self, text: str, source: str) -> None:
        """URLs, <!-- --> comments, paths, file names, ids and numbers found in `text`."""
        for m in _COMMENT_RE.finditer(text):
            self.add("marker", m.group(0), source)
        for m in _URL_RE.finditer(text):
            url = m.group(0).rstrip(_EDGE_PUNCT)
            self.add("url", re.sub(r"^https?://", "", url, flags=re.IGNORECASE), source)
        rest = _URL_RE.sub(" ", _COMMENT_RE.sub(" ", text))
        for raw in rest.split():
            self.add_token(raw.strip(_EDGE_PUNCT), source)

    def add_token(self, tok: str, source: str) -> None:
        """Classify one whitespace-free token; "and/or" is no path, "/Areas/x" or "a/b.md" are."""
        if not tok or (_HAS_CJK_RE.search(tok) and "/" not in tok and "." not in tok):
            return
        name = tok.rstrip("/").rsplit("/", 1)[-1]
        is_path = "/" in tok and re.search(r"[^\W\d_]{2,}", tok) is not None and (
            tok.startswith(("/", "~")) or tok.count("/") >= 2
            or _FILE_NAME_RE.match(name) is not None)
        if is_path:
            path = tok.lstrip("/~")
            self.add("path", path, source)
            if _FILE_NAME_RE.match(name):
                self.add("file_name", name, source)
            for part in path.split("/"):
                if any(c.isdigit() for c in part) and len(part) >= MIN_MARKER_LEN:
                    self.add("marker", part, source)
        elif _FILE_NAME_RE.match(tok) and not tok.lower().startswith(("e.g", "i.e")):
            self.add("file_name", tok, source)
        elif any(c.isdigit() for c in tok):
            if len(tok) >= MIN_MARKER_LEN and not _YEAR_RE.match(tok):
                self.add("marker", tok, source)
        elif ("::" in tok or "#" in tok or "@" in tok or "_" in tok.strip("_")
              or re.search(r"[a-z][A-Z]", tok)) and len(tok) >= MIN_MARKER_LEN:
            self.add("marker", tok, source)

    def add_cjk(self, text: str, source: str) -> None:
        for run in _CJK_RE.findall(text):
            if len(run) >= 2:
                self.add("cjk", run, source)
            for i in range(len(run) - CJK_WINDOW + 1 if len(run) > CJK_WINDOW else 0):
                self.add("cjk", run[i:i + CJK_WINDOW], source)

    def add_input(self, content: str, source: str) -> None:
        self.add("input", content, source)
        run = words(content)
        for i in range(len(run) - INPUT_RUN_N + 1):
            self.add("input_run", " ".join(run[i:i + INPUT_RUN_N]), source)
        self.add_markers(content, source)
        prose = _URL_RE.sub(" ", content)
        self.add_proper_nouns(prose, source)
        self.add_cjk(content, source)
        for m in _QUOTED_RE.finditer(prose):
            quoted = next(g for g in m.groups() if g)
            self.add_phrase(tokens(quoted), source)
        for sentence in _SENTENCE_SPLIT_RE.split(prose):
            toks = tokens(sentence)
            for i in range(len(toks) - PHRASE_N + 1):
                self.add_phrase(toks[i:i + PHRASE_N], source)

    def add_config_string(self, value: str, source: str) -> None:
        value = value.strip()
        if not value:
            return
        if "/" in value:  # a path from the config, possibly with spaces in its names
            path = value.lstrip("/~")
            self.add("path", path, source)
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if _FILE_NAME_RE.match(name):
                self.add("file_name", name, source)
        else:
            self.add_markers(value, source)
        if "<!--" in value or "::" in value:
            self.add("marker", value, source)
        elif (any(c.isdigit() for c in value) and len(value) >= MIN_MARKER_LEN
              and not _YEAR_RE.match(value)):
            self.add("marker", value, source)
        if "/" not in value:
            self.add_config_words(value, source)
            self.add_config_phrase(value, source)
        self.add_cjk(value, source)


def _config_strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _config_strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _config_strings(v, key)


@dataclass(frozen=True)
class LiteralIndex:
    """Distinctive eval-set strings; `find` returns those present in a text."""

    literals: tuple[EvalLiteral, ...]
    _token_keys: dict[str, EvalLiteral] = field(repr=False)
    _patterns: tuple[tuple[re.Pattern[str], EvalLiteral], ...] = field(repr=False)
    _max_n: int = 1
    _inputs: dict[str, EvalLiteral] = field(default_factory=dict, repr=False)
    """Whole task inputs by their `words`, matched against quoted spans."""
    _runs: dict[str, EvalLiteral] = field(default_factory=dict, repr=False)
    """INPUT_RUN_N-word runs of task inputs, matched inside quoted spans."""

    @classmethod
    def from_literals(cls, literals: Iterable[EvalLiteral]) -> LiteralIndex:
        lits = tuple(literals)
        token_keys: dict[str, EvalLiteral] = {}
        inputs: dict[str, EvalLiteral] = {}
        runs: dict[str, EvalLiteral] = {}
        patterns: list[tuple[re.Pattern[str], EvalLiteral]] = []
        for lit in lits:
            if lit.kind in ("word", "phrase"):
                token_keys[" ".join(tokens(lit.text))] = lit
            elif lit.kind == "input":
                inputs[" ".join(words(lit.text))] = lit
            elif lit.kind == "input_run":
                runs[" ".join(words(lit.text))] = lit
            else:
                key = re.escape(fold(lit.text))
                if lit.kind != "cjk":
                    key = (r"(?<![^\W_])" if lit.text[0].isalnum() else "") + key
                    key += r"(?![^\W_])" if lit.text[-1].isalnum() else ""
                patterns.append((re.compile(key), lit))
        max_n = max((len(k.split()) for k in token_keys), default=1)
        return cls(lits, token_keys, tuple(patterns), max_n, inputs, runs)

    def __len__(self) -> int:
        return len(self.literals)

    def _quoted(self, text: str, hits: set[int]) -> None:
        for span in quoted_spans(text):
            run = words(span)
            lit = self._inputs.get(" ".join(run))
            if lit is not None:
                hits.add(id(lit))
            for i in range(len(run) - INPUT_RUN_N + 1):
                lit = self._runs.get(" ".join(run[i:i + INPUT_RUN_N]))
                if lit is not None:
                    hits.add(id(lit))

    def find(self, text: str) -> list[EvalLiteral]:
        """Literals occurring in `text` (case-insensitive, through `variants`), each once, in
        index order; task inputs only count inside quotes."""
        hits: set[int] = set()
        for variant in variants(text):
            toks = tokens(variant)
            for n in range(1, self._max_n + 1):
                for i in range(len(toks) - n + 1):
                    lit = self._token_keys.get(" ".join(toks[i:i + n]))
                    if lit is not None:
                        hits.add(id(lit))
            for pattern, lit in self._patterns:
                if pattern.search(variant):
                    hits.add(id(lit))
            self._quoted(variant, hits)
        return [lit for lit in self.literals if id(lit) in hits]


SHAPE_KEYS: dict[str, tuple[str, ...]] = {
    "json_path": ("path",), "json_schema": ("schema",), "rubric_judge": ("show", "dimensions")}
"""Grader config keys (and their sub-keys) that name the shape of the agent's output, not an
answer: a prompt must be free to name the fields it asks for (`allergens` in
`$.allergens[*]`), so these are no eval-set literals; the expected values stay."""


def _shape_key(grader: str, key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in SHAPE_KEYS.get(grader, ()))


def build_literal_index(suites: list[Suite], base_prompt: str, manual: str) -> LiteralIndex:
    """Collect distinctive literals of every task input and grader config of `suites`."""
    b = _Builder(base_prompt + "\n" + manual)
    for suite in suites:
        for task in suite.tasks:
            spec = task.spec
            b.add_input(spec.input.content, f"{spec.id} (input)")
            if spec.input.fact_id is not None:
                b.add("marker", spec.input.fact_id, f"{spec.id} (input fact_id)")
            for grader in spec.graders:
                for key, value in _config_strings(grader.config):
                    if not _shape_key(grader.name, key):
                        b.add_config_string(value, f"{spec.id} (grader {grader.name}.{key})")
    literals = [EvalLiteral(text, kind, tuple(sources))
                for (kind, _), (text, sources) in b.found.items()]
    return LiteralIndex.from_literals(literals)
