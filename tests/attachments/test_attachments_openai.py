"""Images and documents on their way to an OpenAI-compatible server (vLLM's `vllm serve` among
them): a stand-in server records each request's body, so the test reads what the openai engine
sent. An image reaches a model with `vision` as an OpenAI image_url part, from the chat page's
composer and through the gateway's content parts; a model without the flag refuses it; a
gateway `file` part is read and put in the prompt as the composer's files are.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from conversations.models import Attachment, Conversation, Message
from conversations.services.tokens import api_token_create
from tests.engines.test_openai_engine import MisbehavingServer
from tests.gateway.test_in_process import call
from tests.support import documents
from tests.support.replies import generations_finished
from tests.support.sockets import finished, started

pytestmark = [pytest.mark.django_db(transaction=True)]

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.fixture
async def stand_in(settings: Any, tmp_path: Path) -> AsyncIterator[MisbehavingServer]:
    server = MisbehavingServer()
    await server.start()
    options = {"base_url": server.url("ok"), "timeout": 5.0}
    settings.CHAT_MODELS = json.dumps(
        [
            {
                "slug": "seeing",
                "name": "Seeing",
                "backend": "openai",
                "model": "m",
                "options": options,
                "vision": True,
            },
            {
                "slug": "blind",
                "name": "Blind",
                "backend": "openai",
                "model": "m",
                "options": options,
            },
        ]
    )
    settings.MEDIA_ROOT = tmp_path / "media"
    yield server
    await generations_finished()
    await server.close()


@pytest.fixture
def alice_key(alice: Any) -> str:
    return api_token_create(user=alice, name="attachments")[1]


def chat_bodies(server: MisbehavingServer) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in server.requests if r.path.endswith("/chat/completions")]


def gateway_call(model: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": parts}]}


async def test_the_composer_s_image_reaches_a_vision_model_as_an_image_part(
    stand_in: MisbehavingServer, connect: Any, alice: Any, conversation: Conversation
) -> None:
    def upload() -> str:
        client = Client()
        client.force_login(alice)
        response = client.post(
            f"/conversations/{conversation.pk}/attachments/",
            {"file": _file("dot.png", PNG), "model": "seeing"},
        )
        assert response.status_code == 201, response.content
        return str(Attachment.objects.get().pk)

    attachment_id = await database_sync_to_async(upload)()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(
        action="send", content="What is this?", attachments=[attachment_id], model="seeing"
    )
    await socket.receive_until(finished)

    [body] = chat_bodies(stand_in)
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]

    # A later turn on a model without vision is told the image's name, not sent it.
    await socket.send(action="send", content="And now?", model="blind")
    events = await socket.receive_until(lambda e: started(e) or e["type"] == "error")
    await socket.receive_until(finished)
    later = chat_bodies(stand_in)[-1]["messages"]
    assert (
        later[0]["content"] == "What is this?\n\nAttached image: dot.png (not shown to this model)"
    )
    assert events[-1]["type"] == "message.started"


async def test_the_gateway_passes_an_image_to_a_vision_model_and_refuses_it_for_another(
    stand_in: MisbehavingServer, alice: Any, alice_key: str
) -> None:
    parts = [
        {"type": "text", "text": "Describe it"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]

    refused = await call(alice_key, gateway_call("blind", parts))
    assert refused.status == 400
    error = json.loads(b"".join(refused.parts))["error"]
    assert "Blind does not read images" in error["message"]
    assert error["param"] == "messages[0].content[1]"
    assert chat_bodies(stand_in) == []  # nothing reached the server
    assert not await Message.objects.aexists() and not await Attachment.objects.aexists()

    answered = await call(alice_key, gateway_call("seeing", parts))
    assert answered.status == 200
    [body] = chat_bodies(stand_in)
    assert body["messages"][-1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": PNG_URL},
    }
    attachment = await Attachment.objects.select_related("message").aget()
    assert (attachment.kind, attachment.message.content) == ("image/png", "Describe it")


async def test_the_gateway_reads_a_file_part_into_the_prompt(
    stand_in: MisbehavingServer, alice: Any, alice_key: str
) -> None:
    pdf = base64.b64encode(documents.text_pdf(["Margins are thin this quarter"])).decode()
    parts = [
        {"type": "text", "text": "What does it say?"},
        {
            "type": "file",
            "file": {"filename": "../q3.pdf", "file_data": f"data:application/pdf;base64,{pdf}"},
        },
    ]
    answered = await call(alice_key, gateway_call("blind", parts))
    assert answered.status == 200

    [body] = chat_bodies(stand_in)
    content = body["messages"][-1]["content"]
    assert content.startswith("What does it say?\n\nAttached file: q3.pdf (PDF)\n```\n")
    assert "Margins are thin this quarter" in content

    for bad, says in (
        ({"type": "file", "file": {"file_id": "file-abc"}}, "Files API"),
        (
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            "fetches nothing",
        ),
        ({"type": "file", "file": {"file_data": "not base64!"}}, "not valid base64"),
        (
            {
                "type": "file",
                "file": {"file_data": base64.b64encode(b"\x00\x01\x02" * 50).decode()},
            },
            "not a file chatsite reads",
        ),
    ):
        refused = await call(alice_key, gateway_call("blind", [bad]))
        assert refused.status == 400
        assert says in json.loads(b"".join(refused.parts))["error"]["message"]


def _file(name: str, data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


async def test_a_gateway_call_carries_one_message_s_worth_of_files(
    stand_in: MisbehavingServer, alice: Any, alice_key: str, settings: Any
) -> None:
    settings.CHAT_ATTACHMENTS_PER_MESSAGE = 2
    text = {
        "type": "file",
        "file": {"filename": "a.txt", "file_data": base64.b64encode(b"hello").decode()},
    }
    body = {
        "model": "blind",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "first"}, text, text]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}, text]},
        ],
    }
    refused = await call(alice_key, body)
    assert refused.status == 400
    error = json.loads(b"".join(refused.parts))["error"]
    assert "A call may carry 2 files at most" in error["message"]
    assert error["param"] == "messages[2].content[1]"
    assert chat_bodies(stand_in) == []
