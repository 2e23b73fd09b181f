"""The sidebar's head (its projects and pinned conversations) and a conversation's organising
menu items, for every page that includes the sidebar or the menu, whatever view renders it."""

from typing import Any

from django import template

from conversations.models import Conversation, Project

register = template.Library()

# Pins are few by nature; the sidebar shows this many (the newest), and search finds the rest.
PINNED_SHOWN = 50


@register.inclusion_tag("conversations/_sidebar_heads.html", takes_context=True)
def sidebar_heads(context: template.Context) -> dict[str, Any]:
    """Two small queries, never a transcript: the projects, and the pinned conversations."""
    request = context["request"]
    user = request.user
    pinned = (
        Conversation.objects.visible_to(user)
        .filter(pinned=True, archived=False)
        .newest_first()
        .only("id", "title", "pinned", "project_id")
    )
    return {
        "projects": list(Project.objects.visible_to(user).by_name().only("id", "name", "owner")),
        "pinned": list(pinned[:PINNED_SHOWN]),
        "conversation": context.get("conversation"),
        "project": context.get("project"),
        "user": user,
        "csrf_token": context.get("csrf_token"),
        "request": request,
        "here": request.get_full_path(),
    }


@register.inclusion_tag("conversations/_organise_menu.html", takes_context=True)
def organise_menu(context: template.Context, conversation: Conversation) -> dict[str, Any]:
    request = context["request"]
    return {
        "conversation": conversation,
        "projects": list(Project.objects.owned_by(request.user).by_name().only("id", "name")),
        "csrf_token": context.get("csrf_token"),
        "here": request.get_full_path(),
    }
