"""Built pages read as HTML, not as exact strings: the build minifies every page (builder/page_minify.py), so
a test asks for an element, its attributes or its text, whatever the whitespace, quotes and character
references the minifier chose; an inline SVG is read as a browser reads it (in the SVG namespace, its path data
in any of the SVG 1.1 forms the minifier writes: relative commands, implicit line-tos, H and V)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Elements(HTMLParser):
    """Every element of a page, in document order: its tag, its attributes (character references resolved)
    and its text (all the text inside it, references resolved)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self.open: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        text: list[str] = []
        self.elements.append((tag, {key: value or "" for key, value in attrs}, text))
        if tag not in VOID:
            self.open.append((tag, text))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, {key: value or "" for key, value in attrs}, []))

    def handle_endtag(self, tag):
        if any(name == tag for name, _ in self.open):
            while self.open.pop()[0] != tag:
                pass

    def handle_data(self, data):
        for _, text in self.open:
            text.append(data)


def document(page: str) -> list[tuple[str, dict[str, str], str]]:
    """(tag, attributes, text) of every element of `page` in document order (names in lower case)."""
    parser = Elements()
    parser.feed(page)
    parser.close()
    return [(name, attrs, "".join(text)) for name, attrs, text in parser.elements]


def elements(page: str, tag: str) -> list[tuple[dict[str, str], str]]:
    """(attributes, text) of every `tag` element of `page`."""
    return [(attrs, text) for name, attrs, text in document(page) if name == tag]


def attributes(page: str, tag: str) -> list[dict[str, str]]:
    """The attributes of every `tag` element of `page`."""
    return [attrs for attrs, _ in elements(page, tag)]


def texts(page: str, tag: str) -> list[str]:
    """The text of every `tag` element of `page`."""
    return [text for _, text in elements(page, tag)]


SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def svg_element(markup: str) -> ElementTree.Element:
    """An inline <svg> of a page as an XML tree in the SVG namespace, where an HTML parser puts it: the minifier
    drops the xmlns attribute that an SVG inside HTML does not need."""
    if not re.match(r"<svg\b[^>]*\sxmlns=", markup):
        markup = f'<svg xmlns="{SVG_NAMESPACE}"' + markup[len("<svg"):]
    return ElementTree.fromstring(markup)


PATH_TOKEN = re.compile(r"[MmLlHhVvZz]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def path_subpaths(d: str) -> list[list[tuple[float, float]]]:
    """The absolute points of each subpath of straight-line path data (M, L, H, V, Z, absolute or relative, with
    implicit line-tos: SVG 1.1 section 8.3); a curve or an arc is an error, not a silent skip."""
    tokens = PATH_TOKEN.findall(d)
    if "".join(tokens) != re.sub(r"[\s,]", "", d):
        raise ValueError(f"path data with other than straight lines: {d[:80]!r}")
    subpaths: list[list[tuple[float, float]]] = []
    x = y = 0.0
    command, at = "", 0
    while at < len(tokens):
        if tokens[at].isalpha():
            command, at = tokens[at], at + 1
            if command in "Zz":
                x, y = subpaths[-1][0]
                subpaths[-1].append((x, y))
                continue
        relative = command.islower()
        if command in "Mm":
            x, y = float(tokens[at]) + (x if relative else 0), float(tokens[at + 1]) + (y if relative else 0)
            subpaths.append([(x, y)])
            command, at = ("l" if relative else "L"), at + 2
            continue
        if command in "Ll":
            x, y = float(tokens[at]) + (x if relative else 0), float(tokens[at + 1]) + (y if relative else 0)
            at += 2
        elif command in "Hh":
            x, at = float(tokens[at]) + (x if relative else 0), at + 1
        elif command in "Vv":
            y, at = float(tokens[at]) + (y if relative else 0), at + 1
        else:
            raise ValueError(f"path data without a command before {tokens[at]!r}: {d[:80]!r}")
        subpaths[-1].append((x, y))
    return subpaths
