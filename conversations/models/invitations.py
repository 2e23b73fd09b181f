"""Invitations: a link staff make for one person to choose a username and password and join."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone


class InvitationQuerySet(models.QuerySet["Invitation"]):
    def usable(self) -> InvitationQuerySet:
        """Not used yet, not expired."""
        return self.filter(used_at__isnull=True, expires_at__gt=timezone.now())


class Invitation(models.Model):
    """One use, until `expires_at`; the person who takes it joins `groups`. Only a hash of its
    token is stored: the link is shown once, to the staff member who made it."""

    token_hash = models.CharField(max_length=64, unique=True)
    note = models.CharField(
        max_length=200, blank=True, help_text="Whom it is for, for your own records."
    )
    groups = models.ManyToManyField(
        Group, blank=True, help_text="The groups the new account joins (they gate models)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invitation",
    )

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.note or f"Invitation {self.pk}"

    @property
    def state(self) -> str:
        if self.used_at is not None:
            return "used"
        return "expired" if self.expires_at <= timezone.now() else "open"
