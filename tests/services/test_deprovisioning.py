"""When a person's access ends (issue 24: "sign out everywhere", a deactivation, leaving the group a
model is for), their open sockets close and their replies being written stop within a second, and
a deactivated account's API tokens stop at once. In this process through the whole ASGI stack;
across two daphne processes at the end."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session
from django.test import Client
from websockets.exceptions import ConnectionClosed

from conversations.models import Conversation, Message, SignIn
from conversations.services.tokens import api_token_create
from conversations.sockets.consumer import CLOSE_FORBIDDEN, CLOSE_SESSION_ENDED
from tests.sockets import test_sessions
from tests.support.replies import wait_for_reply
from tests.support.servers import NEEDS_SHARED_SERVICES, servers
from tests.support.servers import open_socket as open_live_socket
from tests.support.sockets import LiveSocket, Socket, signed_in_session, started

pytestmark = [pytest.mark.django_db(transaction=True)]

ORIGIN = b"http://127.0.0.1"
WITHIN_S = 1.0
MODELS = [
    {"slug": "open", "backend": "scripted", "options": {"tokens": 400, "delay_ms": 20}},
    {
        "slug": "team-only",
        "backend": "scripted",
        "groups": ["team"],
        "options": {"tokens": 400, "delay_ms": 20},
    },
]


@pytest.fixture(autouse=True)
def slow_replies(settings: Any) -> None:
    settings.CHAT_SCRIPTED_TOKENS = 400
    settings.CHAT_SCRIPTED_DELAY_MS = 20
    settings.CHAT_MODELS = json.dumps(MODELS)


# A socket through the whole ASGI stack (cookies, session, origin), as a browser opens it.
application = test_sessions.application
open_socket = test_sessions.open_socket


async def replying(socket: Socket, model: str = "open") -> None:
    await socket.send(action="send", content="Count for me", model=model)
    await socket.receive_until(started)


async def closes_within(socket: Socket, seconds: float = WITHIN_S) -> int:
    """The close code the socket gets within `seconds`, the deltas before it skipped."""
    async with asyncio.timeout(seconds):
        while True:
            output = await socket.communicator.receive_output(timeout=seconds)
            if output["type"] == "websocket.close":
                return int(output["code"])


async def stopped_within(conversation: Conversation, seconds: float = WITHIN_S) -> Message:
    return await wait_for_reply(conversation, lambda row: bool(row.cancelled_by), seconds)


def client_with(session_key: str) -> Client:
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    return client


async def test_signing_out_everywhere_closes_every_socket_and_stops_the_replies(
    open_socket: Any, alice: Any, users: dict[str, Any]
) -> None:
    bob = users["bob"]
    laptop = await database_sync_to_async(signed_in_session)(alice)
    phone = await database_sync_to_async(signed_in_session)(alice)
    bobs = await database_sync_to_async(signed_in_session)(bob)
    mine = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    his = await database_sync_to_async(Conversation.objects.create)(owner=bob)
    on_laptop = await open_socket(laptop, mine)
    on_phone = await open_socket(phone, mine)
    bob_socket = await open_socket(bobs, his)
    await replying(on_laptop)
    await replying(bob_socket)

    response = await database_sync_to_async(client_with(phone).post)(
        "/account/sign-out-everywhere/"
    )
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert await closes_within(on_laptop) == CLOSE_SESSION_ENDED
    assert await closes_within(on_phone) == CLOSE_SESSION_ENDED
    stopped = await stopped_within(mine)
    assert stopped.cancelled_by == "signed_out"
    assert not await database_sync_to_async(
        lambda: Session.objects.filter(pk__in=[laptop, phone]).exists()
    )()
    # bob's session, socket and reply go on.
    assert await database_sync_to_async(Session.objects.filter(pk=bobs).exists)()
    his_reply = await database_sync_to_async(his.messages.get)(role="assistant")
    assert his_reply.is_active and not his_reply.cancelled_by


async def test_a_deactivated_account_stops_its_replies_sockets_and_api_tokens(
    open_socket: Any, alice: Any
) -> None:
    session = await database_sync_to_async(signed_in_session)(alice)
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    socket = await open_socket(session, conversation)
    _, key = await database_sync_to_async(api_token_create)(user=alice, name="script")
    api = Client(headers={"Authorization": f"Bearer {key}"})
    assert (await database_sync_to_async(api.get)("/api/conversations/")).status_code == 200
    await replying(socket)

    alice.is_active = False
    await database_sync_to_async(alice.save)()
    assert await closes_within(socket) == CLOSE_SESSION_ENDED
    assert (await stopped_within(conversation)).cancelled_by == "deactivated"
    assert (await database_sync_to_async(api.get)("/api/conversations/")).status_code == 401


@pytest.mark.parametrize("how", ["user.groups.remove", "group.user_set.remove", "user_set.clear"])
async def test_leaving_a_models_group_stops_that_models_replies_only(
    open_socket: Any, alice: Any, how: str
) -> None:
    team = await database_sync_to_async(Group.objects.create)(name="team")
    await database_sync_to_async(alice.groups.add)(team)
    session = await database_sync_to_async(signed_in_session)(alice)
    restricted = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    everyones = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    on_restricted = await open_socket(session, restricted)
    on_everyones = await open_socket(session, everyones)
    await replying(on_restricted, model="team-only")
    await replying(on_everyones, model="open")

    def leave() -> None:
        if how == "user.groups.remove":
            alice.groups.remove(team)
        elif how == "group.user_set.remove":
            team.user_set.remove(alice)
        else:
            team.user_set.clear()

    await database_sync_to_async(leave)()
    assert await closes_within(on_restricted) == CLOSE_FORBIDDEN
    assert (await stopped_within(restricted)).cancelled_by == "access_removed"
    assert await on_everyones.communicator.receive_output(timeout=1)  # still streaming
    other = await database_sync_to_async(everyones.messages.get)(role="assistant")
    assert other.is_active and not other.cancelled_by


def test_the_account_page_lists_where_one_is_signed_in(alice: Any, users: dict[str, Any]) -> None:
    phone = Client(headers={"User-Agent": "Mozilla/5.0 (iPhone) Safari/604.1"})
    laptop = Client(headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140.0"})
    for client in (phone, laptop):
        signed_in = client.post(
            "/accounts/login/", {"username": "alice", "password": "alice-password"}
        )
        assert signed_in.status_code == 302
    Client().force_login(users["bob"])
    page = laptop.get("/account/").content.decode()
    assert "Chrome on Linux <strong>(this one)</strong>" in page
    assert "Safari on iPhone" in page
    assert "bob" not in page
    assert SignIn.objects.filter(user=alice).count() == 2
    assert Client().get("/account/").status_code == 302  # signed in only
    laptop.post("/accounts/logout/")
    assert SignIn.objects.filter(user=alice).count() == 1  # a logout forgets its sign-in


@pytest.mark.processes
@NEEDS_SHARED_SERVICES
@pytest.mark.parametrize("ending", ["sign out everywhere", "deactivation", "leaving the group"])
async def test_access_ended_in_one_process_closes_the_socket_and_stops_the_reply_in_another(
    alice: Any, tmp_path: Path, ending: str
) -> None:
    """The socket and its reply on server a; the sign-out posted to server b, the deactivation
    and the group change saved here (a third process)."""
    team = await database_sync_to_async(Group.objects.create)(name="team")
    await database_sync_to_async(alice.groups.add)(team)
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    session = await database_sync_to_async(signed_in_session)(alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={session}"
    env = {"CHAT_SCRIPTED_TOKENS": 400, "CHAT_MODELS": json.dumps(MODELS)}
    with servers(2, tmp_path, **env) as (a, b):
        async with open_live_socket(a, conversation.pk, cookie) as connection:
            socket = LiveSocket(connection)
            await socket.send(action="send", content="Count for me", model="team-only")
            await socket.receive_until(started)
            ended_at = time.monotonic()
            await end_access(ending, alice, team, b.origin, session)
            with pytest.raises(ConnectionClosed) as closed:
                async with asyncio.timeout(WITHIN_S):
                    while True:
                        await connection.recv()
            code = CLOSE_FORBIDDEN if ending == "leaving the group" else CLOSE_SESSION_ENDED
            assert closed.value.rcvd is not None and closed.value.rcvd.code == code
            left = WITHIN_S - (time.monotonic() - ended_at)
            stopped = await stopped_within(conversation, left)
            expected = {"sign out everywhere": "signed_out", "deactivation": "deactivated"}
            assert stopped.cancelled_by == expected.get(ending, "access_removed")


async def end_access(ending: str, user: Any, group: Group, origin: str, session: str) -> None:
    if ending == "deactivation":
        user.is_active = False
        await database_sync_to_async(user.save)()
    elif ending == "leaving the group":
        await database_sync_to_async(user.groups.remove)(group)
    else:
        async with httpx.AsyncClient(base_url=origin) as http:
            http.cookies.set(settings.SESSION_COOKIE_NAME, session)
            await http.get("/account/")
            token = http.cookies["csrftoken"]
            response = await http.post(
                "/account/sign-out-everywhere/", headers={"X-CSRFToken": token}
            )
        assert response.status_code == 302, response.text[:300]
