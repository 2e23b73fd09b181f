"""The coalescer alone: what goes out in which frame, and what a snapshot holds."""

from __future__ import annotations

import pytest

from conversations.generation.coalescer import Coalescer, Frame


def test_it_sends_the_first_text_at_once_and_merges_later_text_into_one_frame() -> None:
    text = Coalescer(interval_s=0.03)
    text.add("Hel")
    assert text.frame_due_in(now=100.0) == 0
    assert text.take_frame(now=100.0) == Frame(0, "Hel")
    text.add("lo")
    text.add(", world")
    assert text.frame_due_in(now=100.01) == pytest.approx(0.02)
    assert text.take_frame(now=100.03) == Frame(3, "lo, world")
    assert text.take_frame(now=100.1) is None, "nothing new: no frame"
    assert text.text == "Hello, world" and text.sent == text.length == 12


def test_a_frame_is_due_at_once_when_the_interval_has_passed() -> None:
    text = Coalescer(interval_s=0.03)
    text.add("a")
    text.take_frame(now=1.0)
    text.add("b")
    assert text.frame_due_in(now=1.5) == 0


def test_a_snapshot_holds_what_was_sent_so_later_frames_continue_it() -> None:
    text = Coalescer(interval_s=0.03)
    text.add("one ")
    text.take_frame(now=1.0)
    text.add("two ")  # received, not sent yet
    assert text.snapshot() == "one "
    frame = text.take_frame(now=2.0)
    assert frame == Frame(len(text.snapshot()) - len("two "), "two ")
    assert text.snapshot() == "one two "
