"""A paper's claim, what was measured, and whether the measurement agrees.

Every study ends in :class:`Finding` objects: the verdict is decided from the numbers and
their standard errors by the study's own ``*_finding`` functions, and ``text`` says it in
plain words with those numbers, for the ``summary.md`` a command writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["VERDICTS", "VERDICT_WORDS", "Finding"]

VERDICTS = ("confirmed", "contradicted", "inconclusive", "mixed")
# How a summary answers the claim put as a question.
VERDICT_WORDS = {
    "confirmed": "Yes",
    "contradicted": "No",
    "inconclusive": "Not decided",
    "mixed": "Mixed",
}


@dataclass(frozen=True)
class Finding:
    """A paper claim, what was measured, and whether the measurement agrees.

    Attributes
    ----------
    part : str
        Which part of a study (``"slem"``, ``"rts-vs-ais"``, ...).
    claim : str
        The paper's claim, in our words.
    verdict : str
        ``"confirmed"``, ``"contradicted"``, ``"inconclusive"`` or (several models
        disagreeing) ``"mixed"``.
    text : str
        The verdict in plain words with the numbers.
    details : tuple of str
        One line per setting behind the verdict.
    """

    part: str
    claim: str
    verdict: str
    text: str
    details: tuple[str, ...] = field(default=())

    @property
    def answer(self) -> str:
        """The claim's question answered in one word or two: ``"Yes"``, ``"No"``, ``"Not decided"``, ``"Mixed"``."""
        return VERDICT_WORDS.get(self.verdict, self.verdict)
