"""Projects: a user's named group of conversations, with the model and settings that new
conversations in it start with, optionally shared read-only with a Django group."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.urls import reverse

from conversations.types import AnyUser


class ProjectQuerySet(models.QuerySet["Project"]):
    def owned_by(self, user: AnyUser) -> "ProjectQuerySet":
        """The projects the user may change: their own."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)

    def visible_to(self, user: AnyUser) -> "ProjectQuerySet":
        """Their own, and the ones shared with a group they are in (read-only for them)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(shared_with__in=user.groups.all()))

    def by_name(self) -> "ProjectQuerySet":
        return self.order_by("name", "pk")


class Project(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="projects"
    )
    name = models.CharField(max_length=100)
    # What a new conversation in it starts with (as Conversation's own fields: an empty slug is
    # the owner's default model, a null setting the model's default).
    model_slug = models.CharField(max_length=50, blank=True)
    system_prompt = models.TextField(null=True, blank=True)  # noqa: DJ001
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Its members may read its conversations, never write in them; null: the owner's alone.
    shared_with = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("project-detail", kwargs={"project_id": self.pk})
