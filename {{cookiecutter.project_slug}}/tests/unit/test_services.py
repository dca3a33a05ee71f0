"""The testcontainers set-up of tests/services.py, checked against the installed testcontainers
without a Docker engine: the containers are built (never started) with a Docker client that
is given a fixed API version and a dead socket, so nothing is contacted. What a container
would run is read from the module itself: its environment, the KRaft settings it derives, and
the start script it would copy into the container. Then the message a run gets when neither
the TEST_* variables nor Docker are there, from a real pytest subprocess."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testcontainers.community.kafka import KafkaContainer
from testcontainers.core.version import ComparableVersion

from ..services import KAFKA_IMAGE, POSTGRES_IMAGE, kafka_container, postgres_container

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# A fixed API version: the Docker client then asks the engine nothing when it is built.
OFFLINE = {"version": "1.44"}


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST points at a socket nobody listens on: any call to an engine would fail."""
    dead = f"unix://{tmp_path}/no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", dead)
    return dead


def test_kafka_is_a_kraft_node_on_an_image_the_module_supports() -> None:
    kafka = kafka_container(OFFLINE)

    repository, _, tag = kafka.image.rpartition(":")
    assert kafka.image == KAFKA_IMAGE
    # The module's start script runs /etc/confluent/docker/*: only Confluent images have them.
    assert repository == "confluentinc/cp-kafka"
    assert ComparableVersion(tag) >= KafkaContainer.MIN_KRAFT_TAG
    # The tag the module's own KRaft test starts (its default image).
    default_image = inspect.signature(KafkaContainer).parameters["image"].default
    assert kafka.image == default_image, (
        f"testcontainers now defaults to {default_image}; move KAFKA_IMAGE with it"
    )
    assert kafka.kraft_enabled

    kafka.configure()  # type: ignore[no-untyped-call]  # what start() does first: derive the KRaft settings
    env = {key: str(value) for key, value in kafka.env.items()}
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_NODE_ID"] == "1"
    assert env["CLUSTER_ID"] == kafka.cluster_id
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@localhost:9094"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
    assert "CONTROLLER://0.0.0.0:9094" in env["KAFKA_LISTENERS"].split(",")
    assert "PLAINTEXT://0.0.0.0:9093" in env["KAFKA_LISTENERS"].split(",")
    assert "CONTROLLER:PLAINTEXT" in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "true"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert "KAFKA_ZOOKEEPER_CONNECT" not in env
    assert "9093" in {str(port).split("/")[0] for port in kafka.ports}
    assert kafka.wait_for.match("[KafkaRaftServer nodeId=1] Kafka Server started")


def test_kafka_start_script_formats_kraft_storage_and_advertises_the_mapped_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The script start() copies into the container once the port is mapped (tc_start),
    captured instead of copied: the host and mapped port are what the engine would report."""
    kafka = kafka_container(OFFLINE)
    kafka.configure()  # type: ignore[no-untyped-call]
    written: dict[str, str] = {}
    monkeypatch.setattr(kafka, "get_container_host_ip", lambda: "127.0.0.1")
    monkeypatch.setattr(kafka, "get_exposed_port", lambda port: {9093: 49153}[port])
    monkeypatch.setattr(
        kafka, "create_file", lambda content, path: written.update({path: content.decode()})
    )

    kafka.tc_start()

    assert list(written) == [KafkaContainer.TC_START_SCRIPT]
    script = written[KafkaContainer.TC_START_SCRIPT]
    lines = [line.strip() for line in script.splitlines()]
    assert "sed -i '/KAFKA_ZOOKEEPER_CONNECT/d' /etc/confluent/docker/configure" in lines
    assert any(
        f"kafka-storage format --ignore-formatted -t {kafka.cluster_id}" in line for line in lines
    )
    assert (
        "export KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:49153,BROKER://$(hostname -i):9092"
        in lines
    )
    assert lines[-3:] == [
        ". /etc/confluent/docker/bash-config",
        "/etc/confluent/docker/configure",
        "/etc/confluent/docker/launch",
    ]


def test_the_apache_image_is_refused_for_kraft() -> None:
    """Why the image is Confluent's: the module's version check rejects Apache's tags."""
    with pytest.raises(ValueError, match="not supported in Kraft mode"):
        KafkaContainer("apache/kafka:4.1.0", docker_client_kw=OFFLINE).with_kraft()


def test_postgres_container_gives_an_asyncpg_url_for_a_superuser() -> None:
    postgres = postgres_container(OFFLINE)
    assert postgres.image == POSTGRES_IMAGE
    assert postgres.driver == "+asyncpg"
    postgres._configure()
    # POSTGRES_USER is the image's superuser: it may create the per-run databases.
    assert {k: postgres.env[k] for k in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB")} == {
        "POSTGRES_USER": postgres.username,
        "POSTGRES_PASSWORD": postgres.password,
        "POSTGRES_DB": postgres.dbname,
    }
    assert "5432" in {str(port).split("/")[0] for port in postgres.ports}


def test_current_import_paths_warn_nothing(no_engine: str) -> None:
    """Imports and builds in a fresh interpreter that turns every DeprecationWarning into an
    error (the old `testcontainers.kafka` path warns at import)."""
    code = (
        "from tests.services import kafka_container, postgres_container\n"
        f"kafka_container({OFFLINE!r}).configure()\n"
        f"postgres_container({OFFLINE!r})._configure()\n"
        "import testcontainers.kafka\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DOCKER_HOST": no_engine},
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Only the last line, the deprecated path on purpose, may fail: it proves the check bites.
    assert result.returncode == 1, result.stderr
    assert "DeprecationWarning: testcontainers.kafka is deprecated" in result.stderr
    # (Counted as raised lines: Python 3.13's traceback also quotes the warn() call's source.)
    raised = [line for line in result.stderr.splitlines() if line.startswith("DeprecationWarning:")]
    assert len(raised) == 1, result.stderr
    assert "line 4, in <module>" in result.stderr, result.stderr


def _pytest_without_services(env_update: dict[str, str], no_engine: str) -> tuple[int, str, float]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"TEST_DATABASE_URL", "TEST_KAFKA_BOOTSTRAP_SERVERS"}
        and not k.startswith("PYTEST_")
    }
    env.update({"DOCKER_HOST": no_engine, **env_update})
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration/test_health.py",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stdout + result.stderr, time.monotonic() - started


def test_no_env_and_no_docker_stops_with_how_to(no_engine: str) -> None:
    code, output, seconds = _pytest_without_services({}, no_engine)
    assert code == 2, output
    assert "No TEST_* variables and no Docker engine." in output
    assert "TEST_DATABASE_URL=postgresql+asyncpg://user:pass@host:5432/postgres" in output
    assert "TEST_KAFKA_BOOTSTRAP_SERVERS=host:9092" in output
    assert "Docker engine is available (testcontainers starts both)" in output
    assert "Traceback" not in output
    assert " passed" not in output
    assert " failed" not in output
    assert seconds < 60


def test_one_variable_alone_names_the_other(no_engine: str) -> None:
    code, output, _ = _pytest_without_services(
        {"TEST_DATABASE_URL": "postgresql+asyncpg://u:p@127.0.0.1:1/postgres"}, no_engine
    )
    assert code == 2, output
    assert "TEST_KAFKA_BOOTSTRAP_SERVERS is not set." in output
    assert "Traceback" not in output
