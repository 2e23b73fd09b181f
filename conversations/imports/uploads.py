"""An import from the settings page or the API: an uploaded file, within the user's hourly
imports (CHAT_IMPORTS_PER_HOUR), logged. manage.py import_history calls import_history itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import IO, cast

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from conversations.imports.departure import never
from conversations.imports.importer import ImportReport, import_history
from conversations.imports.slots import ImportBusy
from conversations.imports.source import ClientLeft, ImportLimited
from conversations.services import ratelimits
from conversations.types import User

logger = logging.getLogger("chatsite.imports")

IMPORT = "import"  # the rate limit's action (services.ratelimits)
HOUR_S = 3600


def import_upload(
    *,
    owner: User,
    upload: UploadedFile[bytes],
    fmt: str | None = None,
    keep_partial: bool = False,
    client_left: Callable[[], bool] = never,
) -> ImportReport:
    """import_history on an uploaded file (on disk past FILE_UPLOAD_MAX_MEMORY_SIZE), within
    the owner's CHAT_IMPORTS_PER_HOUR (ImportLimited): every import started counts, refused or
    not, as each costs the reading; one refused before it started (ImportBusy) does not. It
    stops once `client_left()` (departure.client_left of the request)."""
    started = ratelimits.hit(IMPORT, owner.pk, period=HOUR_S)
    if started.count > settings.CHAT_IMPORTS_PER_HOUR:
        raise ImportLimited(started.retry_after)
    upload.open("rb")
    try:
        report = import_history(
            owner=owner,
            file=cast("IO[bytes]", upload),
            fmt=fmt,
            keep_partial=keep_partial,
            client_left=client_left,
        )
    except ImportBusy:
        ratelimits.refund(IMPORT, owner.pk, counted=started)
        raise
    except ClientLeft:
        logger.info("user %s left during an import: it stopped, nothing more was written", owner.pk)
        raise
    logger.info(
        "user %s imported %d conversations (%s), skipped %d entries%s",
        owner.pk,
        len(report.imported),
        report.format,
        len(report.skipped),
        ", stopped early" if report.stopped else "",
    )
    return report
