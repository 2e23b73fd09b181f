import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils.translation import gettext as _

DEFAULT_PASSWORD = "demo-password"


class Command(BaseCommand):
    help = "Create the demo user (or give it DEMO_PASSWORD) and print its name and password."

    def handle(self, *args: object, **options: object) -> None:
        username = os.environ.get("DEMO_USERNAME", "demo")
        given = os.environ.get("DEMO_PASSWORD")
        password = given or DEFAULT_PASSWORD
        user, created = get_user_model().objects.get_or_create(username=username)
        # A new hash (a new salt, even for the same password) ends every session of the user:
        # `make run` runs this at each start, so an unchanged password is left as it is, and a
        # password changed on the account page stands unless DEMO_PASSWORD asks for another.
        unset = created or not user.has_usable_password()
        if unset or (given and not user.check_password(password)):
            user.set_password(password)
            user.save()
        elif not user.check_password(password):
            self.stdout.write(
                self.style.SUCCESS(
                    _("Demo user ready: username %(username)r, with the password it was given.")
                    % {"username": username}
                )
            )
            return
        self.stdout.write(
            self.style.SUCCESS(
                _("Demo user ready: username %(username)r, password %(password)r")
                % {"username": username, "password": password}
            )
        )
