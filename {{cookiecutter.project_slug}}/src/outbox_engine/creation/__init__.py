"""Creating outbox items inside the caller's transaction (items: Outbox.create), message chains
(chain: correlation, causation, hop) and shard scopes/categories (shards)."""
