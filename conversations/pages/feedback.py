"""Feedback on a reply from its chat page: the thumbs up and down in its footer, and the reason
a thumbs-down asks for (htmx posts; the answer is the rating's part of the footer again)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from conversations.models import Feedback, Message
from conversations.models.feedback import MAX_REASON
from conversations.services.feedback import feedback_rate
from conversations.types import AuthenticatedHttpRequest, MessageId


@login_required
@require_POST
def message_feedback(request: AuthenticatedHttpRequest, message_id: MessageId) -> HttpResponse:
    # Only the conversation's owner rates its replies: anyone else's reply answers 404, as a
    # missing one does (a group a conversation is shared with reads it, and no more).
    message = get_object_or_404(
        Message.objects.select_related("conversation"),
        pk=message_id,
        conversation__owner=request.user,
    )
    if message.role != Message.Role.ASSISTANT:
        raise Http404
    rating = request.POST.get("rating", "")
    context: dict[str, object] = {"m": message, "max_reason": MAX_REASON}
    try:
        feedback = feedback_rate(
            user=request.user,
            message=message,
            rating=rating,
            reason=request.POST.get("reason", ""),
        )
    except ValidationError as refused:
        message.shown_feedback = Feedback.objects.filter(message=message).first()
        context["error"] = " ".join(refused.messages)
        return render(request, "conversations/_feedback.html", context, status=400)
    message.shown_feedback = feedback
    # A new thumbs-down asks why, the reason field taking the focus; a saved reason says so.
    context["ask_reason"] = rating == Feedback.Rating.DOWN and "reason" not in request.POST
    context["reason_saved"] = feedback is not None and "reason" in request.POST
    return render(request, "conversations/_feedback.html", context)
