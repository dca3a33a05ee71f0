"""Transports: the bases (base), the built-in Kafka, HTTP webhook and log transports (builtin),
the asyncio face of confluent-kafka's producer (kafka), librdkafka logging (kafka_logs) and the
per-process resources handed to transports (resources)."""
