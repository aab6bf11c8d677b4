"""Which sentence strips refinement keeps, reading as few of them as the choice needs.

Refinement keeps the best-graded strips within a word budget (:func:`pipeline.corrective.correction.refine`).
The choice depends only on the strips' probabilities, so a strip whose grade cannot change it need not be read
by the cross-encoder. A grader that knows, from its cheap cosine, the most each strip's grade could be
(``upper_bounds``: ``CrossEncoderGrader.upper_bounds``) lets :class:`StripChoice` read the strips in the order of
those bounds and stop as soon as the strips left unread can no longer be kept: each stays below the floor, or
is too long for the budget that the strips graded above all of them leave. The strips kept, and their grades,
are exactly those that grading every strip would keep. A grader without bounds has every strip read at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from grader.protocol import Grader
from grader.shift import not_monitored
from models.types import Chunk, Grade

__all__ = ["READ_BATCH", "StripChoice"]

READ_BATCH = 4  # strips read per round once the bounds order them: both cores busy, few reads to spare

StripRow = tuple[str, int, str]  # (chunk id, position, text)


class StripChoice:
    """The strips of one refinement, graded as lazily as the choice allows (see the module's docstring)."""

    def __init__(self, query: str, strips: Sequence[StripRow], grader: Grader, min_probability: float) -> None:
        self.query, self.strips, self.grader, self.min_probability = query, strips, grader, min_probability
        self.grades: dict[int, Grade] = {}
        bounds = getattr(grader, "upper_bounds", None)
        ceiling = np.ones(len(strips)) if bounds is None else np.asarray(
            bounds(query, [text for _, _, text in strips]), dtype=np.float64)
        self.ceiling = ceiling
        # a strip that stays below the floor is never kept: never read (unless a kept strip announces it)
        self.unread = sorted((i for i in range(len(strips)) if ceiling[i] >= min_probability),
                             key=lambda i: (-ceiling[i], i))

    def cost(self, i: int) -> int:
        return len(self.strips[i][2].split())

    def grade_of(self, i: int) -> Grade:
        """Strip ``i``'s grade, read now if it was not (a strip kept for the one before it needs its own)."""
        if i not in self.grades:
            self._read([i])
        return self.grades[i]

    def _read(self, indices: Sequence[int]) -> None:
        with not_monitored():  # strips are not retrieved chunks: the shift alarm watches chunks only
            grades = self.grader.grade(self.query, [Chunk(text=self.strips[i][2], chunk_id=self.strips[i][0])
                                                    for i in indices])
        self.grades.update(zip(indices, grades, strict=True))
        done = set(indices)
        self.unread = [i for i in self.unread if i not in done]

    def choose(self, token_budget: int, relative_floor: float) -> tuple[list[int], set[int]]:
        """The strips kept (in the order chosen) and those kept only because the strip before announces them."""
        first = sum(1 for i in self.unread if self.ceiling[i] >= 1.0)  # unbounded ones (an LLM's band): at once
        batch = self.unread[:max(first, READ_BATCH)]
        while batch:
            self._read(batch)
            if not self.unread or self._settled(token_budget, relative_floor):
                break
            batch = self.unread[:READ_BATCH]
        kept, completing, _ = self._keep(self.grades, token_budget, self._floor(relative_floor))
        return kept, completing

    def _best(self) -> float:
        return max((g.probability for g in self.grades.values() if not g.withheld), default=0.0)

    def _floor(self, relative_floor: float) -> float:
        return max(self.min_probability, relative_floor * self._best())

    def _settled(self, token_budget: int, relative_floor: float) -> bool:
        """Whether no unread strip can be kept: below the floor, or too long for what the strips graded above
        every unread one leave of the budget."""
        above = float(self.ceiling[self.unread[0]])  # the most any unread strip can be graded
        # the floor from the best strip read so far is at most the true one (the best may be unread), so what is
        # below it is below the true one; once a strip graded above every unread one is kept, the best was read
        floor = self._floor(relative_floor)
        if above < floor:
            return True
        graded_above = {i: g for i, g in self.grades.items() if g.probability > above}
        kept, _, used = self._keep(graded_above, token_budget, floor)
        if not kept:
            return False  # the first strip kept is kept whatever its length
        room = token_budget - used
        contenders = [*self.unread, *(i for i, g in self.grades.items()
                                      if floor <= g.probability <= above and not g.withheld and i not in kept)]
        return all(self.cost(i) > room for i in contenders)

    def _keep(self, grades: dict[int, Grade], token_budget: int, floor: float) -> tuple[list[int], set[int], int]:
        """Refinement's rule over ``grades``: best first, none below ``floor`` or withheld, within the budget; a
        kept strip that ends with a colon brings the next strip of its chunk when it fits."""
        kept: list[int] = []
        completing: set[int] = set()
        used = 0
        for i in _ranked(grades):
            if grades[i].probability < floor:
                break
            if grades[i].withheld or i in kept:
                continue
            if used + self.cost(i) > token_budget and kept:
                continue
            kept.append(i)
            used += self.cost(i)
            follow = i + 1  # "You can install it in editable mode:" is kept with the command it announces
            if self.strips[i][2].rstrip().endswith(":") and follow < len(self.strips) \
                    and self.strips[follow][0] == self.strips[i][0] and follow not in kept \
                    and not self.grade_of(follow).withheld and used + self.cost(follow) <= token_budget:
                kept.append(follow)
                completing.add(follow)
                used += self.cost(follow)
        return kept, completing, used


def _ranked(grades: dict[int, Grade]) -> Iterable[int]:
    """Best first; equal probabilities in document order."""
    return sorted(grades, key=lambda i: (-grades[i].probability, i))
