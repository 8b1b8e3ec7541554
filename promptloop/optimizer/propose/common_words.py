"""How ordinary an English word is: the common-English exemption of the eval-literal guard.

A word a general rule may use ("greeting", "deadline", "reminder") is no evidence that a
proposer copied it from a task, even when a task or a grader config happens to contain it. The
frequencies come from `wordfreq` (Zipf scale: 7 is "the", 3 is a word seen about once per
million words), which ships its tables inside the package and works offline.
"""

from __future__ import annotations

from functools import lru_cache

COMMON_ZIPF = 4.0
"""At or above: everyday English ("deadline" 4.1, "ticket" 4.6). Below: names and rare words
("Nguyen" 3.2, "Okafor" 2.6, "sourdough" 2.8) that can count as eval-set literals."""
CONFIG_NAME_ZIPF = 3.5
"""A capitalised word found only in a grader config counts below this: "Nguyen" (3.2) does,
a category name a grader checks for ("Milestone" 3.7, "Emotion" 3.9) does not. Names a task's
input holds are protected through the input at COMMON_ZIPF."""
RARE_ZIPF = 3.0
"""Below: rare enough that even a lower-case word on its own is a grader's distinctive target
("sourdough" 2.8), where "persist" (3.5) or "snippet" (3.1) are just vocabulary."""


@lru_cache(maxsize=65_536)
def zipf(word: str) -> float:
    """Zipf frequency of one lower-cased English word (0.0 when unknown). `wordfreq` is
    imported here, on the first word asked: it takes over half a second to import, and every
    trial runner imports this module (adapters -> escape check -> proposal guards) without
    asking for a word."""
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word.lower(), "en"))


STOPWORDS: frozenset[str] = frozenset("""
a an the and or but if of to in on at by for from with without into onto over under about as
is are was were be been being am do does did done have has had having i me my mine we us our
you your he him his she her it its they them their this that these those there here then than
so not no nor too very just only also all any some each every one s t can could will would
shall should may might must what which who whom whose when where why how up down out off again
""".split())
"""Function words: a phrase needs at least two words outside this list to be distinctive."""
