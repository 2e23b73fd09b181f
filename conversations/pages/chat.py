"""The chat pages: the list and its sidebar, a conversation's page, one of its messages, the forms
on it (model and settings, title, delete), and the theme."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Page, Paginator
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from conversations.imports import FORMATS
from conversations.models import Attachment, Conversation, UserPreferences
from conversations.pages.chat_settings import settings_context
from conversations.pages.forms import ConversationSettingsForm, TitleForm
from conversations.pages.htmx import HtmxRequest
from conversations.services import audit, branches
from conversations.services.conversations import (
    conversation_configure,
    conversation_create,
    conversation_delete,
    conversation_or_404,
    conversation_rename,
    conversation_take_defaults,
)
from conversations.services.errors import TooManyConversations
from conversations.services.feedback import with_feedback
from conversations.services.limits import check_create_allowed
from conversations.types import AuthenticatedHttpRequest, ConversationId, MessageId

SIDEBAR_PAGE_SIZE = 50


@login_required
@require_GET
def conversation_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "conversations/list.html", {"sidebar": sidebar_page(request, 1)})


@login_required
@require_GET
def conversation_sidebar_page(request: HtmxRequest) -> HttpResponse:
    """The next page of the sidebar, loaded by its "Older conversations" button (htmx)."""
    page = sidebar_page(request, request.GET.get("page", 1))
    # The date group the previous page ended in: its heading is not repeated.
    after_group = request.GET.get("after", "")
    # Its rows' Pin and Archive are buttons of the page's own #row-actions form, which comes
    # back to the page showing them.
    return render(
        request, "conversations/_sidebar_page.html", {"sidebar": page, "after_group": after_group}
    )


def sidebar_page(
    request: AuthenticatedHttpRequest, number: int | str, *, open_id: ConversationId | None = None
) -> Page[Conversation]:
    """A page of the user's conversations for the sidebar (every page that shows it, search's
    too). A page at a time: a user with thousands of conversations still gets a small, fast page.
    Pinned, archived and project conversations are not among them: the sidebar lists the pinned
    and the projects above these (templatetags.organise), the Archive page the archived."""
    listed = Conversation.objects.visible_to(request.user).filter(
        pinned=False, archived=False, project=None
    )
    page = Paginator(listed.with_messages_or().newest_first(), SIDEBAR_PAGE_SIZE).get_page(number)
    # The open conversation is listed even while it is empty (just made), at the top, where the
    # newest is. Looked up on its own: "has messages, or is this one" in one query makes
    # PostgreSQL hash every message of every conversation (30 ms at 200,000 messages), twice.
    if open_id is not None and page.number == 1:
        opened = listed.empty().filter(pk=open_id).first()
        if opened is not None:
            page.object_list = [opened, *page.object_list]
    return page


@login_required
@require_POST
def conversation_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    # "Temporary chat" posts temporary=1: a chat deleted once unused (generation.temporary).
    temporary = request.POST.get("temporary") == "1"
    # An untouched conversation of theirs (no message, no title) of the kind asked for is offered
    # again: clicking New twice makes one, not two.
    unused = (
        Conversation.objects.visible_to(request.user)
        .empty()
        .filter(title="", temporary=temporary, project=None, archived=False)
        .newest_first()
        .first()
    )
    if unused is not None:
        return redirect(conversation_take_defaults(conversation=unused))
    try:
        check_create_allowed(request.user)
    except TooManyConversations as refused:
        response = render(
            request,
            "conversations/list.html",
            {"sidebar": sidebar_page(request, 1), "error": str(refused)},
            status=429,
        )
        response["Retry-After"] = str(refused.retry_after)
        return response
    conversation = conversation_create(owner=request.user, temporary=temporary)
    return redirect(conversation)


@login_required
@require_GET
def conversation_detail(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    return _detail_page(request, conversation)


@login_required
@require_GET
def conversation_message(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId, message_id: MessageId
) -> HttpResponse:
    """One message's article, for a page whose socket could not carry it: a saved message too
    long for a frame (CHAT_SOCKET_FRAME_BYTES) is sent as a placeholder that loads this."""
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    message = get_object_or_404(conversation.messages, pk=message_id)
    message.version = branches.version_of(message)
    with_feedback([message], user=request.user)
    return render(request, "conversations/_message.html", {"m": message})


MAX_CLIENT_CHARS = 60  # of a gateway client's User-Agent, in the header


def origin_note(conversation: Conversation) -> str:
    """Where a conversation not started in this page came from, for its header: an import (its
    source) or a call to the OpenAI-compatible gateway (its client); "" for the others."""
    if conversation.origin == Conversation.Origin.IMPORT:
        source = FORMATS.get(conversation.origin_detail)
        return _("Imported from %(source)s") % {
            "source": source.LABEL if source else conversation.origin_detail
        }
    if conversation.origin == Conversation.Origin.API:
        client = conversation.origin_detail[:MAX_CLIENT_CHARS]
        return (
            _("Through the API (%(client)s)") % {"client": client}
            if client
            else _("Through the API")
        )
    return ""


def _detail_page(
    request: AuthenticatedHttpRequest,
    conversation: Conversation,
    settings_form: ConversationSettingsForm | None = None,
    status: int = 200,
) -> HttpResponse:
    messages = with_feedback(branches.visible_branch(conversation), user=request.user)
    shown = settings_context(request.user, conversation, settings_form)
    current = shown["current_model"]
    return render(
        request,
        "conversations/detail.html",
        {
            **shown,
            "sidebar": sidebar_page(request, 1, open_id=conversation.pk),
            "messages": messages,
            "streaming": any(m.is_active for m in messages),
            "max_prompt_chars": settings.CHAT_MAX_PROMPT_CHARS,
            "export_formats": [
                ("markdown", "Markdown"),
                ("json", "JSON"),
                ("txt", _("Text")),
                ("zip", _("Zip with files")),
            ],
            # Files put in the composer and not sent yet: a reload keeps them, as it keeps a draft.
            "pending_attachments": Attachment.objects.pending().filter(
                owner=request.user, conversation=conversation
            ),
            "context_tokens": current.spec.context_tokens if current else 0,
            "max_attachment_bytes": settings.CHAT_ATTACHMENT_MAX_BYTES,
            "origin_note": origin_note(conversation),
            "staff_views": audit.staff_views_shown_to_owner(conversation),
            "staff_views_max": audit.SHOWN_TO_OWNER,
        },
        status=status,
    )


def _settings_panel(
    request: HtmxRequest,
    conversation: Conversation,
    form: ConversationSettingsForm | None = None,
    *,
    saved: bool = False,
) -> HttpResponse:
    # 200 even with errors: htmx swaps in only successful responses by default.
    context = settings_context(request.user, conversation, form, saved=saved)
    return render(request, "conversations/_settings.html", context)


@login_required
@require_POST
def conversation_settings_view(
    request: HtmxRequest, conversation_id: ConversationId
) -> HttpResponse:
    """Saves the settings panel: in place for htmx (the panel comes back saying "Saved", or
    with its fields' errors), else by a page load."""
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    form = ConversationSettingsForm(request.POST)
    if form.is_valid():
        try:
            conversation_configure(
                conversation=conversation, user=request.user, changes=form.changes()
            )
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error("model" if name == "model_slug" else name, errors)
    if not form.is_valid():
        conversation.refresh_from_db()
        if request.htmx:
            return _settings_panel(request, conversation, form)
        return _detail_page(request, conversation, form, status=400)
    if request.htmx:
        return _settings_panel(request, conversation, saved=True)
    return redirect(conversation)


@login_required
@require_POST
def conversation_model_view(request: HtmxRequest, conversation_id: ConversationId) -> HttpResponse:
    """The composer's picker changed: the conversation's model is saved, and the settings panel
    comes back naming it, with its defaults and bounds."""
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    try:
        conversation_configure(
            conversation=conversation,
            user=request.user,
            changes={"model_slug": request.POST.get("model", "")},
        )
    except ValidationError as exc:
        # A model gone or taken away since the page was made: the panel says so.
        conversation.refresh_from_db()
        context = settings_context(request.user, conversation, problem=" ".join(exc.messages))
        return render(request, "conversations/_settings.html", context)
    if not request.htmx:
        return redirect(conversation)
    return _settings_panel(request, conversation)


@login_required
@require_POST
def conversation_rename_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    form = TitleForm(request.POST)
    if form.is_valid():
        conversation_rename(conversation=conversation, title=form.cleaned_data["title"])
    elif request.POST.get("title", "").strip():  # an empty title changes nothing, as before
        return HttpResponseBadRequest(" ".join(str(e) for e in form.errors["title"]))
    return redirect(conversation)


@login_required
@require_POST
def conversation_delete_view(
    request: AuthenticatedHttpRequest, conversation_id: ConversationId
) -> HttpResponse:
    conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
    conversation_delete(conversation=conversation)
    return redirect("conversation-list")


@login_required
@require_POST
def theme_view(request: HtmxRequest) -> HttpResponse:
    """Remembers the user's theme (system, light or dark); pages render it on <html>."""
    theme = request.POST.get("theme", "")
    if theme not in UserPreferences.Theme.values:
        return HttpResponseBadRequest("Choose a theme: system, light or dark.")
    UserPreferences.objects.update_or_create(user=request.user, defaults={"theme": theme})
    if request.htmx:  # the page already shows the new theme (chat.js set it)
        return HttpResponse(status=204)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = "conversation-list"
    return redirect(back)
