"""The docker compose stack and the images, checked without starting anything: which services
run (the default stack and the `debezium` profile), in which order they start, that every app
service runs a subcommand the CLI has, that the shared environment is valid settings, that
every image is pinned to a tag, that the image runs as a non-root user and installs exactly
the locked dependencies with a pinned uv, and that the Kafka Connect image (deploy/connect/)
runs a distributed worker with Debezium on the broker's Kafka version against a PostgreSQL
with logical decoding."""

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
CONNECT_DIR = PROJECT_ROOT / "deploy" / "connect"
SCRIPT = "{{ cookiecutter.project_slug }}"
PYTHON_VERSION = "{{ cookiecutter.python_version }}"

APP_SERVICES = ("migrate", "api", "worker", "consumer")
LONG_RUNNING = ("api", "worker", "consumer")
{%- if cookiecutter.opentelemetry %}
EXPECTED_SERVICES = {"postgres", "kafka", *APP_SERVICES, "telemetry"}
{%- else %}
EXPECTED_SERVICES = {"postgres", "kafka", *APP_SERVICES}
{%- endif %}
# `docker compose --profile debezium up`: Kafka Connect and the one-shot connector registration.
REGISTER = "debezium-register"
PROFILES = {"debezium": {"connect", REGISTER}}
CONNECT_URL = "http://connect:8083"

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


def dockerfile(path: Path = PROJECT_ROOT / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
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


def build_args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    """The ARG defaults of a Dockerfile (an ARG without a default inherits the global one)."""
    args: dict[str, str] = {}
    for keyword, arguments in instructions:
        if keyword == "ARG" and "=" in arguments:
            name, _, value = arguments.partition("=")
            args[name] = value.strip('"')
    return args


def base_images(path: Path) -> list[str]:
    """The FROM images of a Dockerfile with ARG references resolved; stage names dropped."""
    instructions = dockerfile(path)
    args = build_args(instructions)
    stages: set[str] = set()
    images: list[str] = []
    for keyword, arguments in instructions:
        if keyword != "FROM":
            continue
        words = arguments.split()
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: args[m.group(1)], words[0])
        if image not in stages:
            images.append(image)
        if len(words) == 3 and words[1].upper() == "AS":
            stages.add(words[2])
    return images


def properties(path: Path) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {key.strip(): value.strip() for key, value in pairs}


def profiles(service: Service) -> set[str]:
    return set(service.get("profiles") or ())


def assert_valid_command_line(service_name: str, argv: list[str]) -> None:
    """argv is a subcommand of the Typer app with options it accepts."""
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    subcommand = root.commands.get(argv[0])
    assert subcommand is not None, f"{service_name}: the CLI has no `{argv[0]}` command"
    try:
        subcommand.make_context(argv[0], argv[1:])
    except typer.TyperException as exc:
        line = f"{SCRIPT} {shlex.join(argv)}"
        pytest.fail(f"{service_name}: `{line}` is not a valid command line: {exc}")


def test_the_stack_has_exactly_the_expected_services(services: dict[str, Service]) -> None:
    """`docker compose up` starts the services without a profile; each profile adds its own."""
    default = {name for name, service in services.items() if not profiles(service)}
    assert default == EXPECTED_SERVICES
    for profile, names in PROFILES.items():
        assert {name for name, service in services.items() if profile in profiles(service)} == names
    assert set().union(*(profiles(service) for service in services.values())) == set(PROFILES)


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
    assert argv[0] == name
    assert_valid_command_line(name, argv)


def test_app_services_share_one_image_built_here(services: dict[str, Service]) -> None:
    images = {services[name].get("image") for name in (*APP_SERVICES, REGISTER)}
    assert len(images) == 1
    for name in (*APP_SERVICES, REGISTER):
        build = services[name]["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        assert Path(PROJECT_ROOT, context).resolve() == PROJECT_ROOT


@pytest.mark.parametrize("name", [*APP_SERVICES, REGISTER])
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
    names = {environment(services[name])["OTEL_SERVICE_NAME"] for name in (*APP_SERVICES, REGISTER)}
    assert len(names) == len(APP_SERVICES) + 1
{%- endif %}


def assert_pinned(where: str, image: str) -> None:
    _, _, tag = image.partition("@")[0].rpartition("/")[2].partition(":")
    assert tag, f"{where}: image {image} has no tag"
    assert tag != "latest", f"{where}: image {image} is not pinned"
    assert re.search(r"\d", tag), f"{where}: image {image} has no version in its tag"


def test_every_third_party_image_is_pinned_to_a_tag(services: dict[str, Service]) -> None:
    """A moving `latest` (or no tag) changes the stack under a clean checkout. Images built
    here are checked through the FROM lines of their Dockerfile."""
    for name, service in services.items():
        if "build" in service:
            build = service["build"]
            context = PROJECT_ROOT / (build if isinstance(build, str) else build["context"])
            for image in base_images(context / "Dockerfile"):
                assert_pinned(f"{name} ({context.name}/Dockerfile)", image)
        else:
            assert_pinned(name, str(service["image"]))


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


# --- profile debezium: PostgreSQL with logical decoding, Kafka Connect, the registration ---


def test_postgres_runs_with_logical_decoding_as_a_superuser(services: dict[str, Service]) -> None:
    """Debezium's pgoutput needs wal_level=logical, a slot and a WAL sender, and a user that
    may replicate: POSTGRES_USER is the image's superuser, and the one in DATABASE_URL."""
    postgres = services["postgres"]
    argv = command(postgres)
    assert argv[0] == "postgres"
    settings = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "-c")
    assert settings["wal_level"] == "logical"
    assert int(settings["max_replication_slots"]) >= 1
    assert int(settings["max_wal_senders"]) >= 1
    user = environment(postgres)["POSTGRES_USER"]
    database_url = environment(services[REGISTER])["DATABASE_URL"]
    assert database_url.split("://", 1)[1].startswith(f"{user}:")


