"""The operator CLI: inspect, retry, discard, replay, park, purge, pause and generate.

These modules parse options, ask for confirmation, print progress and set exit codes; the
operations themselves (selections, batched changes with audit rows, stats, browsing) are
the engine's `outbox_engine.operations`, which the admin API (`api/admin.py`) calls too.
Every filter reaches PostgreSQL as a bound parameter, never as SQL text.
"""
