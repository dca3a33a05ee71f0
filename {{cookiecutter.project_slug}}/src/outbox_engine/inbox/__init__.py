"""The inbox consumer process: its app and options (app), the Kafka poll loop (consumer),
message -> row (rows), rows -> table -> offsets (batches), readiness, the dedupe window
check (window) and message-id clashes (clash). Handling inbox rows runs in the relay."""
