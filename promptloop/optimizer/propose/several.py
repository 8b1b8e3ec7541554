"""Several proposals for one package (`optimize --candidates K`), and the merge of two.

In the diff format, one request asks for K patches with distinct hypotheses in one structured
reply (`## Patch 1` ... `## Patch K`, each a HYPOTHESIS line and a diff block); patches that do
not apply go back to the model together, at most `max_retries` times. In the edits format (a
JSON schema holds one proposal) the model is asked K times, each call with its own seed and
the hypotheses of the earlier calls to differ from. Earlier refused and rejected ideas from the
ledger are in the package itself (`build_package`). A merge asks for one patch stating the
rules of two candidates that fixed different target tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from promptloop.agents.llm.types import Message, ModelClient, ModelSettings, Usage
from promptloop.optimizer.propose.asking import Attempt, converse
from promptloop.optimizer.propose.patch import PatchError
from promptloop.optimizer.propose.proposer import (
    Format,
    Package,
    Proposal,
    ProposerError,
    UnusableProposalError,
    ask_model,
    parse_diff_reply,
)

_PATCH_RE = re.compile(r"^[ \t]*#{1,6}[ \t]*patch[ \t]+(\d+)\b.*$", re.IGNORECASE | re.MULTILINE)
SEED_BASE = 7919
"""Seed of the first of K separate calls; call i gets SEED_BASE + i."""


def several_request(k: int) -> str:
    """What the user message adds when one request asks for `k` patches."""
    return (
        f"## This time: {k} different patches\nPropose {k} patches, each resting on its own "
        "hypothesis: a different explanation of the failures, not a rewording of another "
        "patch's rule. Each patch alone must fix the failures it explains. Do not repeat any "
        "proposal listed as rejected above.\nAnswer with one section per patch, in this form, "
        f"from `## Patch 1` to `## Patch {k}`:\n\n## Patch 1\nHYPOTHESIS: <one sentence>\n\n"
        "```diff\n<unified diff of the prompt file>\n```"
    )


def differ_request(i: int, k: int, earlier: Sequence[str]) -> str:
    """What call `i` of `k` separate calls adds: the hypotheses to differ from."""
    if not earlier:
        return f"## Proposal {i} of {k}\nPropose the patch you think most likely to work."
    listed = "\n".join(f"- {h}" for h in earlier)
    return (f"## Proposal {i} of {k}\nEarlier proposals of this round rest on these "
            f"hypotheses; propose a patch resting on a different one:\n{listed}")


def split_patches(text: str) -> dict[int, str]:
    """Patch number -> its section of a several-patch reply (empty when there is no header)."""
    heads = list(_PATCH_RE.finditer(text))
    out: dict[int, str] = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.setdefault(int(m.group(1)), text[m.end():end])
    return out


@dataclass(frozen=True)
class Several:
    """K proposals (or why slot i has none), in the order asked."""

    proposals: list[Proposal | ProposerError]
    replies: list[str]
    """Every reply of the model, in order (written next to the package)."""


async def ask_several(
    client: ModelClient,
    package: Package,
    k: int,
    *,
    fmt: Format,
    prompt_path: str,
    original: str,
    check: Callable[[str], None],
    max_retries: int = 2,
    max_tokens: int = 1500,
) -> Several:
    """`k` proposals for `package`: in one request (diff format) or `k` seeded calls (edits)."""
    if fmt == "edits":
        return await _separate_calls(client, package, k, prompt_path=prompt_path,
                                     original=original, check=check, max_retries=max_retries,
                                     max_tokens=max_tokens)
    messages = [Message.system(package.system),
                Message.user(package.user + "\n\n" + several_request(k))]
    settings = ModelSettings(temperature=0.7, max_tokens=max_tokens * k)
    got: dict[int, Proposal] = {}
    errors: dict[int, str] = {}

    def read(attempt: Attempt) -> str | None:
        sections = split_patches(attempt.text)
        errors.clear()
        for n in range(1, k + 1):
            if n in got:
                continue
            if n not in sections:
                errors[n] = f"the reply has no section `## Patch {n}`"
                continue
            try:
                hypothesis, diff = parse_diff_reply(sections[n])
                check(diff)
                got[n] = Proposal(hypothesis, diff, sections[n], attempt.n, Usage(), fmt)
            except PatchError as err:
                errors[n] = str(err)
        if not errors:
            return None
        listed = "\n".join(f"- Patch {n}: {e}" for n, e in sorted(errors.items()))
        return (f"These patches could not be applied:\n{listed}\nAnswer again with only these "
                "patches, under the same `## Patch N` headers, copying context lines exactly "
                "from the prompt file.")

    attempts, usage = await converse(client, messages, settings, max_retries=max_retries,
                                     read=read)
    replies = [a.text for a in attempts]
    out: list[Proposal | ProposerError] = [
        got[n] if n in got else UnusableProposalError(
            f"no applicable proposal after {len(replies)} attempt(s): {errors[n]}",
            attempts=len(replies))
        for n in range(1, k + 1)]
    for i, p in enumerate(out):  # the one request's usage, counted once (on the first)
        if isinstance(p, Proposal):
            out[i] = replace(p, usage=usage)
            break
    return Several(out, replies)


async def _separate_calls(
    client: ModelClient, package: Package, k: int, *, prompt_path: str, original: str,
    check: Callable[[str], None], max_retries: int, max_tokens: int,
) -> Several:
    out: list[Proposal | ProposerError] = []
    replies: list[str] = []
    for i in range(1, k + 1):
        earlier = [p.hypothesis for p in out if isinstance(p, Proposal)]
        asked = Package(package.system, package.user + "\n\n" + differ_request(i, k, earlier))
        try:
            proposal = await ask_model(client, asked, fmt="edits", prompt_path=prompt_path,
                                       original=original, check=check, max_retries=max_retries,
                                       max_tokens=max_tokens, seed=SEED_BASE + i)
            out.append(proposal)
            replies.append(proposal.raw_reply)
        except ProposerError as err:
            out.append(err)
            replies.append(f"(no usable proposal: {err})")
    return Several(out, replies)


def merge_request(first: tuple[str, str, Sequence[str]],
                  second: tuple[str, str, Sequence[str]]) -> str:
    """What the user message adds to ask for one patch stating the rules of two candidates,
    each given as (hypothesis, diff, target tasks it fixed)."""
    blocks = []
    for n, (hypothesis, diff, fixed) in enumerate((first, second), start=1):
        blocks.append(f"### Patch {n}\nHYPOTHESIS: {hypothesis}\nFixed: {', '.join(fixed)}\n"
                      f"```diff\n{diff.rstrip()}\n```")
    return (
        "## Merge two patches\nTwo patches were tried on this bucket's failing tasks. Each "
        "fixed tasks the other did not, and no patch fixed both sets:\n\n" + "\n\n".join(blocks)
        + "\n\nPropose ONE patch against the original prompt file that states both rules, as "
        "briefly as the two together allow. Answer in the required format."
    )


__all__ = ["SEED_BASE", "Several", "ask_several", "differ_request", "merge_request",
           "several_request", "split_patches"]
