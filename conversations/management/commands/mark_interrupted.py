from django.core.management.base import BaseCommand

from conversations.generation.recovery import replies_mark_interrupted


class Command(BaseCommand):
    help = "Mark replies whose generation died (stale heartbeat) as interrupted."

    def handle(self, *args: object, **options: object) -> None:
        count = replies_mark_interrupted()
        self.stdout.write(f"{count} reply(s) marked interrupted.")
