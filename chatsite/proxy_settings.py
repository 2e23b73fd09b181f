"""Whose address a request comes from, behind a reverse proxy; chatsite.settings imports these.

Login throttling (django-axes) counts failures per client address. Without a proxy that is the
connection's peer, REMOTE_ADDR. Behind one, every peer is the proxy, so one client's wrong
passwords would lock everyone out; the client's own address is in the X-Forwarded-For the proxy
sends. That header is only believed when CHAT_TRUSTED_PROXY_COUNT says how many proxies stand
in front: anyone can send one, and without a proxy to overwrite it, it is whatever the client
claims.

Each proxy appends the address of its own peer to X-Forwarded-For (or, at the edge, replaces the
header with it, as deploy/nginx/ does), so with N proxies the client is the N-th entry from the
right. Entries further left are whatever the client sent, and are never read. The app servers
must then be reachable only through the proxy.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from django.conf import settings

from chatsite.env import env_int

if TYPE_CHECKING:  # not at import: settings.py imports this module before Django is set up
    from django.http import HttpRequest

__all__ = ["AXES_CLIENT_IP_CALLABLE", "CHAT_TRUSTED_PROXY_COUNT"]

# The proxies in front of the app servers: 0, none (REMOTE_ADDR is the client); 1, one nginx.
CHAT_TRUSTED_PROXY_COUNT = env_int("CHAT_TRUSTED_PROXY_COUNT", 0, minimum=0)
# None: axes reads REMOTE_ADDR itself.
AXES_CLIENT_IP_CALLABLE = (
    "chatsite.proxy_settings.forwarded_client_address" if CHAT_TRUSTED_PROXY_COUNT else None
)


def forwarded_client_address(request: HttpRequest) -> str | None:
    """The client's address: the CHAT_TRUSTED_PROXY_COUNT-th entry of X-Forwarded-For from the
    right. REMOTE_ADDR when the header holds fewer entries, or that one is not an address (it is
    stored in a GenericIPAddressField): such a request shares the proxy's count."""
    count: int = settings.CHAT_TRUSTED_PROXY_COUNT
    remote: str | None = request.META.get("REMOTE_ADDR")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if count < 1 or len(hops) < count:
        return remote
    try:
        return str(ipaddress.ip_address(hops[-count]))
    except ValueError:
        return remote
