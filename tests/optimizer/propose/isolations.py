"""The isolations of propose/sandbox.py that work on this machine, for tests to run under."""

from __future__ import annotations

import functools

from promptloop.optimizer.propose.sandbox import ISOLATIONS, Isolation, probe


@functools.cache
def available_isolations() -> tuple[Isolation, ...]:
    """"none" always, and each of bwrap and unshare that works here."""
    return tuple(iso for iso in ISOLATIONS if iso == "none" or probe(iso))


def isolating() -> tuple[Isolation, ...]:
    """The available isolations that make the file system read-only (empty on a system with
    neither bubblewrap nor user namespaces, where tests of them are skipped)."""
    return tuple(iso for iso in available_isolations() if iso != "none")
