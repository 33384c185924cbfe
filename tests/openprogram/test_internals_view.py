"""The viewer's palette as a whole: every two colours a legend may show are told apart,
including those only a long session's pages show (a >20,000-node session's "messages")."""

from __future__ import annotations

import itertools

# internal: the viewer's whole palette, most of which no small session's page shows
from openprogram._view._svg import COLORS
from tests.openprogram._colours import distance


def test_every_two_colours_of_the_palette_are_told_apart() -> None:
    assert len(set(COLORS.values())) == len(COLORS) >= 8
    for (a, one), (b, two) in itertools.combinations(COLORS.items(), 2):
        assert distance(one, two) >= 25, (a, b, round(distance(one, two), 1))
