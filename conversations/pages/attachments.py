"""Attachments from the composer: a file put in (its chip, or why it was refused), taken out
before the send, and a sent one downloaded by its owner (anyone else is told it does not exist).

The upload is an async view: the file's text is read in a child process the event loop waits
on, and its tokens counted on a thread, so nothing the server does meanwhile waits for it.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser
from django.core.files.uploadedfile import UploadedFile
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from conversations.attachments import uploads
from conversations.attachments.downloads import file_download
from conversations.attachments.uploads import AttachmentRefused, Reader
from conversations.generation.resolve import CallSettings, resolve
from conversations.models import Attachment, Conversation
from conversations.services.conversations import conversation_or_404
from conversations.services.errors import SendRefused
from conversations.types import ConversationId, User

REFUSED = 422  # the request was understood; the file is not one chatsite keeps


@login_required
@require_POST
async def attachment_upload(request: HttpRequest, conversation_id: ConversationId) -> HttpResponse:
    """Keep the posted `file` for the conversation's next message: its chip for the composer
    (name, kind, size, tokens), or in plain text, why not."""
    user = await _signed_in(request)
    conversation, upload, model = await sync_to_async(_read_request)(request, user, conversation_id)
    if upload is None:
        return _refused(_("Choose a file to attach."), status=400)
    try:
        reader = await sync_to_async(_reader)(user, conversation, model)
        attachment = await uploads.attach(
            owner=user, conversation=conversation, upload=upload, reader=reader
        )
    except (AttachmentRefused, SendRefused) as exc:
        return _refused(str(exc))
    context = {"attachment": attachment, "context_tokens": reader.engine.context_tokens}
    chip = render_to_string("conversations/_attachment_chip.html", context)
    return HttpResponse(chip, status=201)


@login_required
@require_POST
async def attachment_remove(request: HttpRequest, attachment_id: str) -> HttpResponse:
    """Take a file out of the composer (before the send: a sent one stays with its message)."""
    user = await _signed_in(request)
    if not await uploads.detach(owner=user, attachment_id=attachment_id):
        raise Http404("No such attachment.")
    return HttpResponse(status=204)


@login_required
@require_GET
async def attachment_download(request: HttpRequest, attachment_id: str) -> HttpResponseBase:
    """The file as it was sent, to its owner only: a stranger's id reads as a missing one, and
    so does a file gone from storage."""
    user = await _signed_in(request)
    attachment = await Attachment.objects.filter(pk=attachment_id, owner=user).afirst()
    if attachment is None:
        raise Http404("No such attachment.")
    try:
        stored = await sync_to_async(attachment.file.open, thread_sensitive=False)("rb")
    except OSError:
        raise Http404("This file is missing from storage.") from None
    return file_download(
        stored, filename=attachment.name, content_type=attachment.kind, size=attachment.size
    )


async def _signed_in(request: HttpRequest) -> User:
    user = await request.auser()
    assert not isinstance(user, AnonymousUser)  # login_required let the request in
    return user


def _read_request(
    request: HttpRequest, user: User, conversation_id: ConversationId
) -> tuple[Conversation, UploadedFile[Any] | None, str]:
    """Blocking: the conversation's row, and the multipart body parsed (a file past 2.5 MB is
    read from a temporary file)."""
    conversation = conversation_or_404(user=user, conversation_id=conversation_id)
    model = request.POST.get("model", "")
    return conversation, request.FILES.get("file"), model


def _reader(user: User, conversation: Conversation, model: str) -> Reader:
    """The model the composer has picked, as the send will resolve it."""
    resolved = resolve(owner=user, chosen=conversation, model_slug=model, call=CallSettings())
    return Reader(model=resolved.model, engine=resolved.engine, reply=resolved.settings)


def _refused(message: str, *, status: int = REFUSED) -> HttpResponse:
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
