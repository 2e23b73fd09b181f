"""Feedback: its owner's thumbs up or down on a reply, with a reason, and what the reply was
generated with, for evaluating models."""

from django.conf import settings
from django.db import models

from conversations.types import AnyUser

MAX_REASON = 1000


class FeedbackQuerySet(models.QuerySet["Feedback"]):
    def of(self, user: AnyUser) -> "FeedbackQuerySet":
        """The user's own ratings (only a conversation's owner rates its replies)."""
        return self.filter(owner=user) if user.is_authenticated else self.none()

    def approval_by_model(self) -> list[dict[str, object]]:
        """A row per model slug: how many of its replies were rated, how many up, and the share
        of ups among them (0 to 1), most rated first."""
        rows = (
            self.order_by()
            .values("model_slug")
            .annotate(
                rated=models.Count("pk"),
                ups=models.Count("pk", filter=models.Q(rating=Feedback.Rating.UP)),
            )
            .order_by("-rated", "model_slug")
        )
        return [{**row, "share": row["ups"] / row["rated"]} for row in rows]


class Feedback(models.Model):
    class Rating(models.TextChoices):
        UP = "up", "Thumbs up"
        DOWN = "down", "Thumbs down"

    # One a reply: rating it again replaces it.
    message = models.OneToOneField(
        "conversations.Message", on_delete=models.CASCADE, related_name="feedback"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="feedback"
    )
    rating = models.CharField(max_length=4, choices=Rating.choices)
    reason = models.TextField(max_length=MAX_REASON, blank=True)
    # Copied from the reply when it is rated, so the rating keeps saying what it was about:
    # the model and the settings it was generated with.
    model_slug = models.CharField(max_length=50, blank=True)
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = FeedbackQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-pk"]
        verbose_name_plural = "feedback"
        indexes = [models.Index(fields=["model_slug", "rating"], name="feedback_by_model")]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on reply {self.message_id} by {self.owner}"
