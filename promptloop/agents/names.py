"""The did-you-mean hint every "unknown name" error carries (agents, agent options, providers,
graders, suites, buckets): one helper on the lowest layer, so agents, graders and the optimizer
(`promptloop.optimizer.core.names` re-exports it) word it alike."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(value: str, options: Iterable[str]) -> str:
    """` Did you mean 'x'?` for the closest option, or '' when none is close."""
    hint = difflib.get_close_matches(value, list(options), n=1)
    return f" Did you mean '{hint[0]}'?" if hint else ""
