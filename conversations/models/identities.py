"""Who a person is at an identity provider, for the accounts single sign-on made."""

from django.conf import settings
from django.db import models


class ExternalIdentity(models.Model):
    """A provider's stable name for a person (OpenID Connect's issuer and `sub`), and the local
    account it signs in. Never the username or email: those can change at the provider, or
    belong to a local account that must not be taken over."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    provider = models.CharField(max_length=300, help_text='e.g. "oidc:https://id.example.com"')
    subject = models.CharField(max_length=255)
    # The groups the provider's claim named at the last login: only these are the provider's to
    # take away again, so groups given in chatsite itself stay.
    claimed_groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "subject"], name="one_account_per_identity")
        ]
        verbose_name_plural = "external identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.provider}"
