"""Built pages read as HTML, not as exact strings: the build minifies every page (builder/page_minify.py), so
a test asks for an element, its attributes or its text, whatever the whitespace, quotes and character
references the minifier chose; an inline SVG is read as a browser reads it (in the SVG namespace, its path data
in any of the SVG 1.1 forms the minifier writes: relative commands, implicit line-tos, H and V)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass(frozen=True)
class Node:
    """One element of a page: its tag, its attributes (character references resolved), all the text inside it
    (references resolved) and its parent's index in the page's list of nodes (-1: none)."""

    tag: str
    attrs: dict[str, str]
    text: str
    parent: int


class Elements(HTMLParser):
    """Every element of a page, in document order, with its text and its parent."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], list[str], int]] = []
        self.open: list[tuple[str, list[str], int]] = []

    def handle_starttag(self, tag, attrs):
        text: list[str] = []
        self.elements.append((tag, {key: value or "" for key, value in attrs}, text,
                              self.open[-1][2] if self.open else -1))
        if tag not in VOID:
            self.open.append((tag, text, len(self.elements) - 1))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, {key: value or "" for key, value in attrs}, [], self.open[-1][2] if self.open else -1))

    def handle_endtag(self, tag):
        if any(name == tag for name, _, _ in self.open):
            while self.open.pop()[0] != tag:
                pass

    def handle_data(self, data):
        for _, text, _ in self.open:
            text.append(data)


def nodes(page: str) -> list[Node]:
    """Every element of `page` in document order (tag and attribute names in lower case)."""
    parser = Elements()
    parser.feed(page)
    parser.close()
    return [Node(name, attrs, "".join(text), parent) for name, attrs, text, parent in parser.elements]


def children(found: list[Node], index: int) -> list[int]:
    """The indices of the children of node `index` (-1: the top-level elements), in order."""
    return [at for at, node in enumerate(found) if node.parent == index]


def descendants(found: list[Node], index: int) -> list[int]:
    """The indices of every element inside node `index`, in order."""
    inside = {index}
    for at in range(index + 1, len(found)):
        if found[at].parent in inside:
            inside.add(at)
    return sorted(inside - {index})


def document(page: str) -> list[tuple[str, dict[str, str], str]]:
    """(tag, attributes, text) of every element of `page` in document order (names in lower case)."""
    return [(node.tag, node.attrs, node.text) for node in nodes(page)]


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
