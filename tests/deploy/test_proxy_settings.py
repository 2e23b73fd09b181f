"""The client's address for the login throttle: X-Forwarded-For is read only as far as
CHAT_TRUSTED_PROXY_COUNT proxies vouch for it, from the right."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory, override_settings

from chatsite.proxy_settings import forwarded_client_address

PROXY = "10.0.0.5"  # REMOTE_ADDR: the nearest proxy


def address(count: int, forwarded: str | None) -> str | None:
    meta: dict[str, Any] = {"REMOTE_ADDR": PROXY}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    request = RequestFactory().post("/accounts/login/", **meta)
    with override_settings(CHAT_TRUSTED_PROXY_COUNT=count):
        return forwarded_client_address(request)


@pytest.mark.parametrize(
    ("count", "forwarded", "client"),
    [
        (0, "198.51.100.1", PROXY),  # no proxy configured: the header is anyone's to send
        (1, "198.51.100.1", "198.51.100.1"),
        (1, "203.0.113.7, 198.51.100.1", "198.51.100.1"),  # what the client claimed, left
        (2, "203.0.113.7, 198.51.100.1, 10.0.0.9", "198.51.100.1"),
        (1, "2001:db8::1", "2001:db8::1"),
        (1, None, PROXY),  # not through the proxy (a health check on the app server)
        (2, "198.51.100.1", PROXY),  # fewer entries than proxies
        (1, "not-an-address", PROXY),
    ],
)
def test_it_takes_the_address_the_nearest_trusted_proxy_saw(
    count: int, forwarded: str | None, client: str
) -> None:
    assert address(count, forwarded) == client
