"""A socket's SessionWatch: it waits for the session's expiry (the test drives the wait), closes
the socket once the session no longer signs its user in, and waits again for a session that was
used meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.sessions.models import Session
from django.utils import timezone

from conversations.sockets.session_watch import EXPIRY_MARGIN_S, SessionWatch
from tests.support.db import close_worker_connections
from tests.support.sockets import signed_in_session

pytestmark = [pytest.mark.django_db(transaction=True)]

BOUND_S = 5


class Socket:
    """What the watch closes: counts the times it was told its session ended."""

    def __init__(self) -> None:
        self.ended = 0

    async def end(self) -> None:
        self.ended += 1


@pytest.fixture
async def session_key(alice: Any) -> AsyncIterator[str]:
    yield await database_sync_to_async(signed_in_session)(alice)
    await close_worker_connections()


def expiring_in(session_key: str, seconds: float) -> datetime:
    expires = timezone.now() + timedelta(seconds=seconds)
    Session.objects.filter(pk=session_key).update(expire_date=expires)
    return expires


async def expire_in(session_key: str, seconds: float) -> datetime:
    """The session now ends in `seconds` (in the past if negative)."""
    expires: datetime = await database_sync_to_async(expiring_in)(session_key, seconds)
    return expires


async def test_it_closes_the_socket_when_its_session_expires(alice: Any, session_key: str) -> None:
    socket, waits = Socket(), []
    expires = await expire_in(session_key, 60)

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await expire_in(session_key, -1)  # the minute passes

    watch = SessionWatch(session_key, alice.pk, ended=socket.end, sleep=sleep)
    await asyncio.wait_for(watch.close_at_expiry(expires), BOUND_S)
    assert len(waits) == 1
    assert 60 - 1 < waits[0] - EXPIRY_MARGIN_S <= 60, "it waited until the expiry, just past it"
    assert socket.ended == 1


async def test_a_session_used_meanwhile_is_waited_for_again(alice: Any, session_key: str) -> None:
    socket, waits = Socket(), []
    expires = await expire_in(session_key, 60)

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        # The first minute, the user reloads a page (the session now ends later); then it ends.
        await expire_in(session_key, 600 if len(waits) == 1 else -1)

    watch = SessionWatch(session_key, alice.pk, ended=socket.end, sleep=sleep)
    await asyncio.wait_for(watch.close_at_expiry(expires), BOUND_S)
    assert len(waits) == 2
    assert 600 - 1 < waits[1] - EXPIRY_MARGIN_S <= 600, "then until the new expiry"
    assert socket.ended == 1


async def test_a_change_to_another_session_is_checked_and_the_end_of_its_own_closes(
    alice: Any, session_key: str
) -> None:
    socket = Socket()
    watch = SessionWatch(session_key, alice.pk, ended=socket.end)
    await watch.changed("a-session-of-alice-on-her-phone")
    assert socket.ended == 0, "its own session still signs alice in"
    await watch.changed(session_key)
    assert socket.ended == 1


async def test_a_session_that_signs_in_someone_else_or_no_one_is_ended(
    alice: Any, users: dict[str, Any], session_key: str
) -> None:
    socket = Socket()
    assert not await SessionWatch(session_key, users["bob"].pk, ended=socket.end).signed_in()
    assert not await SessionWatch(None, alice.pk, ended=socket.end).signed_in()
    assert await SessionWatch(session_key, alice.pk, ended=socket.end).signed_in()
    assert socket.ended == 2
