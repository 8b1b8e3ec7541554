"""Secrets: the one `scrub` the providers (error messages) and promptloop's redaction
(`optimizer/core/redact.py`, every file it writes) share; the provider keys an agent's `env`
list may not name (`refuse_provider_keys`); and `keep_from_proc`, which makes promptloop's
process unreadable through /proc by other processes of the same user."""

from __future__ import annotations

import base64
import functools
import sys
from collections.abc import Sequence

PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY",
                 "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
                 "COHERE_API_KEY", "CO_API_KEY", "TOGETHER_API_KEY", "OPENROUTER_API_KEY",
                 "DEEPSEEK_API_KEY", "XAI_API_KEY", "FIREWORKS_API_KEY", "PERPLEXITY_API_KEY",
                 "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "ANTHROPIC_AUTH_TOKEN")
"""Variables holding a model provider's credentials: an agent under evaluation reaches its
model through promptloop's gateway and never needs one."""


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
    """The secret as an agent that found it could smuggle it: reversed, and in base64
    (standard and URL-safe, at each of the three byte alignments it can have inside a longer
    encoded text: the characters that depend on the secret alone, at least 8 of them)."""
    raw = secret.encode("utf-8")
    forms = {secret[::-1]}
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
    return tuple(sorted(forms, key=len, reverse=True))


def scrub(text: str, secrets: tuple[str | None, ...]) -> str:
    """Remove every secret (and its first 12 characters, which servers like to echo), reversed
    or in base64 too (`encoded_forms`)."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, "***")
        if len(secret) > 16:
            text = text.replace(secret[:12], "***")
        for form in encoded_forms(secret):
            text = text.replace(form, "***")
    return text


__all__ = ["PROVIDER_KEYS", "keep_from_proc", "refuse_provider_keys", "scrub"]
