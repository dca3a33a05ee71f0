"""Everything the engine keeps in PostgreSQL: item table columns and DDL (models, schema),
statuses (status), recording outcomes (record), bucket ownership locks (ownership), pauses, the
operator audit log, retention, the engine's MetaData and asyncpg connections (pgconn)."""
