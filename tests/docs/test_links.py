"""README.md and docs/ hold together: every relative link and image resolves, anchors included.

A link is `[text](path)`, `![alt](path)` or `[text](path#anchor)`, or an HTML `src`/`srcset`; http(s)
and mailto links are left alone. An `#anchor` into a Markdown file must name one of its headings,
slugged as GitHub slugs them. README.md is the front door, so it also stays short. No database.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 260

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_SOURCE = re.compile(r"\b(src|srcset)=\"([^\"]*)\"")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
EXTERNAL = ("http://", "https://", "mailto:")


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _blank(match: re.Match[str]) -> str:
    """Code is not Markdown: blank it out, keeping its newlines so line numbers stay true."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose(text: str) -> str:
    return CODE_SPAN.sub(_blank, FENCE.sub(_blank, text))


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every link and image outside code."""
    text = prose(text)
    for match in MARKDOWN_LINK.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, match.group(1)
    for match in HTML_SOURCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        candidates = match.group(2).split(",") if match.group(1) == "srcset" else [match.group(2)]
        for candidate in candidates:
            if candidate.split():
                yield line, candidate.split()[0]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, spaces to '-', other punctuation dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    text = FENCE.sub(_blank, page.read_text(encoding="utf-8"))
    for match in HEADING.finditer(text):
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken(page: Path) -> list[str]:
    """What is wrong with each of a page's relative links, as 'page:line: target: why'."""
    problems = []
    for line, target in links(page.read_text(encoding="utf-8")):
        if not target or target.lower().startswith(EXTERNAL):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{line}: {target}"
        if not resolved.is_relative_to(ROOT):
            problems.append(f"{where}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{where}: no such file or folder")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where}: no heading with that anchor in {resolved.name}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = broken(page)
    assert not problems, "\n".join(problems)


def test_the_docs_pages_exist_and_the_readme_links_each() -> None:
    docs = pages()[1:]
    assert docs, "docs/ holds no pages"
    linked = {
        (README.parent / target.partition("#")[0]).resolve()
        for _, target in links(README.read_text(encoding="utf-8"))
    }
    unlisted = [page.name for page in docs if page.resolve() not in linked]
    assert not unlisted, f"README.md does not link {unlisted}"


def code_paths(text: str) -> Iterator[str]:
    """Paths in the repository that inline code names, such as `conversations/engines/base.py`,
    or `generation/feed.py` inside `conversations/`."""
    text = FENCE.sub(_blank, text)
    for match in CODE_SPAN.finditer(text):
        span = match.group(0).strip("`").strip()
        if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", span) and "/" in span:
            first = span.split("/")[0]
            if (ROOT / first).is_dir() and not first.startswith("."):
                yield span
            elif (ROOT / "conversations" / first).is_dir():
                yield f"conversations/{span}"


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_path_the_docs_name_exists(page: Path) -> None:
    """Modules move; the docs that name them must follow."""
    named = code_paths(page.read_text(encoding="utf-8"))
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"{page.relative_to(ROOT)} names {missing}, which do not exist"


def test_readme_stays_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_slugs_follow_github() -> None:
    assert slug("Search at scale: `make bench-search`") == "search-at-scale-make-bench-search"
    assert slug("The embedded model's binding") == "the-embedded-models-binding"
    assert slug("Branches: regenerate, edit, continue, retry") == (
        "branches-regenerate-edit-continue-retry"
    )
    assert slug("Gateway (OpenAI-compatible)") == "gateway-openai-compatible"
    assert slug("snake_case and [a link](x.md)") == "snake_case-and-a-link"


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## A section\n\n[ok](#a-section) [gone](missing.md) [no anchor](#nowhere)\n"
        "`[in code](missing.md)`\n\n```\n[in a block](missing.md)\n```\n"
    )
    found = [target for _, target in links(page.read_text())]
    assert found == ["#a-section", "missing.md", "#nowhere"]
    assert anchors(page) == {"title", "a-section"}
