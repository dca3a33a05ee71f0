"""Sentry-style shards on top of the outbox: synchronous flush after commit (flush,
flush_context), automatic outboxes for replicated models (replication), the bulk-write guard
(guard) and backfills (backfill)."""
