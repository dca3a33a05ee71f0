"""Test helpers for your own tests (public API; docs/contracts.md shows each in use).

* `capture_created()`: the items the code under test created (box, key, event, headers,
  payload as bytes, JSON and typed event), reported when their transaction commits: items of
  a transaction or savepoint that rolled back are not. No Kafka involved.
* `drain(container, box)`: run a real worker on the box (the test database, its locks and
  claims, your handlers) until no item of the box is pending; an outbox box's transports are
  replaced by a recording one, so nothing reaches Kafka, and what it was handed is returned.
* `feed(container, box, payload=...)`: store a message in an inbox box as the consumer
  would (same row, headers lowercased, message id, `ON CONFLICT DO NOTHING`), run the
  worker until its first attempt ends, and return the outcome: status, attempts, reason, and
  the outbox items its handler created.

They take the `container` fixture of tests/conftest.py (a container on a migrated test
database). Use them where a test is about your code; the engine's own guarantees are tested
with Kafka and processes in tests/integration and tests/guarantees.
"""

from outbox_engine.testing.capture import Captured, CreatedItem, capture_created
from outbox_engine.testing.drain import Container, Delivered, RecordingTransport, drain
from outbox_engine.testing.feed import Outcome, feed

__all__ = [
    "Captured",
    "Container",
    "CreatedItem",
    "Delivered",
    "Outcome",
    "RecordingTransport",
    "capture_created",
    "drain",
    "feed",
]
