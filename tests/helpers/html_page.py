"""What a notebook shows, read back: the HTML parsed and checked well-formed (`Page`: its text,
tags and tables), the extremes table of a trace's page (`facts_table`), a number as the page
writes it (`g3`)."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np

VOID = {"br", "hr", "img", "input", "meta", "link", "wbr"}


class Page(HTMLParser):
    """The HTML parsed: every end tag must close the element open last; the text (entities
    decoded), the tags met, and the rows of every table as lists of cell texts."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.chunks: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.feed(text)
        self.close()
        assert self.open == [], f"unclosed elements: {self.open}"
        self.text = "".join(self.chunks)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in VOID:
            self.open.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.tables[-1][-1].append("")

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()

    def handle_data(self, data):
        self.chunks.append(data)
        if "td" in self.open or "th" in self.open:
            self.tables[-1][-1][-1] += data


def g3(value: float) -> str:
    """A number as the page writes it: 3 significant digits, "—" when not finite."""
    return "—" if not np.isfinite(value) else f"{value:.3g}"


def facts_table(page: Page) -> list[list[str]]:
    """The table of ‖dL/dh_t‖'s extremes (largest, smallest, their ratio) on `page`."""
    return next(t for t in page.tables if t[0][1:] == ["largest", "smallest",
                                                         "largest / smallest"])  # fmt: skip
