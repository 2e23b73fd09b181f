import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create (or reset) the demo user and print its name and password."

    def handle(self, *args: object, **options: object) -> None:
        username = os.environ.get("DEMO_USERNAME", "demo")
        password = os.environ.get("DEMO_PASSWORD", "demo-password")
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.set_password(password)
        user.save()
        self.stdout.write(
            self.style.SUCCESS(f"Demo user ready: username {username!r}, password {password!r}")
        )
