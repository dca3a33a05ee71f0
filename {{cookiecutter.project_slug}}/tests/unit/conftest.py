"""Unit tests see only the environment they set: a developer's `.env` in the project
directory (see docs/configuration.md) is not read here, so it cannot change their outcome."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.settings import Settings


@pytest.fixture(autouse=True)
def _no_dot_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(Settings.model_config, "env_file", None)
