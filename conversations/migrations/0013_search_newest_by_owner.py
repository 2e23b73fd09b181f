"""An owner's messages newest first, by an index the planner cannot mistake for the primary key.

Migration 0012's btree on (search_owner_id, id) gives the order `id DESC` for one owner, and so
does the primary key: the planner, taking owners as spread evenly over the ids, walked the
primary key backward and read every newer message of everyone else's first (a common word's
search went from 20 ms to 200 ms beside a second user's 200,000 newer messages). On (owner, -id)
only this index gives the order the search asks for (conversations.search.postgresql).
PostgreSQL only, as 0012.
"""

from django.db import migrations

FORWARD = [
    "DROP INDEX conversations_message_search_newest",
    "CREATE INDEX conversations_message_search_newest ON conversations_message"
    " (search_owner_id, (- id))",
]
BACKWARD = [
    "DROP INDEX conversations_message_search_newest",
    "CREATE INDEX conversations_message_search_newest ON conversations_message"
    " (search_owner_id, id)",
]


def run(statements):
    def operation(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return operation


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0012_search_per_owner"),
    ]

    operations = [
        migrations.RunPython(run(FORWARD), run(BACKWARD), elidable=False),
    ]
