"""The Kafka Connect image of the baked compose stack (deploy/connect/) against the native
worker of scripts/connect.sh: the same Kafka, Debezium, Jackson and log4j versions, the same
pom, the same Maven invocation (checksums enforced), the same jars byte for byte, and the same
worker settings apart from the addresses.

The scripts are not in a baked project, so this cross-check lives in the template's tests:
a version bumped in connect.sh and not in the image (or the other way round) fails here.
The jar comparison runs Maven for real (as connect.sh does; its cache makes it fast). There
is no Docker engine in the test environment, so the image's runtime is checked without it:
its entrypoint, Java options, worker and log configuration, on the jars its build step
resolves, start a worker on the test Kafka that the compose healthcheck finds healthy and
that lists Debezium's plugins (`-m connect`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from conftest import REPO_ROOT, SERVICES_HOW_TO, TEMPLATE_DIR, clean_env, note, run
from connect_support import BYTE_ARRAY_CONVERTER, EVENT_ROUTER, POSTGRES_CONNECTOR, http

CONNECT_SH = REPO_ROOT / "scripts" / "connect.sh"
LIB_SH = REPO_ROOT / "scripts" / "lib.sh"
CONNECT_DIR = TEMPLATE_DIR / "deploy" / "connect"
DOCKERFILE = CONNECT_DIR / "Dockerfile"
COMPOSE = TEMPLATE_DIR / "docker-compose.yml"
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
WORKER_START_TIMEOUT_S = 180

# connect.sh's shell variable -> the Dockerfile's ARG of the same version.
VERSIONS = {
    "KAFKA_VERSION": "KAFKA_VERSION",
    "DEBEZIUM_VERSION": "DEBEZIUM_VERSION",
    "JACKSON_VERSION": "JACKSON_VERSION",
    "LOG4J_VERSION": "LOG4J_VERSION",
}
# Worker settings that name hosts, ports or this cluster's group and topics: they differ
# between the native worker (127.0.0.1, a group per REST port) and the compose one.
ADDRESS_KEYS = {
    "bootstrap.servers",
    "group.id",
    "config.storage.topic",
    "offset.storage.topic",
    "status.storage.topic",
    "listeners",
    "rest.advertised.host.name",
    "rest.advertised.port",
}
Coordinate = tuple[str, str, str, str, str]


def connect_sh_defaults() -> dict[str, str]:
    """connect.sh's version variables at their defaults (no OUTBOX_* overrides)."""
    text = CONNECT_SH.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for name in VERSIONS:
        match = re.search(rf"^{name}=(\S+)", text, re.MULTILINE)
        assert match, f"connect.sh does not set {name}"
        value = match.group(1).strip('"')
        # "${OUTBOX_X:-${OUTBOX_Y:-4.3.1}}" -> 4.3.1 (the innermost default).
        defaults = re.findall(r":-([^${}]+)\}", value)
        found[name] = defaults[-1] if defaults else value
    return found


def dependency_plugin() -> str:
    match = re.search(r"^DEPENDENCY_PLUGIN=(\S+)", LIB_SH.read_text(encoding="utf-8"), re.M)
    assert match, "lib.sh does not set DEPENDENCY_PLUGIN"
    return match.group(1)


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        found.append((keyword.upper(), arguments.strip()))
        pending = ""
    return found


def build_args() -> dict[str, str]:
    args: dict[str, str] = {}
    for keyword, arguments in instructions():
        if keyword == "ARG" and "=" in arguments:
            name, _, value = arguments.partition("=")
            args[name] = value.strip('"')
    return args


def the_mvn_run() -> str:
    runs = [arguments for keyword, arguments in instructions() if keyword == "RUN"]
    mvn = [run_ for run_ in runs if run_.startswith("mvn ")]
    assert len(mvn) == 1, f"expected one RUN mvn ... in {DOCKERFILE}, found {runs}"
    return mvn[0]


def maven_properties() -> dict[str, str]:
    """The -Dname=value of the image's mvn command, with the Dockerfile's ARGs substituted."""
    args = build_args()
    pairs = re.findall(r'-D([\w.]+)="?\$\{(\w+)\}"?', the_mvn_run())
    return {name: args[arg] for name, arg in pairs}


