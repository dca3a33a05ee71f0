"""Your transports: what to do with an outbox item, how to handle an inbox item.

These classes are yours to edit. Each is referenced by `config/boxes.yaml`.
"""
