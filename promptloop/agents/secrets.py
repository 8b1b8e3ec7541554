"""Secrets: the one `scrub` the providers (error messages) and promptloop's redaction
(`optimizer/core/redact.py`, every file it writes) share; the provider keys an agent's `env`
list may not name (`refuse_provider_keys`); and `keep_from_proc`, which makes promptloop's
process unreadable through /proc by other processes of the same user."""

from __future__ import annotations

import base64
import functools
import os
import re
import sys
from collections.abc import Sequence
from urllib.parse import quote

PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY",
                 "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
                 "COHERE_API_KEY", "CO_API_KEY", "TOGETHER_API_KEY", "OPENROUTER_API_KEY",
                 "DEEPSEEK_API_KEY", "XAI_API_KEY", "FIREWORKS_API_KEY", "PERPLEXITY_API_KEY",
                 "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "ANTHROPIC_AUTH_TOKEN")
"""Variables holding a model provider's credentials: an agent under evaluation reaches its
model through promptloop's gateway and never needs one."""


FROM_DOTENV: dict[str, tuple[str, str]] = {}
"""Variables set from a .env file in this process -> (that file, the value set), so an error
about a key names where the user fixes it (`optimizer/workflows/context.load_dotenv` fills it;
`dotenv_source` reads it)."""


def dotenv_source(variable: str) -> str | None:
    """The .env file `variable`'s current value came from; None when it is not one."""
    got = FROM_DOTENV.get(variable)
    return got[0] if got is not None and os.environ.get(variable) == got[1] else None


def refuse_provider_keys(env: Sequence[str], allowed: bool) -> None:
    """Raise ValueError naming the provider keys in an agent's `env` list, unless its table
    says `pass-provider-keys = true` (`allowed`; unsafe: docs/sandbox.md)."""
    named = [name for name in env if name.upper() in PROVIDER_KEYS]
    if named and not allowed:
        raise ValueError(
            f"env names the provider key{'s' if len(named) > 1 else ''} {', '.join(named)}: "
            "an agent reaches its model through promptloop's gateway (OPENAI_BASE_URL, "
            "OPENAI_API_KEY are set for it); to pass a real key anyway (unsafe: the prompt "
            "under test can send it anywhere) set `pass-provider-keys = true` in the table")


def keep_from_proc() -> bool:
    """Make this process non-dumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`): another process of
    the same user can no longer read its /proc/<pid>/environ, memory or file descriptors
    (root with CAP_SYS_PTRACE still can). Whether it was done (False on other platforms)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        return bool(libc.prctl(pr_set_dumpable, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@functools.cache
def encoded_forms(secret: str) -> tuple[str, ...]:
    """The secret as an agent that found it could smuggle it: reversed, in hex, URL-encoded,
    and in base64 (standard and URL-safe, at each of the three byte alignments it can have
    inside a longer encoded text: the characters that depend on the secret alone, at least 8
    of them)."""
    raw = secret.encode("utf-8")
    forms = {secret[::-1], raw.hex(), raw.hex().upper(), quote(secret, safe=""),
             "".join(f"%{b:02X}" for b in raw), "".join(f"%{b:02x}" for b in raw)}
    for k in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            text = enc(b"\0" * k + raw).decode("ascii").rstrip("=")
            start = 4 if k else 0  # the group holding the filler bytes
            stop = len(text) - (len(text) % 4 or 4) if (len(raw) + k) % 3 else len(text)
            core = text[start:stop]  # a last partial group depends on what follows
            if len(core) >= 8:
                forms.add(core)
            if k == 0 and len(text) >= 8:
                forms.add(text)
    forms.discard(secret)
    return tuple(sorted(forms, key=len, reverse=True))


WINDOW = 16
"""A run of this many characters of a long secret, found anywhere (any case), is a leak: the
secret spaced, split across strings or cut in halves still gives its body away. The run is
widened to as much of the secret as the text holds around it."""
_STRIDE = 8


@functools.cache
def _windows(secret: str) -> tuple[tuple[int, str], ...]:
    """(offset, lower-cased run) of `WINDOW` characters every `_STRIDE` (and the last), for a
    secret long enough that such a run cannot be ordinary text."""
    n = len(secret)
    if n < WINDOW + _STRIDE:
        return ()
    starts = sorted({*range(0, n - WINDOW + 1, _STRIDE), n - WINDOW})
    return tuple((i, secret[i:i + WINDOW].lower()) for i in starts)


@functools.cache
def _spaced(secret: str) -> re.Pattern[str]:
    """The secret, or any `WINDOW` run of it, with blanks between its characters (a key
    written "s k - t e a m ..." passed the run check, and was committed in a prompt)."""
    parts = [secret, *(run for _, run in _windows(secret))] if len(secret) >= WINDOW else [secret]
    alternatives = sorted({r"\s*".join(re.escape(c) for c in p) for p in parts},
                          key=len, reverse=True)
    return re.compile("|".join(alternatives), re.IGNORECASE)


def _spans(text: str, secrets: Sequence[str]) -> list[tuple[int, int]]:
    """Where runs of the secrets' characters (`WINDOW` or more) sit in `text`, any case."""
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: compare as is
        low = text
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        sec = secret.lower()
        for offset, run in _windows(secret):
            at = low.find(run)
            while at >= 0:
                lo, hi, i, j = at, at + WINDOW, offset, offset + WINDOW
                while lo > 0 and i > 0 and low[lo - 1] == sec[i - 1]:
                    lo, i = lo - 1, i - 1
                while hi < len(low) and j < len(sec) and low[hi] == sec[j]:
                    hi, j = hi + 1, j + 1
                spans.append((lo, hi))
                at = low.find(run, hi)
    return spans


def scrub(text: str, secrets: tuple[str | None, ...]) -> str:
    """Remove every secret, reversed, in hex, URL-encoded or in base64 too (`encoded_forms`),
    any run of `WINDOW` of its characters (spaced, split, upper-cased), and the first 12
    characters of a long one (which servers like to echo). Every whole form goes first, so a
    secret sharing its first 12 characters with another (two keys of one provider) is never
    cut by the other's prefix and left half in place."""
    known = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not known or not text:
        return text
    for secret in known:
        text = text.replace(secret, "***")
    for secret in known:
        for form in encoded_forms(secret):
            text = text.replace(form, "***")
    spans = _spans(text, known)
    if spans:
        out, pos = [], 0
        for lo, hi in sorted(spans):
            if hi <= pos:
                continue
            out.append(text[pos:max(pos, lo)] + ("***" if lo >= pos else ""))
            pos = hi
        text = "".join(out) + text[pos:]
    squeezed = "".join(text.lower().split())  # blanks out: a spaced key reads whole here
    for secret in known:
        if len(secret) >= WINDOW and (secret.lower() in squeezed or any(
                run in squeezed for _, run in _windows(secret))):
            text = _spaced(secret).sub("***", text)
    for secret in known:
        if len(secret) > 16:
            text = text.replace(secret[:12], "***")
    return text


__all__ = ["FROM_DOTENV", "PROVIDER_KEYS", "dotenv_source", "keep_from_proc",
           "refuse_provider_keys", "scrub"]
