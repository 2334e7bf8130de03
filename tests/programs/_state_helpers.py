"""A helper module for test_side_effects: a function writing its own module's global."""

from __future__ import annotations

HITS = 0


def count_hit() -> None:
    global HITS
    HITS += 1


def calls_the_counter(x):
    count_hit()
    return x * 2
