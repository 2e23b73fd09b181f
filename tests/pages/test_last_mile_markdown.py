"""Issue 30, problem 1: Markdown rendered as people expect it, while it streams and after.

Line breaks kept, bare URLs made links, ~~strikethrough~~ and task lists; and the block being
written rendered as it will be once whole, so a reply does not jump when it ends. The browser
shows the same in tests/pages/test_last_mile_markdown_browser.py.
"""

from __future__ import annotations

import re

import pytest

from conversations.pages.markdown import (
    MAX_RENDERED_WRITING_CHARS,
    closed_length,
    render_markdown,
    render_writing,
    streaming_parts,
)
from conversations.pages.unfinished import as_finished
from tests.pages.test_rendering import assert_inert

POEM = "Roses are red,\nViolets are blue,\nSugar is sweet,\nAnd so are you."


def test_problem_1_single_line_breaks_are_kept() -> None:
    out = render_markdown(POEM)
    assert out.count("<br>") == 3 and out.startswith("<p>Roses are red,<br>")


def test_problem_1_bare_urls_are_links() -> None:
    out = render_markdown("Docs: https://example.com/a_b?x=1. Or www.example.org")
    assert '<a href="https://example.com/a_b?x=1" rel="noopener noreferrer nofollow">' in out
    assert '<a href="http://www.example.org"' in out
    assert_inert(out)


def test_problem_1_strikethrough_is_struck() -> None:
    assert render_markdown("~~old~~ new") == "<p><s>old</s> new</p>\n"


def test_problem_1_task_lists_are_disabled_checkboxes_named_by_their_label() -> None:
    out = render_markdown("- [ ] write\n- [x] test\n")
    assert '<ul class="contains-task-list">' in out
    boxes = re.findall(r"<label><input ([^>]*)> (\w+)</label>", out)
    assert [name for _, name in boxes] == ["write", "test"]
    for attributes, name in boxes:
        assert 'type="checkbox"' in attributes and 'disabled="disabled"' in attributes
        assert ('checked="checked"' in attributes) == (name == "test")
    assert_inert(out)


# -- the block being written: shown as it will be -------------------------------------------

GROWING = {
    "an open code fence": (
        "```python\nx = 1\ny",
        '<pre class="highlight"><code class="language-python">',
    ),
    "a table's header": ("| Engine | Speed |", "<th>Engine</th>"),
    "a table's delimiter row": (
        "| Engine | Speed |\n|:--|-",
        '<th style="text-align:left">Engine</th>',
    ),
    "a table's first row": ("| a | b |\n|---|---|\n| 1 | 2", "<td>2</td>"),
    "half-written bold": ("It is **very", "<strong>very</strong>"),
    "half-written strikethrough": ("It is ~~gone", "<s>gone</s>"),
    "a code span": ("Run `make te", "<code>make te</code>"),
    "a link's address": (
        "See [the docs](https://example.com/do",
        '<a href="https://example.com/do"',
    ),
    "a list": ("- one\n- two **b", "<li>two <strong>b</strong></li>"),
}


@pytest.mark.parametrize(("block", "shown"), GROWING.values(), ids=GROWING.keys())
def test_problem_1_the_block_being_written_is_shown_in_its_final_form(
    block: str, shown: str
) -> None:
    written, writing = streaming_parts("Intro\n\n" + block)
    assert written == render_markdown("Intro\n\n")
    assert shown in writing, writing
    assert_inert(str(writing))


def test_problem_1_markers_with_nothing_after_them_are_not_shown() -> None:
    """They would show as text, then vanish once their text comes: the block only grows."""
    for block, text in [
        ("Hello **", "Hello"),
        ("Hello `", "Hello"),
        ("Steps:\n1.", "Steps:"),
        ("Next\n-", "Next"),
    ]:
        assert render_writing(block) == f"<p>{text}</p>\n", block
    assert render_writing("## ") == ""


def test_problem_1_what_is_written_already_is_not_touched() -> None:
    for block in [
        "a snake_case name",
        "costs $5 and $10",
        "2 * 3 = 6",
        "a\\*b",
        "$x_1^*$ here",
        "$$x^*$$ here",
    ]:
        assert as_finished(block) == block


def test_problem_1_the_finished_blocks_render_as_they_were_shown() -> None:
    """Each step of a streamed reply: its whole blocks are the final render's beginning."""
    reply = (
        f"{POEM}\n\n| Engine | Speed |\n|:--|--:|\n| vLLM | 95 |\n\n"
        "```python\nprint('hi')\n```\n\nSee https://example.com and ~~this~~ **that**.\n"
    )
    final = str(render_markdown(reply))
    for end in range(1, len(reply) + 1):
        written, _ = streaming_parts(reply[:end])
        assert final.startswith(str(written)), reply[:end]
    _, writing = streaming_parts(reply)
    assert final.endswith(str(writing))


def test_problem_1_a_block_too_long_to_render_for_every_frame_is_text() -> None:
    block = "word " * (MAX_RENDERED_WRITING_CHARS // 5 + 1)
    assert render_writing(block) == block and not hasattr(render_writing(block), "__html__")
    assert closed_length(block) == 0


CODE = (
    "".join(f"def f{n}(x):\n    return x * {n}  # times {n}\n\n" for n in range(12))
    + "y = [\n"
    + "    1,\n" * 30
    + "]\n"
)


def test_problem_1_an_open_code_block_is_the_code_box_it_will_be() -> None:
    """Highlighted in parts while it is written (each part once), it reads as the whole."""
    lines = CODE.splitlines(keepends=True)
    for end in range(1, len(lines) + 1):
        block = "Intro line\n```python\n" + "".join(lines[:end])
        assert render_writing(block) == render_markdown(block + "```\n"), end
    # Mid-line too: the text so far, in the box.
    writing = render_writing("```python\ndef f(x):\n    ret")
    assert writing.startswith('<pre class="highlight"><code class="language-python">')
    assert re.sub(r"<[^>]+>", "", writing) == "def f(x):\n    ret\n\n"  # as markdown-it's


def test_problem_1_a_closing_fence_being_written_is_no_line_of_code() -> None:
    whole = render_markdown("```python\nx = 1\n```\n")
    for closing in ["`", "``", "```"]:
        assert render_writing("```python\nx = 1\n" + closing) == whole, closing
