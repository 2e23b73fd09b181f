"""The settings page's Import form: it posts here, and this page shows what was imported."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from conversations.imports import FORMATS
from conversations.imports.departure import client_left
from conversations.imports.importer import ImportReport, check_request_size
from conversations.imports.slots import ImportBusy
from conversations.imports.source import ImportLimited, ImportRefused
from conversations.imports.uploads import import_upload
from conversations.types import AuthenticatedHttpRequest


class ImportForm(forms.Form):
    file = forms.FileField(label=_("Export file"))
    format = forms.ChoiceField(
        label=_("Format"),
        required=False,
        choices=[
            ("", _("Detect from the file")),
            *((name, f.LABEL) for name, f in FORMATS.items()),
        ],
    )
    keep_partial = forms.BooleanField(
        label=_("Keep what can be imported if some conversations cannot"), required=False
    )


@never_cache
@csrf_exempt  # checked below, once the upload's size is known to be acceptable
@login_required
@require_POST
def import_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Refuse an upload over the limit from its Content-Length, before anything parses the
    body (the CSRF check would: it reads the form, file and all)."""
    try:
        check_request_size(request.META)
    except ImportRefused as exc:
        return _page(request, error=exc.message, status=413)
    return _import(request)


@csrf_protect
def _import(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        errors = " ".join(str(e) for field in form.errors.values() for e in field)
        return _page(request, error=errors, status=400)
    try:
        report = import_upload(
            owner=request.user,
            upload=form.cleaned_data["file"],
            fmt=form.cleaned_data["format"] or None,
            keep_partial=form.cleaned_data["keep_partial"],
            client_left=client_left(request),
        )
    except (ImportLimited, ImportBusy) as exc:
        response = _page(request, error=exc.message, status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    except ImportRefused as exc:
        return _page(request, error=exc.message, status=413 if exc.code == "too_large" else 400)
    return _page(request, report=report, status=200)


def _page(
    request: AuthenticatedHttpRequest,
    *,
    report: ImportReport | None = None,
    error: str = "",
    status: int,
) -> HttpResponse:
    label = FORMATS[report.format].LABEL if report and report.format else ""
    return render(
        request,
        "conversations/import_report.html",
        {"report": report, "format_label": label, "error": error},
        status=status,
    )
