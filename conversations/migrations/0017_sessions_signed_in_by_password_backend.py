"""Sessions that Django's ModelBackend signed in name chatsite's PasswordBackend now.

AUTHENTICATION_BACKENDS lists conversations.services.password_login.PasswordBackend (a
ModelBackend that CHAT_PASSWORD_LOGIN=0 keeps to superusers) in ModelBackend's place, and a
session whose backend is not listed signs in no one: without this, every person would be signed
out by the upgrade. Database sessions only (the default engine); reversible.
"""

from django.conf import settings
from django.db import migrations

BACKEND_KEY = "_auth_user_backend"  # django.contrib.auth.BACKEND_SESSION_KEY
DJANGOS = "django.contrib.auth.backends.ModelBackend"
CHATSITES = "conversations.services.password_login.PasswordBackend"


def rename(old, new):
    def operation(apps, schema_editor):
        if settings.SESSION_ENGINE != "django.contrib.sessions.backends.db":
            return
        from django.contrib.sessions.backends.db import SessionStore

        Session = apps.get_model("sessions", "Session")
        store = SessionStore()
        for session in Session.objects.iterator():
            data = store.decode(session.session_data)
            if data.get(BACKEND_KEY) == old:
                data[BACKEND_KEY] = new
                Session.objects.filter(pk=session.pk).update(session_data=store.encode(data))

    return operation


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0016_external_identities"),
        ("sessions", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(rename(DJANGOS, CHATSITES), rename(CHATSITES, DJANGOS), elidable=True),
    ]
