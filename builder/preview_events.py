"""What the preview tells open pages: each build's outcome, as Server-Sent Events.

A good build that changed files sends `built` with the changed paths (relative to the site); a
failed build sends `failed` with every 'path:line: message'; a page that connects is sent `hello`
with the current errors, so a page opened while the build is broken shows them at once.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import deque
from dataclasses import dataclass, field

KEEPALIVE_SECONDS = 15.0
RETRY_MS = 500  # how soon a browser reconnects after the server went away
HISTORY = 64  # outcomes kept for a stream that fell behind; further back, every page counts as changed
EVERYTHING = "*"  # a changed path meaning "assume every file changed"


@dataclass(frozen=True)
class Outcome:
    """One build's result as the pages see it."""

    number: int
    changed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def event(self) -> str:
        """The SSE event name."""
        return "failed" if self.errors else "built"


@dataclass
class BuildEvents:
    """The latest outcome, and a way for event streams to wait for the next one."""

    server: str = field(default_factory=lambda: secrets.token_hex(4))  # a page seeing a new one reloads
    latest: Outcome = field(default_factory=lambda: Outcome(0))
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    closed: bool = False
    condition: threading.Condition = field(default_factory=threading.Condition)

    def publish(self, changed: list[str] | tuple[str, ...] = (), errors: list[str] | tuple[str, ...] = ()) -> Outcome:
        """Record a build's outcome and wake every stream."""
        with self.condition:
            self.latest = Outcome(self.latest.number + 1, tuple(sorted(changed)), tuple(errors))
            self.history.append(self.latest)
            self.condition.notify_all()
            return self.latest

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        with self.condition:
            self.closed = True
            self.condition.notify_all()

    def wait_after(self, number: int, timeout: float) -> Outcome | None:
        """What happened since outcome `number`, as one outcome: the latest errors if the latest build
        failed, else every file the good builds since then changed. None after `timeout` seconds or on close."""
        with self.condition:
            self.condition.wait_for(lambda: self.closed or self.latest.number > number, timeout)
            if self.closed or self.latest.number <= number:
                return None
            newer = [outcome for outcome in self.history if outcome.number > number]
            latest = self.latest
        if latest.errors:
            return latest
        changed = {path for outcome in newer for path in outcome.changed}
        if len(newer) < latest.number - number:  # some fell out of the history
            changed.add(EVERYTHING)
        return Outcome(latest.number, tuple(sorted(changed)))

    def hello(self, last_event_id: str | None = None) -> tuple[str, int]:
        """The first message of a stream and the outcome number the stream goes on from: the one a
        reconnecting browser last saw (its Last-Event-ID) if this server sent it, else the latest."""
        with self.condition:
            latest = self.latest
        number = latest.number
        server, _, seen = (last_event_id or "").partition(":")
        if server == self.server and seen.isdigit() and int(seen) <= latest.number:
            number = int(seen)
        return message("hello", {"server": self.server, "errors": list(latest.errors)}, RETRY_MS,
                       event_id=f"{self.server}:{number}"), number

    def stream(self, number: int, keepalive: float = KEEPALIVE_SECONDS):
        """Messages for a stream that has seen outcome `number`: one per new outcome, and a comment
        every `keepalive` seconds so a dead connection is noticed. Ends when the events close."""
        while not self.closed:
            outcome = self.wait_after(number, keepalive)
            if outcome is None:
                if self.closed:
                    return
                yield ": keepalive\n\n"
                continue
            number = outcome.number
            if outcome.errors:
                yield message("failed", {"errors": list(outcome.errors)}, event_id=f"{self.server}:{number}")
            else:
                yield message("built", {"changed": list(outcome.changed)}, event_id=f"{self.server}:{number}")


def message(event: str, data: dict, retry: int | None = None, event_id: str | None = None) -> str:
    """One Server-Sent Events message (the data is one line of JSON)."""
    head = (f"retry: {retry}\n" if retry is not None else "") + (f"id: {event_id}\n" if event_id else "")
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
