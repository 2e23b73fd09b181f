"""Where a user is signed in: one row per session, for the account page's list of devices."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext as _


class SignIn(models.Model):
    """A session a user signed in with: its device (the browser's User-Agent) and when it was
    last seen. Made at the login, deleted with its session; a session's expiry lives in the
    session itself (django.contrib.sessions), which the account page reads beside it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_ins"
    )
    session_key = models.CharField(max_length=40, unique=True)
    user_agent = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["-last_seen_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} on {self.device}"

    @property
    def device(self) -> str:
        """The browser and system a User-Agent names, in a few words."""
        agent = self.user_agent
        browser = next(
            (name for token, name in _BROWSERS if token in agent), _("An unknown browser")
        )
        system = next((name for token, name in _SYSTEMS if token in agent), "")
        if not system:
            return browser
        return _("%(browser)s on %(system)s") % {"browser": browser, "system": system}


# The first token found names it: Edge and Opera say Chrome too, Chrome says Safari.
_BROWSERS = [
    ("Edg/", "Edge"),
    ("OPR/", "Opera"),
    ("Firefox/", "Firefox"),
    ("Chrome/", "Chrome"),
    ("Safari/", "Safari"),
    ("curl/", "curl"),
]
_SYSTEMS = [
    ("Android", "Android"),
    ("iPhone", "iPhone"),
    ("iPad", "iPad"),
    ("Windows", "Windows"),
    ("Mac OS X", "macOS"),
    ("CrOS", "ChromeOS"),
    ("Linux", "Linux"),
]
