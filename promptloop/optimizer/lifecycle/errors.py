"""Errors of the lifecycle commands: user errors (exit 1) carry a message naming what to fix."""

from __future__ import annotations

from collections.abc import Sequence

from promptloop.optimizer.core.names import did_you_mean


class LifecycleError(Exception):
    """A user error: an unknown name, a refused graduation, a bad labels file."""


class NoLineageError(LifecycleError):
    """No stored run belongs to the suite's lineage yet (a first night has none)."""


class UnknownNameError(LifecycleError):
    """An unknown suite, bucket, grader or run; the message lists the known ones."""

    def __init__(self, what: str, name: str, known: Sequence[str]) -> None:
        names = sorted(set(known))
        listing = ", ".join(names) if names else "none"
        super().__init__(f"unknown {what} '{name}'.{did_you_mean(name, names)} "
                         f"Known {what}s: {listing}")
        self.name = name
        self.known = names


class LabelsError(LifecycleError):
    """A labels file line that cannot be used; the message names the file, line and field."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        # line 0 is the file as a whole (missing, unreadable, no labels of the grader)
        where = f"{path}: {problem}" if line == 0 else \
            f"{path}: line {line}: field '{field}': {problem}"
        super().__init__(where)
        self.path, self.line, self.field = path, line, field


class GraduationRefused(LifecycleError):
    """The bucket is not ready to graduate (the message gives the figures)."""
