"""The REST API: read, export and delete one's own conversations, with personal tokens."""
