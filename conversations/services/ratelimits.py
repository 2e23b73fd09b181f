"""Per-user counters kept in Django's cache, where deleting rows cannot reset them.

With REDIS_URL set the cache is Redis, so every process counts in the same place; without it the
cache is this process's memory (one process only, like the in-memory channel layer).

A window opens at a user's first counted action and lasts `period` seconds: `cache.add` (SET NX in
Redis) decides its start once for every process, and `cache.incr` (INCR) counts in it atomically.
An action counted and then refused or undone is given back (`refund`, DECR) in the window it was
counted in.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass

from django.core.cache import cache

logger = logging.getLogger("chatsite.ratelimits")

PERIOD_S = 60


@dataclass(frozen=True)
class Usage:
    """How many actions the current window holds, and the whole seconds until it closes."""

    count: int
    retry_after: int
    window: float | None = None  # the window's start; None if no window is open


def usage(action: str, user_id: int | str, *, period: int = PERIOD_S) -> Usage:
    """The current window's count, without counting anything."""
    start = cache.get(_start_key(action, user_id))
    if start is None:
        return Usage(count=0, retry_after=0)
    count = cache.get(_count_key(action, user_id, start), 0)
    return Usage(count=int(count), retry_after=_seconds_left(start, period), window=start)


def hit(action: str, user_id: int | str, *, period: int = PERIOD_S) -> Usage:
    """Count one action, opening a window if none is open; return the count that includes it."""
    start_key = _start_key(action, user_id)
    for _ in range(3):
        cache.add(start_key, time.time(), timeout=period)
        start = cache.get(start_key)
        if start is None:  # the window closed between the two calls: open the next one
            continue
        count_key = _count_key(action, user_id, start)
        # The count outlives its window, so it cannot expire between add and incr.
        cache.add(count_key, 0, timeout=2 * period)
        try:
            count = cache.incr(count_key)
        except ValueError:  # evicted from a full cache after all: count again
            continue
        return Usage(count=count, retry_after=_seconds_left(start, period), window=start)
    # A cache that keeps nothing (DummyCache): limits are off rather than every send refused.
    logger.warning("the cache kept no rate-limit counter for %s; not limiting", action)
    return Usage(count=0, retry_after=0)


def refund(action: str, user_id: int | str, *, counted: Usage) -> None:
    """Give back an action that `hit` counted (`counted` is what it returned), in the window it
    was counted in; nothing once that window has closed, since its count limits nothing more."""
    if counted.window is None or cache.get(_start_key(action, user_id)) != counted.window:
        return
    # The count outlives its open window by a whole period, so it is there unless a full cache
    # evicted it, and then there is nothing left to give back.
    with contextlib.suppress(ValueError):
        cache.decr(_count_key(action, user_id, counted.window))


def _start_key(action: str, user_id: int | str) -> str:
    return f"ratelimit:{action}:{user_id}"


def _count_key(action: str, user_id: int | str, start: float) -> str:
    # Named by its window's start: a window that reopens starts from zero.
    return f"ratelimit:{action}:{user_id}:{start!r}"


def _seconds_left(start: float, period: int) -> int:
    return max(1, math.ceil(start + period - time.time()))
