"""How a generation ended, and its final save."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError

from conversations.events.payloads import MessagePayload
from conversations.generation import rows
from conversations.generation.plans import ReplyPlan
from conversations.models import Message

logger = logging.getLogger("chatsite.generation")

FINAL_SAVE_FIRST_PAUSE_S = 0.5
FINAL_SAVE_MAX_PAUSE_S = 10.0


@dataclass(frozen=True)
class Ending:
    """How a generation ended: its status and, for a failure, what the user is told and what
    operators see (the admin, the log)."""

    status: Message.Status
    error: str = ""
    error_detail: str = ""


async def save_final(plan: ReplyPlan, outcome: rows.Outcome) -> MessagePayload | None:
    """The final save, retried with backoff while the database is away: the saved text must be
    the text the tabs saw. Gives up (raises, for the caller to log) after CHAT_FINAL_SAVE_RETRY_S.
    The row as saved, or None if it is gone (see rows.finish)."""
    deadline = time.monotonic() + settings.CHAT_FINAL_SAVE_RETRY_S
    pause, retrying = FINAL_SAVE_FIRST_PAUSE_S, False
    while True:
        try:
            saved: MessagePayload | None = await database_sync_to_async(rows.finish)(
                plan, outcome, retrying=retrying
            )
            return saved
        except DatabaseError as exc:
            if time.monotonic() + pause > deadline:
                raise
            if not retrying:
                logger.warning(
                    "final save failed request_id=%s, retrying: %r", plan.request_id, exc
                )
            retrying = True
            await asyncio.sleep(pause)
            pause = min(pause * 2, FINAL_SAVE_MAX_PAUSE_S)
