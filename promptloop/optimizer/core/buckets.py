"""One bucket namespace for every layer: CLI, package, gate, ledger and reports.

A bucket of a capability suite is named by its failure bucket (`template_event`); a bucket of
any other suite kind is always qualified by the kind (`regression/plain_event`), so buckets of
different suites never merge. A user may type the short name of a non-capability bucket when
it is unique across the agent's suites; `resolve_bucket` turns what was typed into the one
qualified name, or fails with the list of known names and a did-you-mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from promptloop.optimizer.core.names import did_you_mean

SUITE_KINDS = ("capability", "regression", "mixed")


class BucketError(ValueError):
    """An unknown or ambiguous bucket name (the message lists the known ones)."""


def bucket_prefix(suite_kind: str) -> str:
    """'' for capability suites, '<kind>/' otherwise."""
    return "" if suite_kind == "capability" else f"{suite_kind}/"


def qualified(suite_kind: str, bucket: str) -> str:
    """The namespaced name of `bucket` in a suite of `suite_kind`."""
    return bucket_prefix(suite_kind) + bucket


@dataclass(frozen=True)
class BucketId:
    """A bucket of one suite kind: `kind` + the suite's own `name` for it."""

    kind: str
    name: str

    @property
    def qualified(self) -> str:
        return qualified(self.kind, self.name)

    @classmethod
    def parse(cls, text: str) -> BucketId:
        kind, sep, name = text.partition("/")
        if sep and kind in SUITE_KINDS:
            return cls(kind, name)
        return cls("capability", text)


def resolve_bucket(typed: str, known: Sequence[str]) -> str:
    """The qualified bucket that `typed` names among `known` (qualified names).

    Exact qualified names win; a short name resolves when exactly one suite has it."""
    if typed in known:
        return typed
    matches = [k for k in known if k.rpartition("/")[2] == typed]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise BucketError(f"bucket '{typed}' exists in several suites: {', '.join(matches)}; "
                          "give the qualified name")
    raise BucketError(f"unknown bucket '{typed}'.{did_you_mean(typed, list(known))} Known buckets: "
                      f"{', '.join(sorted(known))}")
