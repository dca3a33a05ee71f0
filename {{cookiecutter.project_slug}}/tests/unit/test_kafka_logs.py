"""Repeated log lines: the first at once, the repeats of a window as one summary with their
count; different events (another broker, another error) are never folded together."""

from __future__ import annotations

import logging

import pytest

from outbox_engine.transports.kafka_logs import (
    LIBRDKAFKA_LOGGER,
    LibrdkafkaLog,
    Repeats,
    client_config,
    repeat_key,
)

from ..support import Clock

REFUSED = (
    "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
    "(after {ms}ms in state CONNECT{extra})"
)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LIBRDKAFKA_LOGGER]


def test_repeats_are_summarised_once_per_window(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    log = LibrdkafkaLog(Repeats(window=30.0, clock=clock))
    for n in range(58):  # 58 lines in 29 s: librdkafka's pace against a closed port
        clock.now = 1000.0 + n * 0.5
        extra = f", {n} identical error(s) suppressed" if n % 3 else ""
        log.log(
            logging.ERROR,
            "%s [%s] %s",
            "FAIL",
            "rdkafka#producer-1",
            REFUSED.format(ms=n, extra=extra),
        )
    assert len(lines(caplog)) == 1
    assert lines(caplog)[0] == "FAIL [rdkafka#producer-1] " + REFUSED.format(ms=0, extra="")
    clock.now = 1030.0
    log.repeats.sweep()
    assert len(lines(caplog)) == 2
    summary = caplog.records[-1]
    assert summary.getMessage().endswith("(repeated 57 times in the last 30 s)")
    assert summary.__dict__["repeated"] == 57
    assert summary.levelno == logging.ERROR
    # The window is over: the next occurrence is logged at once again.
    clock.now = 1031.0
    log.log(
        logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", REFUSED.format(ms=3, extra="")
    )
    assert len(lines(caplog)) == 3
    log.repeats.sweep()
    assert len(lines(caplog)) == 3  # no repeats yet: nothing to summarise


def test_different_events_are_kept_apart(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    log = LibrdkafkaLog(Repeats(window=30.0, clock=clock))
    texts = [
        REFUSED.format(ms=0, extra=""),
        REFUSED.format(ms=0, extra="").replace("127.0.0.1:1", "127.0.0.1:2"),  # other broker
        "127.0.0.1:1/bootstrap: Failed to resolve 'kafka:9092': Name or service not known",
    ]
    for _ in range(10):
        for text in texts:
            log.log(logging.ERROR, "%s", text)
    assert lines(caplog) == texts
    log.repeats.flush()
    summaries = lines(caplog)[3:]
    assert len(summaries) == 3
    assert all(s.endswith("(repeated 9 times in the last 0 s)") for s in summaries)


def test_a_summary_is_skipped_when_nothing_repeated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    repeats = Repeats(window=1.0, clock=clock)
    log = LibrdkafkaLog(repeats)
    log.log(logging.WARNING, "%s", "once")
    clock.now += 5
    repeats.sweep()
    repeats.flush()
    assert lines(caplog) == ["once"]


def test_repeat_key_drops_only_what_changes_between_repeats() -> None:
    assert repeat_key(REFUSED.format(ms=0, extra="")) == repeat_key(
        REFUSED.format(ms=1503, extra=", 12 identical error(s) suppressed")
    )
    assert repeat_key("rdkafka#producer-1 x") == repeat_key("rdkafka#producer-7 x")
    assert repeat_key("broker a:9092 down") != repeat_key("broker b:9092 down")


def test_client_config_adds_the_logger_and_keeps_one_given() -> None:
    config = client_config({"bootstrap.servers": "k:1"})
    assert isinstance(config["logger"], LibrdkafkaLog)
    assert config["bootstrap.servers"] == "k:1"
    mine = logging.getLogger("mine")
    assert client_config({"logger": mine})["logger"] is mine
