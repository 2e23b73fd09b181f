"""A person's replies stop when their access ends: they signed out everywhere, their account was
deactivated, or they left the groups a model is for.

Each reply being written is stopped as a Stop from a tab is, wherever it runs: recorded in its
row (read at every flush) and told to its conversation's group at once, after the commit. Their
sockets close by themselves when their sessions end (conversations.signals tells them), and a tab
on a conversation of a model they lost closes (ModelsLost to their group); their API tokens stop
with the account (services.tokens refuses an inactive user's).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_save
from django.dispatch import receiver

from conversations.engines import catalogue
from conversations.events import broadcast
from conversations.events.protocol import Cancel, ModelsLost
from conversations.generation import rows
from conversations.models import Message
from conversations.signals import user_group

logger = logging.getLogger("chatsite.generation")

SIGNED_OUT = "signed_out"
DEACTIVATED = "deactivated"
ACCESS_REMOVED = "access_removed"


def stop_replies_of(user_id: int, *, cancelled_by: str, models_kept: set[str] | None = None) -> int:
    """Stop the user's replies being written (with `models_kept`, those of other models only);
    how many were asked to stop."""
    active = Message.objects.filter(conversation__owner_id=user_id).active()
    if models_kept is not None:
        active = active.exclude(model_slug__in=models_kept)
    requested_at = time.time()
    stopped = 0
    for message in active.select_related("conversation").only("pk", "conversation__id"):
        rows.record_stop(message.pk, cancelled_by, rows.unix_time(requested_at))
        stop = Cancel(message_id=message.pk, requested_at=requested_at, cancelled_by=cancelled_by)
        transaction.on_commit(functools.partial(_tell, message.conversation.group_name, stop))
        stopped += 1
    if stopped:
        logger.info("stopped %d replies of user %s: %s", stopped, user_id, cancelled_by)
    return stopped


def _tell(group: str, event: Cancel | ModelsLost) -> None:
    broadcast.to_group_from_sync(group, event)


def stop_replies_of_models_lost(user_id: int) -> int:
    """Stop the user's replies written by a model their groups no longer allow, and close their
    tabs on conversations of those models (in every process, after the commit)."""
    user = get_user_model().objects.get(pk=user_id)
    allowed = sorted(spec.slug for spec in catalogue.models_for(user))
    lost = ModelsLost(message_id=None, models_kept=allowed)
    transaction.on_commit(functools.partial(_tell, user_group(user_id), lost))
    return stop_replies_of(user_id, cancelled_by=ACCESS_REMOVED, models_kept=set(allowed))


@receiver(post_save, sender="auth.User")
def _deactivated(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created and not instance.is_active:
        stop_replies_of(instance.pk, cancelled_by=DEACTIVATED)


_members_cleared: dict[int, set[int]] = {}


@receiver(m2m_changed, sender=get_user_model().groups.through)
def _groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    """A user left groups (user.groups.remove, or group.user_set.remove): the replies of models
    only those groups allowed stop."""
    if action == "pre_clear" and isinstance(instance, Group):
        # The members a group.user_set.clear() removes are gone by post_clear.
        _members_cleared[instance.pk] = set(instance.user_set.values_list("pk", flat=True))
        return
    if action not in ("post_remove", "post_clear"):
        return
    if isinstance(instance, Group):
        users = pk_set if action == "post_remove" else _members_cleared.pop(instance.pk, set())
    else:
        users = {instance.pk}
    for user_id in users or ():
        stop_replies_of_models_lost(user_id)
