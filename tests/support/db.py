"""The database connections a test's async code leaves behind."""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.db import connections


async def close_worker_connections() -> None:
    """Close the connections of asgiref's worker thread, where a test's async queries ran.

    Channels' cleanup and Django's test client sometimes leave that thread's connection open,
    which a server would close at the end of a request; on PostgreSQL it then keeps the test
    database from being dropped at the end of the run.
    """
    await database_sync_to_async(connections.close_all)()
