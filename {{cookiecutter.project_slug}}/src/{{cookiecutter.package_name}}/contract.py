"""The name and version this service's AsyncAPI document states (contracts/asyncapi.json).

The engine builds the document; the service says who it is. The API serves the same document
under the configured `SERVICE_NAME` (settings.service_name), which defaults to this name.
"""

from __future__ import annotations

from outbox_engine.contracts.asyncapi import ServiceInfo

from . import __version__

SERVICE = ServiceInfo(name="{{ cookiecutter.project_slug }}", version=__version__)
