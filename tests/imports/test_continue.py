"""An imported conversation goes on like any other: the model is given the branch shown."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.engines.base import ChatMessage
from conversations.models import Conversation
from tests.imports.helpers import imported
from tests.imports.sources import chatgpt_branched, chatgpt_with_system_prompt, chatgpt_zip
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_a_reply_in_an_imported_conversation_sees_its_branch_and_system_prompt(
    connect: Any, alice: Any, scripted_engine: Any
) -> None:
    data = chatgpt_zip(chatgpt_branched(), chatgpt_with_system_prompt())
    report = await database_sync_to_async(imported)(alice, data)
    arithmetic, pirate = (entry.id for entry in report.imported)

    socket, _, _ = await connect(alice, arithmetic)
    await socket.send(action="send", content="And 5+5?")
    reply = (await socket.receive_until(finished))[-1]["message"]

    asked = scripted_engine.records[reply["request_id"]].messages
    assert [m for m in asked if m.role != "system"] == [
        ChatMessage("user", "What is 2+2?"),
        ChatMessage("assistant", "4"),
        ChatMessage("user", "And 3+4?"),
        ChatMessage("assistant", "It is 7."),
        ChatMessage("user", "And 5+5?"),
    ]
    chat = await database_sync_to_async(Conversation.objects.get)(pk=arithmetic)
    assert chat.current_leaf_id == reply["id"]

    socket, _, _ = await connect(alice, pirate)
    await socket.send(action="send", content="Ahoy?")
    reply = (await socket.receive_until(finished))[-1]["message"]
    asked = scripted_engine.records[reply["request_id"]].messages
    assert asked[0] == ChatMessage("system", "You are a pirate.")
