"""Operator tooling: inspect, retry, discard, replay, pause and generate.

Shared by the CLI (`ops/commands.py`) and the admin API (`api/admin.py`); every filter
reaches PostgreSQL as a bound parameter, never as SQL text.
"""
