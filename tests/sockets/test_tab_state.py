"""A tab's view of the replies it streams, without sockets: gaps, duplicates, late events."""

from __future__ import annotations

from conversations.sockets.tabs import ASK_AGAIN_S, Append, AskSnapshot, Replace, TabState


def test_it_appends_deltas_in_order_and_skips_duplicates() -> None:
    tab = TabState(quiet_s=2)
    assert tab.started(7, now=0)
    assert tab.delta(7, 0, "Hello", now=0) == Append(0, "Hello")
    assert tab.delta(7, 0, "Hello", now=0) is None, "a duplicate shows nothing"
    assert tab.delta(7, 3, "lo, you", now=0) == Append(5, ", you"), "only the new part"


def test_a_gap_asks_for_a_snapshot_and_deltas_that_come_meanwhile_continue_it() -> None:
    tab = TabState(quiet_s=2)
    tab.started(7, now=0)
    tab.delta(7, 0, "ab", now=0)
    assert tab.delta(7, 5, "fg", now=0) == AskSnapshot("gap")
    assert tab.delta(7, 7, "hi", now=0) is None, "held while the snapshot is on its way"
    assert tab.snapshot(7, "abcdefg", now=0) == "abcdefghi"
    assert tab.delta(7, 9, "j", now=0) == Append(9, "j")


def test_a_delta_before_its_started_event_waits_for_a_snapshot() -> None:
    tab = TabState(quiet_s=2)
    assert tab.delta(7, 4, "more", now=0) == AskSnapshot("joined")
    assert tab.started(7, now=0), "the start is still shown"
    assert tab.delta(7, 8, "!", now=0) is None, "still waiting for the snapshot"
    assert tab.snapshot(7, "somemore", now=0) == "somemore!"


def test_a_stale_snapshot_does_not_take_text_back() -> None:
    tab = TabState(quiet_s=2)
    tab.started(7, now=0)
    tab.delta(7, 0, "abcdef", now=0)
    assert tab.snapshot(7, "abc", now=0) is None


def test_after_finishing_late_events_change_nothing() -> None:
    tab = TabState(quiet_s=2)
    tab.started(7, now=0)
    assert tab.finished(7)
    assert not tab.finished(7)
    assert tab.delta(7, 0, "late", now=0) is None
    assert tab.snapshot(7, "late", now=0) is None
    assert not tab.started(7, now=0)
    assert not tab.following


def test_a_reply_heard_nothing_about_for_the_quiet_time_is_silent() -> None:
    tab = TabState(quiet_s=2)
    tab.started(7, now=0)
    tab.started(8, now=0)
    tab.delta(8, 0, "x", now=1.5)
    assert tab.silent(now=2.0) == [7]
    tab.pinged(7, now=2.0)
    assert tab.silent(now=2.5) == []
    assert tab.resync(7, now=3.0) == AskSnapshot("resync")
    tab.pinged(7, now=10.0)  # a ping does not count while the text is missing
    assert tab.silent(now=10.0) == [7, 8]


def test_the_finish_shows_what_the_tab_missed_of_the_saved_text() -> None:
    tab = TabState(quiet_s=2)
    tab.started(7, now=0)
    tab.delta(7, 0, "Hello, hello", now=0)
    assert tab.catch_up(7, "Hello, hello!") == Append(12, "!")
    assert tab.catch_up(7, "Hello, hello!") is None, "once"
    assert tab.delta(7, 12, "!", now=0) is None, "the late delta is a duplicate now"


def test_the_finish_shows_the_whole_saved_text_while_a_snapshot_is_awaited() -> None:
    tab = TabState(quiet_s=2)
    assert tab.delta(7, 4, "more", now=0) == AskSnapshot("joined")
    assert tab.catch_up(7, "somemore") == Replace("somemore"), "the live text ends complete"
    assert tab.snapshot(7, "some", now=1) is None, "the late snapshot is stale now"
    assert tab.catch_up(7, "somemore") is None, "once"


def test_a_snapshot_request_without_an_answer_is_asked_again() -> None:
    tab = TabState(quiet_s=2)
    assert tab.delta(7, 4, "more", now=0) == AskSnapshot("joined")
    assert tab.unanswered(now=ASK_AGAIN_S / 2) == []
    assert tab.unanswered(now=ASK_AGAIN_S) == [7], "the request or its answer was lost"
    assert tab.unanswered(now=ASK_AGAIN_S * 1.5) == [], "not at every look"
    assert tab.unanswered(now=ASK_AGAIN_S * 2) == [7]
    assert tab.snapshot(7, "somemore", now=ASK_AGAIN_S * 2) == "somemore"
    assert tab.unanswered(now=10) == [], "answered"
