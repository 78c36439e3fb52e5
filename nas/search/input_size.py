"""One input size: the one cost (MES, MACs, latency) is priced at, and the one accuracy comes from.

``nas search``, ``nas sample``, ``nas compare`` and ``nas rank-check`` price at the size the networks are trained and
scored at unless told otherwise: a search that prices 224 px latency while its supernet scores
32 px images optimises a cost its networks never pay (at 32 px the last stage is 1x1).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: The pricing size where nothing says at what size the networks train (``nas sample --space`` alone).
DEFAULT_PRICE_SIZE = 224


def price_size(given: int | None, recorded: int | None = None, trained: int | None = None) -> int:
    """The size to price at: ``given`` (an explicit ``--img-size``), else ``recorded`` (what a resumed
    run priced at: it keeps it), else ``trained`` (the training resolution), else 224."""
    if isinstance(recorded, bool) or not isinstance(recorded, int):  # a recorded file may hold anything
        recorded = None
    for size in (given, recorded, trained):
        if size is not None:
            return int(size)
    return DEFAULT_PRICE_SIZE


def warn_if_apart(priced: int, trained: int | None, who: str, subject: str) -> None:
    """One warning line when cost is priced at another size than accuracy is measured at: ``who``
    says what trained (``the supernet trained``), ``subject`` what trades one for the other."""
    if trained is not None and priced != trained:
        log.warning(
            "pricing at %d px but %s at %d px: %s trades %d px cost for %d px accuracy",
            priced,
            who,
            trained,
            subject,
            priced,
            trained,
        )


def input_size_words(priced: int, trained: int | None, how: str = "trained and scored") -> str:
    """``cost priced at 32 px; trained and scored at 32 px`` (``how`` says what happens at the training size)."""
    text = f"cost priced at {priced} px"
    return text + (f"; {how} at {trained} px" if trained is not None else f"; {how} at a size not known here")
