"""Path data as text: the commands of a chart's path, each with the point it starts from, and the rewrites a page's
copy makes of them (issue 14's page weight) that the downloadable files undo, number for number.

builder/charts/svg.py writes every path with absolute M, L, H, V, Q and z and every number to 0.01 unit
(svg.number): a box's sides and a line's steps along an axis as H x and V y. On a page, `relative` writes an H x or
V y as h dx or v dy where that is shorter ('v22', a bar's height; 'h4', a leader's last run before its note) and
both ends are whole or half units. Those are binary fractions: a browser parses them and adds dx to them exactly,
so it reaches the very point H x names and draws the same pixels (with any x, Chromium's float sums moved a few
edge pixels by up to 13/255 on the 360 px screenshots: tried and rejected). The difference is taken exactly
(Decimal), so `absolute` gets the very numbers back for builder/charts/standalone.py. `spelled_out` writes H and V
as the L x y they name, as the downloadable files have them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal

COMMAND = re.compile(r"([MLHVQzhv])([^MLHVQzhv]*)")
HALF = Decimal("0.5")  # `relative` steps only between multiples of it


def decimal_text(value: Decimal) -> str:
    """A Decimal as svg.number writes a number: '72.9', '244', '-3.5'; never '-0' or an exponent."""
    text = format(value.normalize(), "f")
    return "0" if text == "-0" else text


def commands(data: str) -> Iterator[tuple[str, str, Decimal, Decimal]]:
    """Each command of path data, its operands as written, and the current point before it (M, L and Q end on
    their last point, z goes back to where its subpath began, H, h, V and v move along one axis)."""
    x = y = start_x = start_y = Decimal(0)
    for command, operands in COMMAND.findall(data):
        yield command, operands, x, y
        numbers = [Decimal(n) for n in operands.split()]
        if command == "z":
            x, y = start_x, start_y
        elif command in "Hh":
            x = numbers[0] + (x if command == "h" else 0)
        elif command in "Vv":
            y = numbers[0] + (y if command == "v" else 0)
        else:
            x, y = numbers[-2:]
            if command == "M":
                start_x, start_y = x, y


def unchanged(data: str, commands_rewritten: str) -> bool:
    """Whether a rewrite of the commands in `commands_rewritten` gives `data` back as it is: it has none of them and
    starts with a command (so that `commands` reads all of it)."""
    return data[:1] in "MLHVQzhv" and not any(command in data for command in commands_rewritten)


def relative(data: str) -> str:
    """Path data with each H x and V y written as h dx or v dy where that is shorter (a tie stays absolute) and
    both ends are whole or half units: binary fractions that any floating-point parser reads, and adds, exactly,
    so the browser reaches the very point the absolute command names."""
    if unchanged(data, "HV"):
        return data
    written = []
    for command, operands, x, y in commands(data):
        written.append(command + operands)
        if command in "HV":
            start, end = (x if command == "H" else y), Decimal(operands)
            if start % HALF == 0 and end % HALF == 0:
                written[-1] = min(written[-1], command.lower() + decimal_text(end - start), key=len)
    return "".join(written)


def absolute(data: str) -> str:
    """What `relative` took: each h dx and v dy written as the H x or V y it reaches."""
    if unchanged(data, "hv"):
        return data
    written = []
    for command, operands, x, y in commands(data):
        if command in "hv":
            written.append(command.upper() + decimal_text((x if command == "h" else y) + Decimal(operands)))
        else:
            written.append(command + operands)
    return "".join(written)


def spelled_out(data: str) -> str:
    """Absolute path data with each H x and V y written as the L x y it names."""
    if unchanged(data, "HV"):
        return data
    written = []
    for command, operands, x, y in commands(data):
        if command == "H":
            written.append(f"L{operands} {decimal_text(y)}")
        elif command == "V":
            written.append(f"L{decimal_text(x)} {operands}")
        else:
            written.append(command + operands)
    return "".join(written)
