"""The page a locked-out login gets (django-axes' AXES_LOCKOUT_CALLABLE), on the site and the admin."""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_cool_off, get_failure_limit
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """A 429 page that says how long to wait; axes calls it instead of the login view's page."""
    cool_off = get_cool_off(request)
    minutes = math.ceil(cool_off.total_seconds() / 60) if cool_off else None
    return render(
        request,
        "registration/locked_out.html",
        {"failure_limit": get_failure_limit(request, credentials), "cooloff_minutes": minutes},
        status=429,  # Too Many Requests, as axes answers by default
    )
