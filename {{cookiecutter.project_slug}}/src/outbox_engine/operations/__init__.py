"""Operator operations: select items, retry/discard/replay/park/purge them (at once or in
resumable id-ordered batches, with audit rows), read statistics and browse items.

One implementation for the service's CLI and its admin HTTP API: they parse, confirm and
print; these functions validate, change and report. All SQL is in outbox_engine/store/.
"""
