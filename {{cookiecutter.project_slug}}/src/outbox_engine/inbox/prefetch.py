"""How far librdkafka fetches ahead of the inbox consumer, and how soon it fetches again.

The consumer's Kafka settings start from `PREFETCH_DEFAULTS`; a value of either key in the
Kafka settings wins (docs/performance.md, "The inbox consumer, per batch").

- `queued.max.messages.kbytes` (librdkafka's own default: 64 MiB, which was most of a
  consumer's resident memory): 16 MiB, ~16,000 messages of 1 KiB, some 30 batches of 500
  ahead of the write.
- `fetch.queue.backoff.ms` (librdkafka's own default: 1,000 ms): how long librdkafka waits
  before it fetches a partition again once the prefetch was over its bound. With 1,000 ms a
  consumer that stores faster than the bound lasts (16 MiB of 1 KiB messages in about 0.4 s
  at 40,000 rows/s) sat idle for the rest of each second: about 20,700 rows/s instead of
  41,000 in the bench's inbox scenario. 20 ms is less than one batch's write, so the fetch
  starts again while the queue still holds thousands of messages.
"""

from __future__ import annotations

from typing import Final

PREFETCH_KBYTES: Final = 16_384
PREFETCH_BACKOFF_MS: Final = 20
PREFETCH_DEFAULTS: Final[dict[str, int]] = {
    "queued.max.messages.kbytes": PREFETCH_KBYTES,
    "fetch.queue.backoff.ms": PREFETCH_BACKOFF_MS,
}
