"""The generation lifecycle: a reply from the send that creates it to the row that keeps it.

- replies: the service API (reply_create, reply_start, reply_cancel);
- runner: one reply being generated, from the engine's stream to the final save;
- coalescer: the reply's text and what of it the tabs were sent (pure);
- control: the generation's channel in the group, flushes, heartbeat, grace period;
- listeners: readers of a generation's events in its own process (the gateway's responses);
- rows: every write to a reply's row, each a status transition;
- recovery: replies whose process died, settled by their stale heartbeat.
"""