def connect_sh_pom() -> str:
    """The pom connect.sh writes, with its shell variables at their defaults."""
    text = CONNECT_SH.read_text(encoding="utf-8")
    match = re.search(r'cat >"\$CONNECT_HOME/pom.xml" <<EOF\n(.*?)\nEOF\n', text, re.S)
    assert match, "connect.sh no longer writes its pom with cat <<EOF"
    pom = match.group(1)
    for name, value in connect_sh_defaults().items():
        pom = pom.replace(f"${name}", value)
    assert "$" not in pom, f"connect.sh's pom has variables this test does not know: {pom}"
    return pom


def image_pom() -> str:
    pom = (CONNECT_DIR / "pom.xml").read_text(encoding="utf-8")
    for name, value in maven_properties().items():
        pom = pom.replace(f"${{{name}}}", value)
    assert "${" not in pom, f"pom.xml has properties the Dockerfile does not pass: {pom}"
    return pom


def coordinates(pom: str, section: str) -> list[Coordinate]:
    def field(dependency: ET.Element, name: str) -> str:
        return (dependency.findtext(f"m:{name}", default="", namespaces=POM_NS)).strip()

    return [
        (
            field(dependency, "groupId"),
            field(dependency, "artifactId"),
            field(dependency, "version"),
            field(dependency, "type"),
            field(dependency, "scope"),
        )
        for dependency in ET.fromstring(pom).findall(f"{section}/m:dependency", POM_NS)
    ]


def properties(text: str) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {key.strip(): value.strip() for key, value in pairs}


def connect_sh_worker_config() -> dict[str, str]:
    text = CONNECT_SH.read_text(encoding="utf-8")
    match = re.search(r'cat >"\$CDIR/worker.properties" <<EOF\n(.*?)\nEOF\n', text, re.S)
    assert match, "connect.sh no longer writes worker.properties with cat <<EOF"
    return properties(match.group(1))


def jars(folder: Path) -> dict[str, str]:
    """File name -> sha256 of every jar in folder."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.glob("*.jar"))
    }


def test_the_image_pins_connect_sh_versions() -> None:
    native = connect_sh_defaults()
    args = build_args()
    assert native["KAFKA_VERSION"] == "4.3.1"
    assert native["DEBEZIUM_VERSION"] == "3.3.2.Final"
    for sh_name, arg in VERSIONS.items():
        assert args.get(arg) == native[sh_name], f"Dockerfile ARG {arg} != connect.sh {sh_name}"
    assert args["DEPENDENCY_PLUGIN"] == dependency_plugin()


def test_the_runtime_stage_is_apache_kafka_of_that_version() -> None:
    froms = [arguments.split()[0] for keyword, arguments in instructions() if keyword == "FROM"]
    assert froms[-1] == "apache/kafka:${KAFKA_VERSION}"
    builder = froms[0]
    assert re.fullmatch(r"maven:\d+\.\d+\.\d+-eclipse-temurin-\d+", builder), builder


def test_the_image_resolves_the_same_pom_with_checksums() -> None:
    native, image = connect_sh_pom(), image_pom()
    for section in ("m:dependencyManagement/m:dependencies", "m:dependencies"):
        assert coordinates(image, section) == coordinates(native, section), section
    assert coordinates(image, "m:dependencies")
    mvn = the_mvn_run()
    assert re.match(r"mvn -B -C ", mvn), "-C: Maven Central's checksums must be enforced"
    assert '"${DEPENDENCY_PLUGIN}:copy-dependencies"' in mvn
    assert "-DincludeScope=runtime" in mvn
    assert set(maven_properties()) == {
        "kafka.version",
        "debezium.version",
        "jackson.version",
        "log4j.version",
    }


def test_the_worker_settings_are_connect_sh_settings() -> None:
    native = connect_sh_worker_config()
    image = properties((CONNECT_DIR / "worker.properties").read_text(encoding="utf-8"))
    assert set(image) == set(native)
    differing = {key for key in native if image[key] != native[key]}
    assert differing <= ADDRESS_KEYS, {key: (image[key], native[key]) for key in differing}
    assert native["offset.flush.interval.ms"] == "1000"
    assert native["connector.client.config.override.policy"] == "All"


@pytest.fixture(scope="module")
def image_libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's jars: the Dockerfile's RUN mvn ... (its /build replaced by a temp dir)."""
    if shutil.which("mvn") is None:
        pytest.fail("mvn is missing: run the tests with ./scripts/test.sh (connect.sh installs it)")
    build = tmp_path_factory.mktemp("image-build")
    shutil.copy(CONNECT_DIR / "pom.xml", build / "pom.xml")
    script = the_mvn_run().replace("/build/", f"{build}/")
    # Docker runs RUN with /bin/sh -c and the stage's ARGs in the environment.
    run(["sh", "-c", script], cwd=build, env={**clean_env(), **build_args()}, timeout=900)
    return build / "libs"


