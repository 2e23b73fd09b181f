"""Search reads one owner's messages only, and indexes a bounded prefix of long text.

PostgreSQL only, as migration 0010 (which this redoes): on SQLite it changes nothing.

The prefix: a tsvector holds at most 1 MB, and a reply of about 1 MB of distinct words could not
be saved (its vector was computed when it settled, and failed). A message's vector is now made
from its first 65,536 characters (conversations.search.query.INDEXED_CHARS, which says why that
many): every text can be saved, and is found by the words of its beginning.

The owner: the GIN index matched a word among everyone's messages before the owner's were kept,
so one user's query cost grew with everyone's data and told how common a word was. Each message
now holds its conversation's owner, `search_owner_id` (a column Django does not know, as the
vector), kept by triggers: set when a message is written, and when its conversation is written
or changes hands. The message index is GIN on (owner, vector), with btree_gin, so a query reads
the owner's matches only (a query without an owner, the admin's, still reads the vector's
entries); a btree on (owner, id) walks an owner's messages newest first, for a common word;
the title index starts with the owner too. The owner's value comes from the database, never
from a request, and queries still check the conversation's owner, so a stale value could only
hide a message, never show another user's.

Like 0010 it rewrites the message table, locked meanwhile. Reversing it restores 0010's
definitions, which fails if a message's text is now too long for them; btree_gin stays.
"""

from django.db import migrations

OLD_MESSAGE_VECTOR = """
    ALTER TABLE conversations_message ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        CASE WHEN status IN ('pending', 'streaming') THEN NULL
        ELSE to_tsvector('simple'::regconfig, translate(content, '<>', '  ')) END
    ) STORED
"""
TITLE_VECTOR = "to_tsvector('simple'::regconfig, translate(title, '<>', '  '))"

FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    # Dropped first (with its index), so that filling in the owner does not compute it again.
    "ALTER TABLE conversations_message DROP COLUMN search_vector",
    "ALTER TABLE conversations_message ADD COLUMN search_owner_id integer",
    """
    UPDATE conversations_message m SET search_owner_id = c.owner_id
    FROM conversations_conversation c WHERE c.id = m.conversation_id
    """,
    """
    CREATE FUNCTION conversations_message_search_owner() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        SELECT owner_id INTO NEW.search_owner_id
        FROM conversations_conversation WHERE id = NEW.conversation_id;
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE TRIGGER conversations_message_search_owner
    BEFORE INSERT OR UPDATE OF conversation_id ON conversations_message
    FOR EACH ROW EXECUTE FUNCTION conversations_message_search_owner()
    """,
    # A conversation's messages follow its owner; on insert too, for messages written before
    # their conversation in one transaction (the foreign key is checked at commit).
    """
    CREATE FUNCTION conversations_conversation_search_owner() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE conversations_message SET search_owner_id = NEW.owner_id
        WHERE conversation_id = NEW.id AND search_owner_id IS DISTINCT FROM NEW.owner_id;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER conversations_conversation_search_owner_insert
    AFTER INSERT ON conversations_conversation
    FOR EACH ROW EXECUTE FUNCTION conversations_conversation_search_owner()
    """,
    """
    CREATE TRIGGER conversations_conversation_search_owner_update
    AFTER UPDATE OF owner_id ON conversations_conversation
    FOR EACH ROW WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id)
    EXECUTE FUNCTION conversations_conversation_search_owner()
    """,
    """
    ALTER TABLE conversations_message ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        CASE WHEN status IN ('pending', 'streaming') THEN NULL
        ELSE to_tsvector('simple'::regconfig, translate(left(content, 65536), '<>', '  ')) END
    ) STORED
    """,
    """
    CREATE INDEX conversations_message_search ON conversations_message
    USING gin (search_owner_id, search_vector)
    """,
    """
    CREATE INDEX conversations_message_search_newest ON conversations_message
    (search_owner_id, id)
    """,
    "DROP INDEX conversations_conversation_title_search",
    f"""
    CREATE INDEX conversations_conversation_title_search ON conversations_conversation
    USING gin (owner_id, {TITLE_VECTOR})
    """,
    # The planner's statistics for the new column now, not at the next autovacuum: recent_first
    # chooses how to find a user's matches from its estimates.
    "ANALYZE conversations_message",
]
BACKWARD = [
    "DROP INDEX conversations_conversation_title_search",
    f"""
    CREATE INDEX conversations_conversation_title_search ON conversations_conversation
    USING gin ({TITLE_VECTOR})
    """,
    "DROP TRIGGER conversations_conversation_search_owner_update ON conversations_conversation",
    "DROP TRIGGER conversations_conversation_search_owner_insert ON conversations_conversation",
    "DROP FUNCTION conversations_conversation_search_owner()",
    "DROP TRIGGER conversations_message_search_owner ON conversations_message",
    "DROP FUNCTION conversations_message_search_owner()",
    # Their indexes go with them.
    "ALTER TABLE conversations_message DROP COLUMN search_vector",
    "ALTER TABLE conversations_message DROP COLUMN search_owner_id",
    OLD_MESSAGE_VECTOR,
    "CREATE INDEX conversations_message_search ON conversations_message USING gin (search_vector)",
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
        ("conversations", "0011_share_snapshots"),
    ]

    operations = [
        migrations.RunPython(run(FORWARD), run(BACKWARD), elidable=False),
    ]
