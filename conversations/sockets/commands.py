"""What a socket's frames ask for, done: a send (or another turn), a Stop, a switch of versions.

Each frame is parsed (frames.py) and turned into its service call
(conversations.generation.replies, conversations.services.branches); what is refused is
answered with an error frame.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils.translation import gettext_lazy as _

from conversations.generation import replies
from conversations.models import Conversation
from conversations.services import branches
from conversations.services.errors import SendRefused, SessionEnded
from conversations.sockets.frame_queue import Frame
from conversations.sockets.frames import CancelFrame, FrameError, SelectFrame, parse_frame
from conversations.sockets.session_watch import SessionWatch
from conversations.sockets.tabs import TabState

logger = logging.getLogger("chatsite.socket")

UNAVAILABLE = _("The server could not save that just now. Please try again.")


class Commands:
    """Acts on one socket's frames (one at a time: the FrameQueue's `act`) as the user whose
    session `session` watches (and re-checks before a Stop or a switch of versions).

    `send_error(code, message)` answers a frame that was refused.
    """

    def __init__(
        self,
        conversation: Conversation,
        username: str,
        session: SessionWatch,
        tab: TabState,
        send_error: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self.conversation = conversation
        self.username = username
        self.session = session
        self.tab = tab
        self._send_error = send_error

    async def act(self, frame: Frame) -> None:
        """Parse the frame and call the service it asks for; answer it if it is refused."""
        try:
            text = frame if isinstance(frame, str) else None
            command = parse_frame(text, conversation_id=str(self.conversation.id))
            if isinstance(command, CancelFrame):
                await self._cancel()
            elif isinstance(command, SelectFrame):
                if await self.session.signed_in():
                    await database_sync_to_async(branches.branch_select)(
                        conversation=self.conversation, message_id=command.message_id
                    )
            else:
                # The session is checked in the same trip to the database as the send is saved:
                # a session that ended (logout, new password...) acts on nothing more.
                turn = replies.Turn(command.turn, command.content, command.message_id)
                await replies.reply_start(
                    replies.Send(
                        conversation=self.conversation,
                        turn=turn,
                        idempotency_key=command.idempotency_key,
                        model_slug=command.model,
                        attachment_ids=command.attachments,
                        session_key=self.session.session_key,
                        user_id=self.session.user_id,
                    )
                )
        except SessionEnded:
            await self.session.end()
        except (FrameError, SendRefused) as exc:
            await self._send_error(exc.code, str(exc))
        except DatabaseError:
            logger.exception("database error handling a frame")
            await self._send_error("unavailable", str(UNAVAILABLE))

    async def _cancel(self) -> None:
        stop = None
        if (writing := self.tab.writing) is not None:
            # The engine hears a Stop for the reply this tab shows before anything waits for the
            # database thread. Stopping one's own reply is harmless, so the session is checked
            # after that, before the Stop is recorded: a session that ended a moment ago can
            # stop a reply, never start one.
            stop = await replies.reply_stop_now(
                conversation=self.conversation, message_id=writing, cancelled_by=self.username
            )
        if await self.session.signed_in():
            await replies.reply_cancel(
                conversation=self.conversation, cancelled_by=self.username, already_sent=stop
            )