def test_the_image_build_resolves_exactly_connect_sh_jars(image_libs: Path, tmp_path: Path) -> None:
    """The image's build step and lib.sh's mvn_copy_jars on connect.sh's pom: the same jar
    files, byte for byte."""
    image_jars = jars(image_libs)
    native = tmp_path / "native"
    native.mkdir()
    (native / "pom.xml").write_text(connect_sh_pom(), encoding="utf-8")
    run(
        ["bash", "-c", '. "$1" && mvn_copy_jars "$2" "$2/libs" connect', "_", LIB_SH, native],
        cwd=native,
        env=clean_env(),
        timeout=900,
    )
    native_jars = jars(native / "libs")

    assert image_jars == native_jars
    versions = connect_sh_defaults()
    for jar in (
        f"connect-runtime-{versions['KAFKA_VERSION']}.jar",
        f"kafka-clients-{versions['KAFKA_VERSION']}.jar",
        f"debezium-connector-postgres-{versions['DEBEZIUM_VERSION']}.jar",
        f"debezium-core-{versions['DEBEZIUM_VERSION']}.jar",
        f"jackson-databind-{versions['JACKSON_VERSION']}.jar",
        f"jackson-core-{versions['JACKSON_VERSION']}.jar",
        f"log4j-slf4j-impl-{versions['LOG4J_VERSION']}.jar",
    ):
        assert jar in image_jars, f"{jar} missing from {sorted(image_jars)}"
    # One version per artifact: no second Jackson or Connect beside the aligned one.
    artifacts = [re.sub(r"-\d[\w.-]*\.jar$", "", name) for name in image_jars]
    assert len(artifacts) == len(set(artifacts)), sorted(image_jars)
    assert len(image_jars) > 50


# --- the image's runtime, without Docker ---------------------------------------------------


def compose_healthcheck() -> str:
    """The bash command of the `connect` service's healthcheck (the compose file holds
    Jinja, so only its one healthcheck line is parsed)."""
    lines = [
        line for line in COMPOSE.read_text(encoding="utf-8").splitlines() if "/dev/tcp/" in line
    ]
    assert len(lines) == 1, lines
    test = yaml.safe_load(lines[0].strip().removeprefix("test:"))
    assert test[:3] == ["CMD", "bash", "-c"]
    return str(test[3])


def healthy(check: str) -> bool:
    done = subprocess.run(["bash", "-c", check], capture_output=True, timeout=30, check=False)
    return done.returncode == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def java_options() -> str:
    envs = [arguments for keyword, arguments in instructions() if keyword == "ENV"]
    options = [e.split("=", 1)[1] for e in envs if e.startswith("JDK_JAVA_OPTIONS=")]
    assert len(options) == 1, envs
    return options[0].strip('"')


