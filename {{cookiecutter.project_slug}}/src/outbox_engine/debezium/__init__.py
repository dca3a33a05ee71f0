"""The Debezium relay: boxes whose items Debezium on Kafka Connect sends from the WAL.

connector (the connector's configuration, built from the service's names and database),
switch (moving a box between the worker and Debezium without losing an item or breaking
per-key order), status (what PostgreSQL says about each box's capture and the slot),
register (publication, slot and the connector on Kafka Connect's REST API). The tables and
statements are in store/capture.py and store/slots.py; docs/debezium.md tells the whole story.
"""
