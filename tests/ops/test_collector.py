"""A server process freezes what it made as it started, so that a full garbage collection, which
stops every stream of the process while it runs, does not walk Django's and chatsite's objects
(chatsite/asgi.py; the pauses it saves are in docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.servers import ROOT, server_env

pytestmark = pytest.mark.django_db(transaction=True)

FREEZE_COUNTS = "import gc; before = gc.get_freeze_count(); import chatsite.asgi; "
FREEZE_COUNTS += "print(before, gc.get_freeze_count())"


def test_the_asgi_application_freezes_the_objects_it_made_as_it_started() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FREEZE_COUNTS],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after = (int(count) for count in done.stdout.split()[-2:])
    assert before == 0
    assert after > 100_000  # Django, Channels, DRF and the app: several hundred thousand
