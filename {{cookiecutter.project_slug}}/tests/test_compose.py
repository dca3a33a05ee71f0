"""The docker compose stack and the image, checked without starting anything: which services
run, in which order they start, that every app service runs a subcommand the CLI has, that the
shared environment is valid settings, that every image is pinned to a tag, and that the image
runs as a non-root user and installs exactly the locked dependencies with a pinned uv."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.core import TyperGroup

from {{ cookiecutter.package_name }}.cli import app
from {{ cookiecutter.package_name }}.settings import load_settings
from outbox_engine.config.boxes import load_boxes

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "{{ cookiecutter.project_slug }}"
PYTHON_VERSION = "{{ cookiecutter.python_version }}"

APP_SERVICES = ("migrate", "api", "worker", "consumer")
LONG_RUNNING = ("api", "worker", "consumer")
{%- if cookiecutter.opentelemetry %}
EXPECTED_SERVICES = {"postgres", "kafka", *APP_SERVICES, "telemetry"}
{%- else %}
EXPECTED_SERVICES = {"postgres", "kafka", *APP_SERVICES}
{%- endif %}

Service = dict[str, Any]


@pytest.fixture(scope="module")
def services() -> dict[str, Service]:
    compose = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    assert isinstance(compose, dict)
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def environment(service: Service) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(entry.split("=", 1) for entry in raw)
    return {str(key): str(value) for key, value in raw.items()}


def command(service: Service) -> list[str]:
    raw = service["command"]
    return shlex.split(raw) if isinstance(raw, str) else [str(part) for part in raw]


def depends_on(service: Service) -> dict[str, str]:
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return dict.fromkeys(raw, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in raw.items()}


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (PROJECT_ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def test_the_stack_has_exactly_the_expected_services(services: dict[str, Service]) -> None:
    assert set(services) == EXPECTED_SERVICES


def test_postgres_and_kafka_have_healthchecks(services: dict[str, Service]) -> None:
    for name in ("postgres", "kafka"):
        healthcheck = services[name].get("healthcheck") or {}
        assert healthcheck.get("test"), f"{name} has no healthcheck"
        assert not healthcheck.get("disable", False)


def test_migrate_waits_for_a_healthy_postgres(services: dict[str, Service]) -> None:
    assert depends_on(services["migrate"]) == {"postgres": "service_healthy"}
    assert services["migrate"].get("restart", "no") == "no"


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_app_services_start_after_migrations_and_kafka(
    services: dict[str, Service], name: str
) -> None:
    conditions = depends_on(services[name])
    assert conditions["migrate"] == "service_completed_successfully"
    assert conditions["kafka"] == "service_healthy"
    assert services[name]["restart"] == "unless-stopped"


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_run_a_cli_subcommand(services: dict[str, Service], name: str) -> None:
    argv = command(services[name])
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    assert argv[0] == name
    subcommand = root.commands.get(argv[0])
    assert subcommand is not None, f"{name}: the CLI has no `{argv[0]}` command"
    try:
        subcommand.make_context(argv[0], argv[1:])
    except typer.TyperException as exc:
        pytest.fail(f"{name}: `{SCRIPT} {shlex.join(argv)}` is not a valid command line: {exc}")


def test_app_services_share_one_image_built_here(services: dict[str, Service]) -> None:
    images = {services[name].get("image") for name in APP_SERVICES}
    assert len(images) == 1
    for name in APP_SERVICES:
        build = services[name]["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        assert Path(PROJECT_ROOT, context).resolve() == PROJECT_ROOT


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_environment_is_valid_settings(
    services: dict[str, Service], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment(services[name])
    assert env["DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in env["DATABASE_URL"]
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.kafka_config()["bootstrap.servers"] == "kafka:9092"
{%- if cookiecutter.opentelemetry %}
    assert settings.otel_exporter_otlp_endpoint == "http://telemetry:4318"
    assert settings.otel_service_name == f"{SCRIPT}-{name}"
{%- endif %}


def test_topic_variables_are_the_ones_the_boxes_read(
    services: dict[str, Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment(services["worker"])
    topics = {key: value for key, value in env.items() if key.endswith("_EVENTS_TOPIC")}
    assert set(topics) == {
        "{{ cookiecutter.outbox_item.upper() }}_EVENTS_TOPIC",
        "{{ cookiecutter.inbox_item.upper() }}_EVENTS_TOPIC",
    }
    for key in topics:
        monkeypatch.setenv(key, f"from-compose-{key}")
    boxes = load_boxes(PROJECT_ROOT / "config" / "boxes.yaml")
    outbox_topics = {
        transport.args.get("topic") for box in boxes.outbox.values() for transport in box.transports
    }
    inbox_topics = {topic for box in boxes.inbox.values() for topic in box.topics}
    assert "from-compose-{{ cookiecutter.outbox_item.upper() }}_EVENTS_TOPIC" in outbox_topics
    assert inbox_topics == {"from-compose-{{ cookiecutter.inbox_item.upper() }}_EVENTS_TOPIC"}


def test_api_is_published_and_checked_on_healthz(services: dict[str, Service]) -> None:
    api = services["api"]
    assert any(str(port).endswith("8000:8000") for port in api["ports"])
    assert "/healthz" in " ".join(api["healthcheck"]["test"])
{%- if cookiecutter.opentelemetry %}


def test_telemetry_receives_otlp(services: dict[str, Service]) -> None:
    telemetry = services["telemetry"]
    assert str(telemetry["image"]).startswith("grafana/otel-lgtm")
    assert {"3000:3000", "4317:4317", "4318:4318"} <= {str(p) for p in telemetry["ports"]}
    names = {environment(services[name])["OTEL_SERVICE_NAME"] for name in APP_SERVICES}
    assert len(names) == len(APP_SERVICES)
{%- endif %}


def test_every_third_party_image_is_pinned_to_a_tag(services: dict[str, Service]) -> None:
    """A moving `latest` (or no tag) changes the stack under a clean checkout."""
    app_image = services["api"]["image"]
    for name, service in services.items():
        image = str(service["image"])
        if image == app_image:
            continue
        _, _, tag = image.partition("@")[0].rpartition("/")[2].partition(":")
        assert tag, f"{name}: image {image} has no tag"
        assert tag != "latest", f"{name}: image {image} is not pinned"
        assert re.search(r"\d", tag), f"{name}: image {image} has no version in its tag"


def test_image_installs_exactly_the_lock_with_a_pinned_uv() -> None:
    instructions = dockerfile()
    runs = [args for keyword, args in instructions if keyword == "RUN"]
    args = dict(args.split("=", 1) for keyword, args in instructions if keyword == "ARG")
    assert re.fullmatch(r"\d+\.\d+\.\d+", args.get("UV_VERSION", "")), "uv is not pinned"
    assert any('pip install "uv==${UV_VERSION}"' in run for run in runs)
    syncs = [run for run in runs if "uv sync" in run]
    assert len(syncs) == 2
    assert all("--locked" in run for run in syncs)
    assert "test -f uv.lock" in syncs[0], "a missing lock must stop the build with a message"
    assert not any("uv pip" in run or "pip install -r" in run for run in runs)


def test_image_is_python_slim_non_root_and_runs_the_cli() -> None:
    instructions = dockerfile()
    bases = [args.split()[0] for keyword, args in instructions if keyword == "FROM"]
    assert bases
    assert all(base == f"python:{PYTHON_VERSION}-slim" for base in bases)
    users = [args for keyword, args in instructions if keyword == "USER"]
    assert users, "the image has no USER instruction"
    assert users[-1].split(":")[0] not in ("root", "0")
    entrypoints = [args for keyword, args in instructions if keyword == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoints[-1]) == [SCRIPT]


def test_image_copies_files_that_exist() -> None:
    for keyword, args in dockerfile():
        if keyword != "COPY" or args.startswith("--from="):
            continue
        *sources, _destination = args.split()
        for source in sources:
            if "*" not in source:
                assert (PROJECT_ROOT / source).exists(), f"COPY {source}: no such file"
