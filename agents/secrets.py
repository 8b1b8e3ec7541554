"""Removing secret values from text: the one `scrub` the providers (error messages) and
promptloop's redaction (`optimizer/core/redact.py`, every file it writes) share."""

from __future__ import annotations


def scrub(text: str, secrets: tuple[str | None, ...]) -> str:
    """Remove every secret (and its first 12 characters, which servers like to echo)."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, "***")
        if len(secret) > 16:
            text = text.replace(secret[:12], "***")
    return text


__all__ = ["scrub"]
