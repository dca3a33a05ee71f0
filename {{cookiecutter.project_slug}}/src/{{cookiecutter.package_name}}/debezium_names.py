"""What this service's Debezium relay is called, in one place: the Kafka Connect connector
(`<project slug>-outbox`), the PostgreSQL publication and replication slot
(`<package>_outbox`) and Debezium's topic prefix (`<package>`, for its own topics).

Slots and publications are named per PostgreSQL cluster and connectors per Connect cluster,
so a second deployment of the service on the same ones (staging next to production, a test
run) sets `DEBEZIUM_NAME_SUFFIX` (e.g. `staging`: `<slug>-staging-outbox`,
`<package>_staging_outbox`). `debezium-config`, `debezium-switch`, `debezium-status`,
`stats`, the admin API and the worker's slot-lag gauge all take their names from here.
"""

from __future__ import annotations

from outbox_engine.debezium.connector import DebeziumNames

from .settings import Settings

SLUG = "{{ cookiecutter.project_slug }}"
PACKAGE = "{{ cookiecutter.package_name }}"


def debezium_names(settings: Settings) -> DebeziumNames:
    """The names of this deployment's connector, slot, publication and topic prefix."""
    suffix = settings.debezium_name_suffix
    if not suffix:
        return DebeziumNames.for_service(SLUG, PACKAGE)
    return DebeziumNames.for_service(f"{SLUG}-{suffix.replace('_', '-')}", f"{PACKAGE}_{suffix}")
