"""Secret values kept out of every file promptloop writes.

`redact(text)` replaces each secret promptloop knows with `***`, whatever the text came from
(a model's reply, an external proposer's output, an error message): the provider keys in the
environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, any variable whose name says key, token,
secret or password), the password of a base URL (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, or one
registered with `register_secret`), and values registered by the caller (the variables named by
`--proposer-env`). State files (`files.atomic_write_text`), the ledger, the `--events` log and the
optimize session's package and replies go through it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from promptloop.agents.secrets import scrub

KEY_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
URL_VARS = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
_SECRET_NAME = re.compile(r"(API_?KEY|_KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
MIN_SECRET_LEN = 6
"""Shorter values are not redacted: replacing `abc` everywhere would garble every file."""
_registered: set[str] = set()


def url_password(url: str | None) -> str | None:
    """The password of `url` (`https://user:pw@host/`), None when it has none."""
    if not url:
        return None
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def register_secret(value: str | None) -> None:
    """Redact `value` from now on in this process (a configured key, a URL with a password:
    its password is registered, or a value named by `--proposer-env`)."""
    if not value:
        return
    secret = (url_password(value) or "") if "://" in value else value
    if len(secret.strip()) >= MIN_SECRET_LEN:
        _registered.add(secret.strip())


def known_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every secret value known now, longest first (so a key is never half-replaced by a
    shorter secret it contains)."""
    env = os.environ if env is None else env
    found: set[str] = set(_registered)
    for name, value in env.items():
        value = value.strip()
        if name in KEY_VARS or _SECRET_NAME.search(name):
            found.add(value)
        elif name in URL_VARS:
            found.add(url_password(value) or "")
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET_LEN), key=len, reverse=True))


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every known secret (and `extra`) replaced by `***`."""
    secrets = (*known_secrets(), *(s for s in extra if len(s) >= MIN_SECRET_LEN))
    if not secrets:
        return text
    return scrub(text, secrets)


__all__ = ["KEY_VARS", "known_secrets", "redact", "register_secret", "url_password"]
