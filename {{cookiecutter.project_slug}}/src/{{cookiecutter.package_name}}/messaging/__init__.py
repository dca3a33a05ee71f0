"""The messaging engine: outbox/inbox items, creation, relay worker, inbox consumer.

Users do not edit this package; they edit `transports/`, `items.py` and `config/boxes.yaml`.
"""
