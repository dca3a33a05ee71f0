"""The engine's own tables (the pauses and the operator audit log) and the naming convention.

They live on a MetaData of the engine's, not on the service's declarative Base, so the engine
imports nothing of the service. The service's migrations compare both with the database
(`target_metadata = [Base.metadata, ENGINE_METADATA]` in migrations/env.py), and the service's
Base uses the same naming convention, so constraint and index names follow one rule.
"""

from __future__ import annotations

from sqlalchemy import MetaData

NAMING_CONVENTION = {
    "pk": "pk_%(table_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "ix": "ix_%(column_0_label)s",
}

ENGINE_METADATA = MetaData(naming_convention=NAMING_CONVENTION)