def log_tail(path: Path) -> str:
    """The ERROR lines and the last lines of a worker's output, each cut to 300 characters
    (Connect's start logs its whole classpath on one line)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    errors = [line for line in lines if " ERROR " in line][-10:]
    return "\n".join(line[:300] for line in [*errors, "----", *lines[-30:]])


@pytest.fixture
def kafka() -> str:
    servers = os.environ.get("TEST_KAFKA_BOOTSTRAP_SERVERS")
    if not servers:
        pytest.fail(SERVICES_HOW_TO, pytrace=False)
    return servers


@pytest.fixture
def worker_group(kafka: str) -> Iterator[str]:
    """A group id of its own; its three internal topics are deleted afterwards."""
    group = f"image-check-{uuid.uuid4().hex[:8]}"
    yield group
    client = AdminClient({"bootstrap.servers": kafka})
    topics = [t for t in client.list_topics(timeout=10).topics if t.startswith(group)]
    for future in client.delete_topics(topics).values() if topics else ():
        future.result(timeout=30)


@pytest.mark.services
@pytest.mark.connect
def test_the_images_worker_starts_healthy_with_debezium(
    image_libs: Path, tmp_path: Path, kafka: str, worker_group: str
) -> None:
    """The image's ENTRYPOINT, JDK_JAVA_OPTIONS, worker.properties (addresses and group
    replaced) and log4j2.properties on the image's jars: the compose healthcheck fails before
    the worker is up and passes once it is, the worker lists the connector, the outbox router
    and the byte-array converter, and it logs to stdout."""
    port = free_port()
    config = tmp_path / "config"
    config.mkdir()
    addresses = {
        "bootstrap.servers": kafka,
        "group.id": worker_group,
        "config.storage.topic": f"{worker_group}-configs",
        "offset.storage.topic": f"{worker_group}-offsets",
        "status.storage.topic": f"{worker_group}-status",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
    }
    assert set(addresses) == ADDRESS_KEYS
    lines = []
    for line in (CONNECT_DIR / "worker.properties").read_text(encoding="utf-8").splitlines():
        key = line.split("=", 1)[0].strip()
        lines.append(f"{key}={addresses[key]}" if key in addresses else line)
    worker = "\n".join(lines) + "\n"
    assert "{{" not in worker, "Jinja outside the address settings"
    (config / "worker.properties").write_text(worker, encoding="utf-8")
    shutil.copy(CONNECT_DIR / "log4j2.properties", config / "log4j2.properties")

    def local(text: str) -> str:
        return text.replace("/opt/connect/libs", str(image_libs)).replace(
            "/opt/connect/config", str(config)
        )

    entrypoint = yaml.safe_load([a for k, a in instructions() if k == "ENTRYPOINT"][-1])
    argv = [local(part) for part in entrypoint]
    env = clean_env(JDK_JAVA_OPTIONS=local(java_options()))
    check = compose_healthcheck().replace("/8083 ", f"/{port} ")
    assert str(port) in check
    assert not healthy(check), "the healthcheck passes with no worker"

    output = tmp_path / "connect.out"
    started = time.monotonic()
    with output.open("wb") as sink:
        process = subprocess.Popen(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        while not healthy(check):
            assert process.poll() is None, f"worker exited:\n{log_tail(output)}"
            assert time.monotonic() - started < WORKER_START_TIMEOUT_S, (
                f"not healthy after {WORKER_START_TIMEOUT_S} s:\n{log_tail(output)}"
            )
            time.sleep(1)
        elapsed = time.monotonic() - started
        plugins = http("GET", f"http://127.0.0.1:{port}/connector-plugins?connectorsOnly=false")
        classes = {plugin["class"] for plugin in plugins}
        assert {POSTGRES_CONNECTOR, EVENT_ROUTER, BYTE_ARRAY_CONVERTER} <= classes
        debezium = [p for p in plugins if p["class"] == POSTGRES_CONNECTOR]
        assert debezium[0]["version"] == connect_sh_defaults()["DEBEZIUM_VERSION"]
        log = output.read_text(encoding="utf-8", errors="replace")
        assert re.search(r"^\[[\d-]+ [\d:,]+\] INFO .*\(org\.apache\.kafka\.connect", log, re.M)
        note(f"connect image: worker healthy after {elapsed:.1f} s ({shlex.join(argv[:2])} ...)")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
