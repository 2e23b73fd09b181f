"""Issue 30, problem 8: the committed catalogs are whole and the compiled ones match them.

`make run` on a fresh clone needs no gettext tools, so the .mo files are committed next to the
.po files they are compiled from: these tests fail when an entry is left untranslated or fuzzy,
when a translation drops or renames a placeholder, or when a .po was changed and not compiled
again (`manage.py compilemessages`)."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.utils.translation import to_locale

LOCALE = Path(settings.LOCALE_PATHS[0])
CATALOGS = [
    LOCALE / to_locale(code) / "LC_MESSAGES" / f"{domain}.po"
    for code, _name in settings.LANGUAGES
    if code != settings.LANGUAGE_CODE
    for domain in ("django", "djangojs")
]
PLACEHOLDER = re.compile(r"%(?:\([a-z_]+\))?[sdr]")


def catalog_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.name}"


@pytest.mark.parametrize("po_path", CATALOGS, ids=catalog_id)
def test_problem_8_every_entry_is_translated(po_path: Path) -> None:
    catalog = polib.pofile(str(po_path))
    assert [entry.msgid for entry in catalog.untranslated_entries()] == []
    assert [entry.msgid for entry in catalog.fuzzy_entries()] == []
    assert not catalog.metadata_is_fuzzy  # msgfmt would drop a fuzzy header's plural forms


@pytest.mark.parametrize("po_path", CATALOGS, ids=catalog_id)
def test_problem_8_translations_keep_their_placeholders(po_path: Path) -> None:
    wrong = []
    for entry in polib.pofile(str(po_path)).translated_entries():
        expected = sorted(PLACEHOLDER.findall(entry.msgid_plural or entry.msgid))
        translations = entry.msgstr_plural.values() if entry.msgid_plural else [entry.msgstr]
        # A language with one plural form (Chinese) says the number in it, like the plural.
        wrong += [t for t in translations if sorted(PLACEHOLDER.findall(t)) != expected]
    assert wrong == []


def compiled(entries: list[polib.POEntry] | polib.MOFile) -> dict[tuple[str | None, str], object]:
    """Each entry's translation, by context and msgid (the header aside)."""
    return {
        (entry.msgctxt, entry.msgid): (
            {int(n): text for n, text in entry.msgstr_plural.items()}
            if entry.msgid_plural
            else entry.msgstr
        )
        for entry in entries
        if entry.msgid
    }


@pytest.mark.parametrize("po_path", CATALOGS, ids=catalog_id)
def test_problem_8_the_committed_mo_is_compiled_from_the_po(po_path: Path) -> None:
    mo_path = po_path.with_suffix(".mo")
    assert mo_path.exists(), f"run manage.py compilemessages: {mo_path} is missing"
    po, mo = polib.pofile(str(po_path)), polib.mofile(str(mo_path))
    assert compiled(mo) == compiled(po.translated_entries()), (
        "run manage.py compilemessages: the .mo is stale"
    )
    assert mo.metadata["Plural-Forms"] == po.metadata["Plural-Forms"]
