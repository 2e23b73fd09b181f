"""The project pages: make one, see one with its conversations (a group member read-only), change
or delete it, and start a conversation in it."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conversations.engines import catalogue
from conversations.models import Conversation, Project
from conversations.pages.chat import sidebar_page
from conversations.pages.project_forms import ProjectDeleteForm, ProjectForm
from conversations.services import branches
from conversations.services.conversations import conversation_create
from conversations.services.errors import TooManyConversations
from conversations.services.limits import check_create_allowed
from conversations.services.projects import (
    project_change,
    project_create,
    project_delete,
    project_or_404,
    project_unused_conversation,
)
from conversations.types import AuthenticatedHttpRequest, ConversationId

PROJECT_PAGE_SIZE = 50


def _form_errors(form: ProjectForm, refused: ValidationError) -> None:
    for name, errors in refused.message_dict.items():
        form.add_error("model" if name == "model_slug" else name, errors)


@login_required
@require_http_methods(["GET", "POST"])
def project_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = ProjectForm(request.POST or None, owner=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_create(
                owner=request.user,
                name=form.cleaned_data["name"],
                settings=form.settings(),
                shared_with=form.cleaned_data["shared_with"],
            )
        except ValidationError as refused:
            _form_errors(form, refused)
        else:
            return redirect(project)
    status = 400 if form.errors else 200
    return render(
        request,
        "conversations/project_form.html",
        {
            "form": form,
            "model_choices": catalogue.models_for(request.user),
            "sidebar": sidebar_page(request, 1),
        },
        status=status,
    )


@login_required
@require_GET
def project_detail(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_or_404(user=request.user, project_id=project_id, writable=False)
    return _project_page(request, project)


def _project_page(
    request: AuthenticatedHttpRequest,
    project: Project,
    form: ProjectForm | None = None,
    delete_form: ProjectDeleteForm | None = None,
    status: int = 200,
) -> HttpResponse:
    is_owner = project.owner_id == request.user.pk
    if form is None and is_owner:
        form = ProjectForm(
            owner=request.user,
            initial={
                "name": project.name,
                "model": project.model_slug,
                "system_prompt": project.system_prompt or "",
                "temperature": project.temperature,
                "max_tokens": project.max_tokens,
                "shared_with": project.shared_with_id,
            },
        )
    conversations = Conversation.objects.filter(project=project, archived=False).newest_first()
    page = Paginator(conversations, PROJECT_PAGE_SIZE).get_page(request.GET.get("page", 1))
    return render(
        request,
        "conversations/project.html",
        {
            "sidebar": sidebar_page(request, 1),
            "project": project,
            "is_owner": is_owner,
            "form": form,
            "delete_form": delete_form or ProjectDeleteForm(),
            "project_page": page,
            "model_choices": catalogue.models_for(request.user) if is_owner else [],
        },
        status=status,
    )


@login_required
@require_POST
def project_change_view(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_or_404(user=request.user, project_id=project_id)
    form = ProjectForm(request.POST, owner=request.user)
    if form.is_valid():
        try:
            project_change(
                project=project,
                name=form.cleaned_data["name"],
                settings=form.settings(),
                shared_with=form.cleaned_data["shared_with"],
            )
        except ValidationError as refused:
            _form_errors(form, refused)
    if form.errors:
        project.refresh_from_db()
        return _project_page(request, project, form=form, status=400)
    return redirect(project)


@login_required
@require_POST
def project_delete_view(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_or_404(user=request.user, project_id=project_id)
    form = ProjectDeleteForm(request.POST)
    if not form.is_valid():
        return _project_page(request, project, delete_form=form, status=400)
    project_delete(project=project, keep_conversations=form.cleaned_data["conversations"] == "keep")
    return redirect("conversation-list")


@login_required
@require_POST
def project_conversation_new(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    """A new conversation in the project, with its model and settings; as the plain New
    does, an untouched one of the project's is offered again."""
    project = project_or_404(user=request.user, project_id=project_id)
    unused = project_unused_conversation(project=project)
    if unused is not None:
        return redirect(unused)
    try:
        check_create_allowed(request.user)
    except TooManyConversations as refused:
        response = _project_page(request, project, status=429)
        response["Retry-After"] = str(refused.retry_after)
        return response
    return redirect(conversation_create(owner=request.user, project=project))


@login_required
@require_GET
def project_conversation_read(
    request: AuthenticatedHttpRequest, project_id: int, conversation_id: ConversationId
) -> HttpResponse:
    """A conversation of a project shared with the reader's group, read-only: its branch as
    shown to its owner, without composer, socket or menu. Anyone outside the group gets 404."""
    project = project_or_404(user=request.user, project_id=project_id, writable=False)
    conversation = get_object_or_404(
        Conversation.objects.filter(project=project, archived=False), pk=conversation_id
    )
    return render(
        request,
        "conversations/project_conversation.html",
        {
            "sidebar": sidebar_page(request, 1),
            "project": project,
            "read_only": conversation,
            "messages": branches.visible_branch(conversation),
        },
    )
