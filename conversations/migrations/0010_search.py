"""Full-text search on PostgreSQL: a stored vector of each message's text and GIN indexes.

PostgreSQL only (conversations/search.py searches with icontains elsewhere), so the operations
run only when the database is PostgreSQL; on SQLite this migration changes nothing.

Message text gets a stored generated column, not an expression index: ranking reads the vector
of every matching message, and recomputing to_tsvector for each at query time was 7x slower
(1.9 s against 0.26 s for a word in 28,000 of 200,000 messages). The database keeps it current.
It is NULL while a reply is pending or streaming: the flushes that rewrite a streaming reply's
text every second then neither parse it nor touch the index (they stay HOT updates), and the
vector is computed once, when the reply settles. The statuses are Message.ACTIVE_STATUSES.

Titles are short and cheap to parse, so they get an expression index. Both are
conversations.search.query.VECTOR: the 'simple' configuration, with no stemming, so that a word typed
in part is a prefix of the indexed word in any language (with 'english', "deployi" is not a
prefix of the stem "deploy"); < and > read as spaces, so that text in HTML tags is indexed too.
"""

from django.db import migrations

FORWARD = [
    """
    ALTER TABLE conversations_message ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        CASE WHEN status IN ('pending', 'streaming') THEN NULL
        ELSE to_tsvector('simple'::regconfig, translate(content, '<>', '  ')) END
    ) STORED
    """,
    "CREATE INDEX conversations_message_search ON conversations_message USING gin (search_vector)",
    """
    CREATE INDEX conversations_conversation_title_search ON conversations_conversation
    USING gin (to_tsvector('simple'::regconfig, translate(title, '<>', '  ')))
    """,
]
BACKWARD = [
    "DROP INDEX conversations_conversation_title_search",
    "DROP INDEX conversations_message_search",
    "ALTER TABLE conversations_message DROP COLUMN search_vector",
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
        ("conversations", "0009_conversation_origin"),
    ]

    operations = [
        migrations.RunPython(run(FORWARD), run(BACKWARD), elidable=False),
    ]
