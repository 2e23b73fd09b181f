"""The generation lifecycle: a reply from the send that creates it to the row that keeps it.

- replies: the service API (reply_create, reply_start, reply_cancel), taking a Send;
- resolve, placement, sends: a send's steps: its model, engine and settings; where its messages
  go in the tree; its transaction, and the plan of its reply (plans.ReplyPlan);
- runner: one reply being generated, reached by callers in this process as a RunningReply
  (running); its parts: streaming (the engine's request and stream), feed (the text on its way
  to the tabs, coalesced by coalescer), stopping (whether it must stop), outbox (where its
  events go), control (its channel in the group, flushes, heartbeat, grace period, in the
  process's keepalive round), endings (how it ended, the final save);
- listeners: readers of a generation's events in its own process (the gateway's responses);
- titles: the conversation's title, written by its model after the first reply;
- rows: every write to a reply's row, each a status transition;
- recovery: replies whose process died, settled by their stale heartbeat.
"""
