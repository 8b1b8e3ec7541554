"""A prompt target read from its file: the text promptloop patches and the text an agent runs.

A `PromptTarget` of promptloop.toml is a whole file, a string literal named by its variable or
the text between two marker lines (the `core/regions` package finds them). `PromptSource` holds one
target's file as read at a ref: `text` is what the proposer sees and edits (the region's source
text, with line numbers of the region), `value(text)` is the string an agent runs with (escapes
decoded), and `splice(text)` is the whole file with only the region's lines changed; a text that
would break the literal for its language is refused there, naming the region.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.project import Agent, PromptTarget
from promptloop.optimizer.core.regions import (
    Region,
    RegionError,
    RegionSpec,
    locate,
    splice,
    value_of,
)


def region_spec(target: PromptTarget) -> RegionSpec:
    return RegionSpec(target.path, target.variable, target.begin, target.end)


@dataclass(frozen=True)
class PromptSource:
    """One prompt target and its file's text at the ref it was read."""

    target: PromptTarget
    file_text: str
    region: Region | None
    """None for a whole-file target."""
    ref: str | None = None
    """The commit the file was read at, or "working tree"."""

    @property
    def path(self) -> str:
        return self.target.path

    @property
    def text(self) -> str:
        """What the proposer edits: the region's content as written in the source."""
        return self.region.text if self.region is not None else self.file_text

    def value(self, text: str | None = None) -> str:
        """The prompt an agent runs with, for the region's source `text` (default: as read)."""
        if self.region is None:
            return self.file_text if text is None else text
        region = self.region if text is None else dataclasses.replace(self.region, text=text)
        return value_of(region)

    def splice(self, text: str) -> str:
        """The whole file with the region's content replaced by `text` (RegionError if not)."""
        if self.region is None:
            return text
        return splice(region_spec(self.target), self.file_text, text)

    def describe(self) -> str:
        return self.region.describe() if self.region is not None else self.target.path


def open_target(agent: Agent, target: PromptTarget, file_text: str,
                ref: str | None = None) -> PromptSource:
    """The target found in `file_text`; ConfigError naming the project file, the agent's table
    and the key when the region is missing, found twice or unreadable."""
    if target.whole_file:
        return PromptSource(target, file_text, None, ref)
    try:
        region = locate(region_spec(target), file_text)
    except RegionError as err:
        key = "variable" if target.variable else "begin"
        raise ConfigError(f"{agent.project.where}: {agent.table} prompt {target.name!r} key "
                          f"'{key}': {err}") from None
    return PromptSource(target, file_text, region, ref)


__all__ = ["PromptSource", "open_target", "region_spec"]
