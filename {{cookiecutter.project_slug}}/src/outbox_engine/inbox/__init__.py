"""The inbox consumer: Kafka -> inbox rows, then offsets (consumer), the dedupe window check
(window) and message-id clashes (clash). Handling inbox rows runs in the relay."""
