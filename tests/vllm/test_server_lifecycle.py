"""A live server's life with vLLM in it: the first reply, sent while the model still loads, and
SIGTERM in the middle of a reply, after which none of vLLM's processes may be left running."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password

from conversations.models import Conversation, Message
from tests.support.replies import only_reply_of
from tests.support.servers import NEEDS_SHARED_SERVICES, ServerProcess, open_socket
from tests.support.sockets import LiveSocket, finished, is_delta
from tests.vllm import smollm2

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
    pytest.mark.timeout(600),
]

PASSWORD = "dana-password"
STORY = "Write a very long story about a lighthouse keeper and the sea, in many chapters."


@database_sync_to_async
def dana_with_a_conversation() -> Conversation:
    """A user whose password the server can check: the suite hashes with MD5 for speed, which a
    server with the production hashers refuses."""
    dana = get_user_model().objects.create(
        username="dana", password=make_password(PASSWORD, hasher=PBKDF2PasswordHasher())
    )
    return Conversation.objects.create(owner=dana, title="Dana's chat")


async def log_in(server: ServerProcess, username: str, password: str) -> str:
    """Through the login page, as a person would; the session cookie for the socket."""
    async with httpx.AsyncClient(base_url=server.origin, timeout=30) as http:
        page = await http.get("/accounts/login/")
        assert page.status_code == 200
        response = await http.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": http.cookies["csrftoken"],
            },
            headers={"Origin": server.origin, "Referer": f"{server.origin}/accounts/login/"},
        )
        assert response.status_code == 302, response.text[:300]
        name = settings.SESSION_COOKIE_NAME
        return f"{name}={http.cookies[name]}"


async def test_the_first_reply_completes_while_the_model_loads(tmp_path: Path) -> None:
    conversation = await dana_with_a_conversation()
    with smollm2.vllm_server(tmp_path) as server:
        # The model loads on a thread of its own: pages, logins and sockets are served meanwhile.
        cookie = await log_in(server, "dana", PASSWORD)
        logged_in_at = datetime.now(UTC)
        async with open_socket(server, conversation.pk, cookie) as ws:
            tab = LiveSocket(ws)
            await tab.send(action="send", content="Say hello in one short sentence.")
            events = await tab.receive_until(finished, timeout=smollm2.LOAD_TIMEOUT_S)

    reply = events[-1]["message"]
    assert reply["status"] == "complete", reply
    assert any(is_delta(e) for e in events), "streamed"
    row = await only_reply_of(conversation)
    assert row.status == Message.Status.COMPLETE and row.content
    assert row.engine_ready_at is not None
    assert logged_in_at < row.engine_ready_at, "the login was served before vLLM had loaded"
    assert row.created_at < row.engine_ready_at, "the reply was sent before vLLM had loaded"


@pytest.mark.parametrize("server_name", ["daphne", "uvicorn"])
async def test_sigterm_mid_reply_leaves_no_vllm_process_behind(
    tmp_path: Path, server_name: str
) -> None:
    conversation = await dana_with_a_conversation()
    with smollm2.vllm_server(tmp_path, server_name) as server:
        cookie = await log_in(server, "dana", PASSWORD)
        await asyncio.to_thread(smollm2.wait_until_loaded, server)
        tree = smollm2.process_tree(server)  # recorded before the signal
        try:
            # vLLM names its processes (setproctitle): the engine core and its model worker.
            titles = {" ".join(process.cmdline()).split(" ")[0] for process in tree}
            assert {"VLLM::EngineCore", "VLLM::Worker"} <= titles, titles
            async with open_socket(server, conversation.pk, cookie) as ws:
                await LiveSocket(ws).send(action="send", content=STORY)
                await LiveSocket(ws).receive_until(is_delta, timeout=120)  # vLLM is at work

                server.process.terminate()
                returncode = await asyncio.to_thread(server.process.wait, smollm2.EXIT_TIMEOUT_S)
            # vLLM's processes get a moment to notice; whatever still runs then was orphaned.
            deadline = time.monotonic() + 10
            while (left := smollm2.alive(tree)) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        finally:
            for process in smollm2.alive(tree):
                process.kill()  # not to leave them to the next test

    assert not left, f"left running after SIGTERM: {describe(left)}"
    # daphne exits normally; uvicorn, once shut down, ends by the signal's default action.
    assert returncode in (0, -signal.SIGTERM), server.log.read_text()[-3000:]


def describe(processes: list[psutil.Process]) -> str:
    parts = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            parts.append(f"{process.pid} {process.name()} (parent {process.ppid()})")
    return ", ".join(parts)
