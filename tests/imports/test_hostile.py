"""Bad and hostile files: each refused with a clear error and nothing written (unless the user
chose to keep what parsed), without reading more than the limits allow, and nothing of a file
ever rendered as HTML."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from conversations.imports import zips
from conversations.imports.importer import import_history
from conversations.imports.limits import Limits
from conversations.imports.source import ImportRefused
from conversations.models import Conversation, Message
from tests.imports.helpers import by_content, imported, shown
from tests.imports.sources import (
    as_json,
    chatgpt_branched,
    chatgpt_conversation,
    chatgpt_node,
    chatgpt_with_system_prompt,
    chatgpt_zip,
    claude_conversation,
    openwebui_chat,
    zipped,
)

pytestmark = pytest.mark.django_db


def refusal(owner: Any, data: bytes, **options: Any) -> ImportRefused:
    with pytest.raises(ImportRefused) as refused:
        imported(owner, data, **options)
    return refused.value


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"Hello, this is not an export", "not_json"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not_json"),
        (b"", "not_json"),
        (b'[{"mapping": {}}, {"mapping": ', "not_json"),  # cut off in the middle
        (b'{"foo": 1}', "unknown_format"),
        (b"[1, 2, 3]", "unknown_format"),
        (b"[]", "empty"),
        (b" \n" * 100_000, "not_json"),
        (b"[" * 1_000_000, "too_deep"),  # would take ijson.items() gigabytes
        (b'{"title": ' + b"[" * 100, "too_deep"),
        (b"PK\x03\x04 but not really a zip", "bad_zip"),
        (zipped({"notes.txt": b"hello"}), "wrong_shape"),
    ],
)
def test_a_file_that_is_not_an_export_is_refused_and_writes_nothing(
    alice: Any, data: bytes, code: str
) -> None:
    assert refusal(alice, data).code == code
    assert not Conversation.objects.exists()


def test_a_file_broken_halfway_imports_nothing_unless_asked_to_keep_what_parsed(
    alice: Any,
) -> None:
    whole = as_json([openwebui_chat("a"), openwebui_chat("b"), openwebui_chat("c")])
    cut = whole[: whole.index(b'"id": "c"') + 3]

    refused = refusal(alice, cut)
    assert refused.code == "not_json" and "conversation 3" in refused.message
    assert not Conversation.objects.exists(), "the first two were rolled back"

    report = imported(alice, cut, keep_partial=True)
    assert len(report.imported) == 2
    assert "not valid JSON at conversation 3" in report.stopped
    assert Conversation.objects.filter(owner=alice).count() == 2


def test_one_bad_conversation_imports_nothing_or_is_skipped_with_its_reason(alice: Any) -> None:
    broken = chatgpt_branched("broken")
    broken["title"] = "Broken one"
    broken["mapping"]["u1"] = "not a node"
    data = chatgpt_zip(chatgpt_with_system_prompt(), broken, chatgpt_branched())

    refused = refusal(alice, data)
    assert refused.code == "bad_conversation"
    assert refused.message.startswith("Conversation 2 of the file (Broken one): ")
    assert "Nothing was imported" in refused.message
    assert not Conversation.objects.exists()

    report = imported(alice, data, keep_partial=True)
    assert [i.title for i in report.imported] == ["Pirate talk", "Arithmetic"]
    assert [(s.title, s.reason, s.messages) for s in report.skipped if s.messages is None] == [
        ("Broken one", "A node of its mapping is not a JSON object.", None)
    ]


def test_a_tree_whose_parents_loop_is_refused(alice: Any) -> None:
    looped = chatgpt_conversation(
        "loop",
        "Loop",
        [
            chatgpt_node("x", "y", "user", "one", 1),
            chatgpt_node("y", "x", "assistant", "two", 2),
        ],
        current_node="y",
    )
    refused = refusal(alice, as_json([looped]))
    assert refused.code == "bad_conversation" and "loop" in refused.message


def test_a_zip_bomb_is_refused_before_it_is_inflated(alice: Any) -> None:
    # 20 MB of zeros deflate to about 20 KB: a ratio of about a thousand.
    bomb = zipped({"conversations.json": b"[" + b"0" * 20_000_000 + b"]"})
    assert len(bomb) < 100_000

    refused = refusal(alice, bomb)
    assert refused.code == "zip_bomb" and "inflates" in refused.message


def test_a_zip_member_larger_than_the_limit_is_refused(alice: Any, settings: Any) -> None:
    settings.CHAT_IMPORT_MAX_BYTES = 1024 * 1024
    small = zipped({"conversations.json": b"[" + b" " * 4_000_000 + b"]"})
    assert len(small) < settings.CHAT_IMPORT_MAX_BYTES

    refused = refusal(alice, small)
    assert refused.code == "too_large"
    assert (
        refused.message == "conversations.json in the zip is 3.8 MB; imports are limited to 1.0 MB."
    )


def test_a_zip_member_that_inflates_past_its_declared_size_is_refused(alice: Any) -> None:
    real = as_json([openwebui_chat()]) + b" " * 50_000
    data = bytearray(zipped({"conversations.json": real}))
    # The central directory says the member inflates to 100 bytes (no ratio to object to).
    entry = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, entry + 24, 100)

    refused = refusal(alice, bytes(data))
    assert refused.code == "bad_zip" and "Bad CRC-32" in refused.message
    assert not Conversation.objects.exists()


def test_a_zip_with_too_many_members_is_refused_before_they_are_listed(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zips, "MAX_ZIP_MEMBERS", 10)
    crowded = zipped({f"file-{i}.txt": b"" for i in range(11)} | {"conversations.json": []})

    refused = refusal(alice, crowded)
    assert refused.code == "zip_bomb" and "over 10 files" in refused.message


def understated(data: bytes, *, zip64: bool) -> bytes:
    """The zip `data`, its end record saying it holds 1 file. With `zip64`, Zip64 end records
    (saying 1 as well) stand before it, and the end record defers to them, as a zip past
    65,535 files or 4 GiB has it."""
    end = data.rindex(b"PK\x05\x06")
    record = bytearray(data[end:])
    struct.pack_into("<HH", record, 8, 1, 1)  # the files on this disk, and in all
    if not zip64:
        return data[:end] + bytes(record)
    size, offset = struct.unpack_from("<LL", record, 12)
    zip64_end = struct.pack("<4sQHHLLQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, size, offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    struct.pack_into("<HHLL", record, 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    return data[:end] + zip64_end + locator + bytes(record)


@pytest.mark.parametrize("zip64", [False, True], ids=["end record", "zip64 end record"])
def test_finding_3_a_zip_whose_end_record_understates_its_files_is_refused_from_its_directory(
    alice: Any, monkeypatch: pytest.MonkeyPatch, zip64: bool
) -> None:
    monkeypatch.setattr(zips, "MAX_ZIP_MEMBERS", 10)
    files: dict[str, Any] = {f"file-{i}.txt": b"" for i in range(11)}
    files["conversations.json"] = []
    crowded = understated(zipped(files), zip64=zip64)
    assert len(zipfile.ZipFile(io.BytesIO(crowded)).infolist()) == 12, "zipfile lists them all"

    def listed(archive: zipfile.ZipFile) -> None:
        raise AssertionError("zipfile listed the zip's files before it was refused")

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", listed)
    refused = refusal(alice, crowded)
    assert refused.code == "zip_bomb" and "over 10 files" in refused.message


def test_a_zip_that_lists_as_many_files_as_allowed_is_read(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zips, "MAX_ZIP_MEMBERS", 12)
    files: dict[str, Any] = {f"file-{i}.txt": b"" for i in range(11)}
    files["conversations.json"] = [openwebui_chat()]
    for zip64 in (False, True):
        Conversation.objects.all().delete()
        report = imported(alice, understated(zipped(files), zip64=zip64))
        assert [i.title for i in report.imported] == ["Colours"]


class CountingFile(io.FileIO):
    """A file that counts the bytes read from it."""

    bytes_read = 0

    def read(self, size: int = -1, /) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data or b"")
        return data or b""

    def readinto(self, buffer: Any, /) -> int:
        count = super().readinto(buffer) or 0
        self.bytes_read += count
        return count


def test_a_1_gb_file_is_refused_without_reading_it(alice: Any, tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(1024**3)  # sparse: a gigabyte on paper, nothing on the disk
    with CountingFile(path, "rb") as file:
        with pytest.raises(ImportRefused) as refused:
            import_history(owner=alice, file=file)
        assert file.bytes_read == 0

    assert refused.value.code == "too_large"
    assert refused.value.message == "The file is 1.0 GB; imports are limited to 512.0 MB."


def test_one_huge_conversation_is_refused_without_holding_it(alice: Any) -> None:
    limits = Limits(
        max_bytes=10**8,
        max_conversation_bytes=100_000,
        max_conversations=10,
        max_messages=10,
        max_message_chars=10**7,
    )
    chat = openwebui_chat()
    chat["chat"]["history"]["messages"]["r2"]["content"] = "x" * 300_000
    with pytest.raises(ImportRefused) as refused:
        import_history(owner=alice, file=io.BytesIO(as_json([chat])), limits=limits)
    assert refused.value.code == "conversation_too_large"


def test_the_caps_on_conversations_messages_and_text(alice: Any, settings: Any) -> None:
    settings.CHAT_IMPORT_MAX_CONVERSATIONS = 2
    three = as_json([openwebui_chat("a"), openwebui_chat("b"), openwebui_chat("c")])
    assert refusal(alice, three).code == "too_many_conversations"
    kept = imported(alice, three, keep_partial=True)
    assert len(kept.imported) == 2 and "more than 2 conversations" in kept.stopped

    settings.CHAT_IMPORT_MAX_MESSAGES = 2
    refused = refusal(alice, as_json([claude_conversation()]))
    assert "It holds 4 messages; an import takes up to 2 a conversation." in refused.message

    settings.CHAT_IMPORT_MAX_MESSAGES = 100
    settings.CHAT_IMPORT_MAX_MESSAGE_CHARS = 10
    refused = refusal(alice, as_json([claude_conversation("long")]))
    assert "characters long; an import takes up to 10." in refused.message


def test_text_a_database_cannot_store_is_cleaned(alice: Any) -> None:
    chat = openwebui_chat()
    chat["title"] = "Nul\x00 title"
    chat["chat"]["history"]["messages"]["q1"]["content"] = "Name\x00 a colour \ud800."

    report = imported(alice, json.dumps([chat]).encode())

    conversation = Conversation.objects.get(pk=report.imported[0].id)
    assert conversation.title == "Nul title"
    assert shown(conversation)[0][1].startswith("Name a colour ")


HOSTILE_TITLE = '<script>alert("title")</script><b>bold</b>'
HOSTILE_TEXT = "<img src=x onerror=alert(1)> and <script>alert('text')</script>"


def test_html_in_titles_and_messages_is_shown_as_text(alice: Any) -> None:
    chat = openwebui_chat()
    chat["title"] = HOSTILE_TITLE
    chat["chat"]["history"]["messages"]["q1"]["content"] = HOSTILE_TEXT
    chat["chat"]["history"]["messages"]["r2"]["content"] = HOSTILE_TEXT
    report = imported(alice, as_json([chat]))
    conversation = Conversation.objects.get(pk=report.imported[0].id)
    assert conversation.title == HOSTILE_TITLE, "stored as the text it is"

    client = Client()
    client.force_login(alice)
    for page in ("/", conversation.get_absolute_url()):
        html = client.get(page).content.decode()
        assert "&lt;script&gt;alert(&quot;title&quot;)&lt;/script&gt;" in html, page
        assert "<script>alert" not in html and "<b>bold</b>" not in html, page
        assert "<img src=x" not in html and 'onerror="alert' not in html, page
    page = client.get(conversation.get_absolute_url()).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt; and &lt;script&gt;" in page, "shown, as text"


def test_another_users_data_is_never_touched(alice: Any, charlie: Any) -> None:
    """A chatsite file naming alice's conversation and messages makes charlie new ones."""
    theirs = Conversation.objects.create(owner=alice, title="Alice's")
    question = Message.objects.create(conversation=theirs, role="user", content="Secret?")
    forged = {
        "id": str(theirs.pk),
        "title": "Taken over",
        "owner": "alice",
        "current_message": question.pk,
        "messages": [{"id": question.pk, "parent": None, "role": "user", "content": "Overwritten"}],
    }

    report = imported(charlie, as_json(forged))

    copy = Conversation.objects.get(pk=report.imported[0].id)
    assert copy.owner == charlie and copy.pk != theirs.pk
    assert by_content(copy)["Overwritten"].pk != question.pk
    theirs.refresh_from_db()
    assert theirs.title == "Alice's" and theirs.owner == alice
    assert [m.content for m in theirs.messages.all()] == ["Secret?"]
    assert not Conversation.objects.filter(owner=alice, origin="import").exists()


def test_an_unknown_format_name_is_refused(alice: Any) -> None:
    assert refusal(alice, as_json([openwebui_chat()]), fmt="gemini").code == "bad_format"