def test_connect_is_built_here_and_waits_for_kafka_and_postgres(
    services: dict[str, Service],
) -> None:
    connect = services["connect"]
    assert connect["build"] == "./deploy/connect"
    assert (CONNECT_DIR / "Dockerfile").is_file()
    assert depends_on(connect) == {"kafka": "service_healthy", "postgres": "service_healthy"}
    assert connect["restart"] == "unless-stopped"
    # The REST API has no authentication: published on the host's loopback only.
    assert [str(port) for port in connect["ports"]] == ["127.0.0.1:8083:8083"]


def test_connect_healthcheck_asks_the_rest_api_for_health(services: dict[str, Service]) -> None:
    healthcheck = services["connect"]["healthcheck"]
    assert not healthcheck.get("disable", False)
    test = healthcheck["test"]
    assert test[:3] == ["CMD", "bash", "-c"]
    assert "/dev/tcp/127.0.0.1/8083" in test[3]
    assert "GET /health " in test[3]
    assert 'grep -q " 200 "' in test[3]
    # compose would interpolate a `$` in the command.
    assert "$" not in test[3]


def test_connect_image_runs_a_distributed_worker_on_the_brokers_kafka(
    services: dict[str, Service],
) -> None:
    """The runtime stage is the broker's own image (same Kafka version); only the resolved
    jars are on the classpath; the worker config is the one copied into the image."""
    path = CONNECT_DIR / "Dockerfile"
    instructions = dockerfile(path)
    assert base_images(path)[-1] == services["kafka"]["image"]
    args = build_args(instructions)
    assert services["kafka"]["image"] == f"apache/kafka:{args['KAFKA_VERSION']}"
    entrypoint = yaml.safe_load([a for k, a in instructions if k == "ENTRYPOINT"][-1])
    assert entrypoint == [
        "java",
        "-cp",
        "/opt/connect/libs/*",
        "org.apache.kafka.connect.cli.ConnectDistributed",
        "/opt/connect/config/worker.properties",
    ]
    copies = [a for k, a in instructions if k == "COPY"]
    assert "--from=jars /build/libs/ /opt/connect/libs/" in copies
    assert "worker.properties log4j2.properties /opt/connect/config/" in copies
    for arguments in copies:
        if not arguments.startswith("--from="):
            for source in arguments.split()[:-1]:
                assert (CONNECT_DIR / source).is_file(), f"COPY {source}: no such file"
    users = [a for k, a in instructions if k == "USER"]
    assert users
    assert users[-1] not in ("root", "0")
    runs = " ".join(a for k, a in instructions if k == "RUN")
    assert "mvn -B -C " in runs, "Maven must enforce Maven Central's checksums (-C)"
    assert "copy-dependencies" in runs
    assert "-DincludeScope=runtime" in runs


def test_connect_worker_config(services: dict[str, Service]) -> None:
    worker = properties(CONNECT_DIR / "worker.properties")
    kafka_env = environment(services["kafka"])
    assert f"PLAINTEXT://{worker['bootstrap.servers']}" == kafka_env["KAFKA_ADVERTISED_LISTENERS"]
    assert worker["group.id"] == f"{SCRIPT}-connect"
    for store in ("config", "offset", "status"):
        assert worker[f"{store}.storage.topic"].startswith(f"{SCRIPT}-connect-")
        assert worker[f"{store}.storage.replication.factor"] == "1"
    assert worker["offset.flush.interval.ms"] == "1000"
    assert worker["connector.client.config.override.policy"] == "All"
    assert worker["plugin.discovery"] == "service_load"
    assert worker["listeners"] == "http://0.0.0.0:8083"
    assert f"http://{worker['rest.advertised.host.name']}:{worker['rest.advertised.port']}" == (
        CONNECT_URL
    )
    assert "connect" in services


def test_register_runs_once_after_migrate_and_a_healthy_connect(
    services: dict[str, Service],
) -> None:
    register = services[REGISTER]
    assert depends_on(register) == {
        "migrate": "service_completed_successfully",
        "connect": "service_healthy",
    }
    assert register.get("restart", "no") == "no"
    assert "healthcheck" not in register


def test_register_runs_the_debezium_config_command(services: dict[str, Service]) -> None:
    argv = command(services[REGISTER])
    assert argv == ["debezium-config", "--register", "--connect-url", CONNECT_URL]
    assert_valid_command_line(REGISTER, argv)
