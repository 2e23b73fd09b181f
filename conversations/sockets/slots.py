"""How many sockets one user holds open, across every process: leased slots in Django's cache.

A socket takes one of CHAT_SOCKETS_PER_USER numbered slots with `cache.add` (SET NX in Redis), so
two processes can never take the same slot; it renews its lease while it stays open and frees
the slot when it closes. Sockets of a process killed without closing them hold their slots only
until the lease lapses, so a crash locks no one out for longer than LEASE_S.

With REDIS_URL set every process counts in Redis; without it the cache is this process's memory,
which is right for the one process the in-memory channel layer allows.
"""

from __future__ import annotations

import asyncio
import logging
import random

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger("chatsite.sockets")

LEASE_S = 60
# The slot of a socket opened while the cache was unreachable: nothing to renew or free.
UNCOUNTED = ""
# Renewed well inside the lease, so a busy event loop that renews late still keeps its slot.
RENEW_EVERY_S = LEASE_S / 3


# Slots are looked at this many to a cache round trip.
PROBE = 32


def _claim(user_id: int, channel_name: str) -> str | None:
    limit = settings.CHAT_SOCKETS_PER_USER
    # From a random slot on: a user well under a large limit finds a free slot in one round trip.
    start = random.randrange(limit)
    for first in range(0, limit, PROBE):
        numbers = [(start + n) % limit for n in range(first, min(first + PROBE, limit))]
        keys = [f"chatsite:socket-slot:{user_id}:{n}" for n in numbers]
        taken = cache.get_many(keys)
        for key in keys:
            # Another process may take a free-looking slot first: add() says who won.
            if key not in taken and cache.add(key, channel_name, timeout=LEASE_S):
                return key
    return None


# Django's async cache methods run on the one thread that runs database code, behind whatever
# queues there; these calls touch only the cache, so they run in the shared thread pool instead.


async def claim(user_id: int, channel_name: str) -> str | None:
    """Take a free slot for this socket; its key, or None when the user holds every slot."""
    try:
        return await sync_to_async(_claim, thread_sensitive=False)(user_id, channel_name)
    except Exception as exc:
        # The cache is unreachable (Redis restarting): count nothing rather than refuse everyone.
        logger.warning("could not count the sockets of user %s: %r", user_id, exc)
        return UNCOUNTED


async def keep(slot: str) -> None:
    """Renew the slot's lease for as long as the socket is open (until this task is cancelled)."""
    while slot != UNCOUNTED:
        await asyncio.sleep(RENEW_EVERY_S)
        try:
            await sync_to_async(cache.touch, thread_sensitive=False)(slot, LEASE_S)
        except Exception as exc:  # tried again at the next renewal, well inside the lease
            logger.warning("could not renew a socket slot: %r", exc)


async def release(slot: str) -> None:
    # Without compare-and-delete a socket whose lease lapsed (its loop stalled for a minute) may
    # free a slot another socket took since: the user can then open one socket more, briefly.
    if slot == UNCOUNTED:
        return
    try:
        await sync_to_async(cache.delete, thread_sensitive=False)(slot)
    except Exception as exc:  # the lease lapses by itself
        logger.warning("could not free a socket slot: %r", exc)


class Lease:
    """A slot held by an open socket: renewed until `end()` frees it."""

    def __init__(self, slot: str):
        self.slot = slot
        self._renewing = asyncio.create_task(keep(slot))
        self._freed = False

    async def end(self) -> None:
        """Stop renewing and free the slot. Ending an ended lease does nothing; one whose end was
        cancelled before the slot was freed frees it now."""
        self._renewing.cancel()
        if not self._freed:
            await release(self.slot)
            self._freed = True


async def lease(user_id: int, channel_name: str) -> Lease | None:
    """Take a slot for this socket and keep it; None when the user holds every slot."""
    slot = await claim(user_id, channel_name)
    return None if slot is None else Lease(slot)
