"""librdkafka's own log lines, and Kafka client errors, through Python logging, rate-limited.

Without a `logger`, librdkafka prints `%3|1700000000.123|FAIL|rdkafka#producer-1| ...` to
stderr: not JSON under LOG_FORMAT=json, and a broker that is down repeats the same line
several times a second. `client_config()` gives each Producer, Consumer and AdminClient
the logger `outbox_engine.kafka.librdkafka` (confluent-kafka's `logger` setting), so the lines
take the service's format, and `Repeats` keeps a repeated line to one record per window:
the first occurrence at once, then, when the window ends, one summary
("... (repeated 57 times in the last 30 s)"). Lines are "the same" when they differ only in
numbers that change from one to the next (timings, suppression counts, timestamps).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LIBRDKAFKA_LOGGER = "outbox_engine.kafka.librdkafka"
WINDOW_SECONDS = 30.0

# Parts of a librdkafka line that change between repeats of the same event.
_VOLATILE = (
    (
        re.compile(r"\(after \d+ms in state \w+(, \d+ identical error\(s\) suppressed)?\)"),
        "(after N)",
    ),
    (re.compile(r":?\s*\d+ identical error\(s\) suppressed"), ""),
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|s|us)\b"), "N"),
    (re.compile(r"#(producer|consumer)-\d+"), r"#\1"),
)


def repeat_key(text: str) -> str:
    """What makes two lines 'the same event' (same broker, same error)."""
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


@dataclass
class _Seen:
    since: float
    level: int
    logger: logging.Logger
    last: str
    suppressed: int = 0


class Repeats:
    """Logs a line the first time, then counts its repeats for `window` seconds and logs one
    summary when the window ends (on the next line of any kind, or on `sweep()`).
    Thread-safe: librdkafka's lines arrive on the threads that poll the clients."""

    def __init__(
        self, window: float = WINDOW_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = window
        self.clock = clock
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def log(self, logger: logging.Logger, level: int, text: str, key: str | None = None) -> None:
        key = f"{logger.name}|{repeat_key(text) if key is None else key}"
        now = self.clock()
        emit = False
        with self._lock:
            summaries = self._expired(now)
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = _Seen(now, level, logger, text)
                emit = True
            else:
                seen.suppressed += 1
                seen.last = text
                seen.level = max(seen.level, level)
        self._emit(summaries)
        if emit and logger.isEnabledFor(level):
            logger.log(level, "%s", text)

    def sweep(self) -> None:
        """Log the summaries of the windows that ended (call it now and then)."""
        with self._lock:
            summaries = self._expired(self.clock())
        self._emit(summaries)

    def flush(self) -> None:
        """Log every pending summary now (at shutdown)."""
        with self._lock:
            summaries = [(s, self.clock() - s.since) for s in self._seen.values() if s.suppressed]
            self._seen.clear()
        self._emit(summaries)

    def _expired(self, now: float) -> list[tuple[_Seen, float]]:
        ended = [k for k, s in self._seen.items() if now - s.since >= self.window]
        summaries = []
        for key in ended:
            seen = self._seen.pop(key)
            if seen.suppressed:
                summaries.append((seen, now - seen.since))
        return summaries

    @staticmethod
    def _emit(summaries: list[tuple[_Seen, float]]) -> None:
        for seen, elapsed in summaries:
            if seen.logger.isEnabledFor(seen.level):
                seen.logger.log(
                    seen.level,
                    "%s (repeated %d times in the last %.0f s)",
                    seen.last,
                    seen.suppressed,
                    elapsed,
                    extra={"repeated": seen.suppressed, "window_seconds": round(elapsed, 1)},
                )


# One per process: the producer, consumers and admin clients share it.
REPEATS = Repeats()


class LibrdkafkaLog:
    """The object confluent-kafka's `logger` setting takes: it calls
    `.log(level, "%s [%s] %s", facility, client_name, message)` for each librdkafka line."""

    def __init__(self, repeats: Repeats = REPEATS, name: str = LIBRDKAFKA_LOGGER) -> None:
        self.repeats = repeats
        self.logger = logging.getLogger(name)

    def log(self, level: int, msg: str, *args: Any) -> None:
        try:
            text = msg % args if args else msg
        except (TypeError, ValueError):
            text = " ".join([msg, *map(str, args)])
        self.repeats.log(self.logger, level, text)


def client_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with librdkafka's logs routed to Python logging (unless it sets a logger)."""
    return {"logger": LibrdkafkaLog(), **config}


def log_client_error(logger: logging.Logger, level: int, text: str) -> None:
    """A Kafka client error (an `error_cb`), rate-limited like librdkafka's own lines."""
    REPEATS.log(logger, level, text)
