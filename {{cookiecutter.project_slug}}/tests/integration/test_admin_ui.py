"""The admin page in a real headless Chromium: log in, find a failed item, read why it
failed, retry it and watch it deliver. Needs Debian's `chromium` package (skipped without)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest
import uvicorn
from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.store.status import ItemStatus

if TYPE_CHECKING:
    from playwright.async_api import Page

from ..debezium_ops_support import Relays, captured_ids, create, install_trigger, relays
from ..support import (
    CALLS,
    FAILURES,
    INBOX_BOX,
    OUTBOX_BOX,
    OutboxItem,
    RecordingTransport,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

__all__ = ["relays"]  # the fixture

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "ui-test-token-0123456789"


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The app with an admin token, served by uvicorn on a free port in a thread."""
    app_container = Container()
    app_container.settings.override(settings.model_copy(update={"admin_token": TOKEN}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        create_app(app_container), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="admin-ui-server", daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.05)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


async def count(container: Container, status: ItemStatus) -> int:
    async with container.session_factory()() as session:
        query = select(func.count()).select_from(OutboxItem).where(OutboxItem.status == int(status))
        return int((await session.execute(query)).scalar_one())


async def test_an_operator_finds_a_failed_item_retries_it_and_watches_it_deliver(
    container: Container, settings: Settings
) -> None:
    if not shutil.which(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian/Ubuntu: apt-get install -y chromium)")
    playwright_api = pytest.importorskip("playwright.async_api")
    reset_transports()
    FAILURES["ui"] = 1
    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="ui")],
            "max_retries": 0,
            "retry_strategies": [],
        }
    )
    async with running_worker(container, registry, boxes=[OUTBOX_BOX]):
        async with container.session_factory()() as session, session.begin():
            await container.outbox().create(
                session, OutboxItem, event_key="42", event_name="thing_created", payload={"a": 1}
            )
        await wait_for(lambda: _has(container, ItemStatus.FAILED, 1))
        async with container.session_factory()() as session, session.begin():
            await container.outbox().create_batch(
                session,
                OutboxItem,
                [
                    {"event_key": str(n), "event_name": "thing_updated", "payload": {}}
                    for n in range(3)
                ],
            )
        await wait_for(lambda: _has(container, ItemStatus.DELIVERED, 3))
        async with container.session_factory()() as session:
            failed_id = (
                await session.execute(
                    select(OutboxItem.id).where(OutboxItem.status == int(ItemStatus.FAILED))
                )
            ).scalar_one()

        # A stuck browser must fail the test, not stall the run.
        with serving(settings) as base:
            async with asyncio.timeout(180), playwright_api.async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = await browser.new_page()
                    requested: list[str] = []
                    page.on("request", lambda request: requested.append(request.url))
                    await _operate(page, base, failed_id)
                finally:
                    await browser.close()
            assert requested
            assert all(url.startswith(base) for url in requested), requested  # no CDN

    assert await count(container, ItemStatus.DELIVERED) == 4
    assert [item_id for _key, item_id, _ in CALLS["ui"]].count(failed_id) == 2


async def _operate(page: Page, base: str, failed_id: int) -> None:
    from playwright.async_api import expect as expect_

    await page.goto(f"{base}/admin/ui")
    # A wrong token is refused, the right one opens the page.
    await page.fill("#token", "wrong")
    await page.click("#login")
    await expect_(page.locator("#login-error")).to_contain_text("refused")
    await page.fill("#token", TOKEN)
    await page.click("#login")
    overview = page.locator(f'#boxes tr[data-box="{OUTBOX_BOX}"]')
    await expect_(overview.locator(".c-relay")).to_have_text("worker")
    await expect_(overview.locator(".c-failed")).to_have_text("1")
    await expect_(overview.locator(".c-delivered")).to_have_text("3")

    # Filter: the failed items of the box.
    await page.select_option("#f-box", OUTBOX_BOX)
    await page.select_option("#f-status", "failed")
    await page.click("#apply")
    rows = page.locator("#items tbody tr")
    await expect_(rows).to_have_count(1)
    row = page.locator(f'#items tr[data-id="{failed_id}"]')
    await expect_(row.locator(".status")).to_have_text("failed")

    # Why it failed.
    await row.locator(".act-details").click()
    await expect_(page.locator("#d-error")).to_have_text("RuntimeError: transport failed (test)")
    await expect_(page.locator("#d-payload")).to_contain_text("hidden")

    # Retry, cancelled first, then confirmed.
    await row.locator(".act-retry").click()
    await expect_(page.locator("#confirm")).to_be_visible()
    await page.click("#confirm-cancel")
    await expect_(row.locator(".status")).to_have_text("failed")
    await row.locator(".act-retry").click()
    await page.click("#confirm-ok")
    await expect_(page.locator("#message")).to_contain_text("retry: 1 item(s) changed")
    # What the action said outlives the page's own refreshes (every 2 s). A refresh loads
    # the items, then the audit log: once a later refresh asks for the audit log, its items
    # are drawn, and the message must still be there.
    for _ in range(2):
        async with page.expect_request(lambda r: "/admin/audit" in r.url, timeout=10_000):
            pass
    await expect_(page.locator("#message")).to_have_text("retry: 1 item(s) changed")

    # Watch it deliver (the page refreshes itself every 2 s). The operator's own load of a
    # selection replaces the action's message.
    await page.select_option("#f-status", "")
    await page.click("#apply")
    await expect_(page.locator("#message")).to_have_text("")
    await expect_(page.locator(f'#items tr[data-id="{failed_id}"] .status')).to_have_text(
        "delivered", timeout=20_000
    )
    await expect_(overview.locator(".c-failed")).to_have_text("0", timeout=10_000)
    await expect_(overview.locator(".c-delivered")).to_have_text("4")


async def _has(container: Container, status: ItemStatus, n: int) -> bool:
    return await count(container, status) >= n


async def test_an_operator_parks_a_blocked_keys_head_and_reads_the_audit_log(
    container: Container, settings: Settings
) -> None:
    if not shutil.which(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian/Ubuntu: apt-get install -y chromium)")
    playwright_api = pytest.importorskip("playwright.async_api")
    reset_transports()
    FAILURES["ui"] = 1
    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="ui")],
            "max_retries": 0,
            "retry_strategies": [],
            "strict_order": True,
        }
    )
    async with running_worker(container, registry, boxes=[OUTBOX_BOX]):
        async with container.session_factory()() as session, session.begin():
            await container.outbox().create(
                session, OutboxItem, event_key="7", event_name="thing_created", payload={}
            )
        await wait_for(lambda: _has(container, ItemStatus.FAILED, 1))
        async with container.session_factory()() as session, session.begin():
            await container.outbox().create(
                session, OutboxItem, event_key="7", event_name="thing_updated", payload={}
            )
        await asyncio.sleep(1.5)  # the strict box holds key 7 back behind its failed head
        assert await count(container, ItemStatus.PENDING) == 1
        async with container.session_factory()() as session:
            head = (
                await session.execute(
                    select(OutboxItem.id).where(OutboxItem.status == int(ItemStatus.FAILED))
                )
            ).scalar_one()

        with serving(settings) as base:
            async with asyncio.timeout(180), playwright_api.async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = await browser.new_page()
                    await _park(page, base, head)
                finally:
                    await browser.close()
        await wait_for(lambda: _has(container, ItemStatus.DELIVERED, 1))

    assert await count(container, ItemStatus.PARKED) == 1
    assert [item_id for _key, item_id, _ in CALLS["ui"]] == [head, head + 1]


async def _park(page: Page, base: str, head: int) -> None:
    import hashlib

    from playwright.async_api import expect as expect_

    await page.goto(f"{base}/admin/ui")
    await page.fill("#token", TOKEN)
    await page.click("#login")
    overview = page.locator(f'#boxes tr[data-box="{OUTBOX_BOX}"]')
    await expect_(overview.locator(".c-failed")).to_have_text("1")
    await page.select_option("#f-box", OUTBOX_BOX)
    await page.select_option("#f-status", "failed")
    await page.click("#apply")
    row = page.locator(f'#items tr[data-id="{head}"]')
    await row.locator(".act-park").click()
    await expect_(page.locator("#confirm-text")).to_contain_text("the later items of its key go on")
    await page.click("#confirm-ok")
    await expect_(page.locator("#message")).to_contain_text("park: 1 item(s) changed")
    await expect_(overview.locator(".c-parked")).to_have_text("1")
    await expect_(overview.locator(".c-failed")).to_have_text("0")
    # The audit log, newest first: this park, by the token's fingerprint, one item.
    latest = page.locator("#audit tbody tr").first
    fingerprint = hashlib.sha256(TOKEN.encode()).hexdigest()[:8]
    await expect_(latest.locator(".a-action")).to_have_text("park")
    await expect_(latest.locator(".a-actor")).to_have_text(f"admin:token-{fingerprint}")
    await expect_(latest.locator(".a-affected")).to_have_text("1")
    await expect_(latest.locator(".a-selection")).to_contain_text(f'"ids":[{head}]')
    # The parked item now waits under its own status filter.
    await page.select_option("#f-status", "parked")
    await page.click("#apply")
    await expect_(row.locator(".status")).to_have_text("parked")


async def test_a_debezium_box_shows_its_capture_and_offers_only_replay(
    relays: Relays, settings: Settings
) -> None:
    """A box Debezium relays: the overview names the relay and what is wrong with its capture
    (no slot here), its items offer no retry, park or discard (the API refuses them), and
    Replay captures the item again behind the captured ones."""
    if not shutil.which(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian/Ubuntu: apt-get install -y chromium)")
    playwright_api = pytest.importorskip("playwright.async_api")
    container = relays.container
    await install_trigger(container, relays.box)
    ids = await create(container, "ab")
    assert await captured_ids(container) == ids
    debezium_settings = settings.model_copy(
        update={"boxes_file": relays.debezium_file, "debezium_name_suffix": relays.suffix}
    )
    with serving(debezium_settings) as base:
        async with asyncio.timeout(180), playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page()
                await _replay(page, base, relays.names.slot, ids[0])
            finally:
                await browser.close()
    assert await captured_ids(container) == [*ids, ids[0]]
    assert await count(container, ItemStatus.DELIVERED) == 2


async def _replay(page: Page, base: str, slot: str, item_id: int) -> None:
    from playwright.async_api import expect as expect_

    await page.goto(f"{base}/admin/ui")
    await page.fill("#token", TOKEN)
    await page.click("#login")
    overview = page.locator(f'#boxes tr[data-box="{OUTBOX_BOX}"]')
    relay = overview.locator(".c-relay")
    await expect_(relay).to_have_text(f"debezium: captured, but replication slot {slot} is missing")
    await expect_(relay).to_have_class("c-relay relay-problem")
    await expect_(overview.locator(".c-delivered")).to_have_text("2")
    await expect_(page.locator(f'#boxes tr[data-box="{INBOX_BOX}"] .c-relay')).to_have_text("")

    await page.select_option("#f-box", OUTBOX_BOX)
    await page.click("#apply")
    await expect_(page.locator("#items tbody tr")).to_have_count(2)
    row = page.locator(f'#items tr[data-id="{item_id}"]')
    await expect_(row.locator("button")).to_have_text(["Details", "Replay"])
    await row.locator(".act-replay").click()
    await expect_(page.locator("#confirm-text")).to_contain_text("sent again with the same")
    await page.click("#confirm-ok")
    await expect_(page.locator("#message")).to_contain_text("replay: 1 item(s) changed")
    await expect_(page.locator("#audit tbody tr").first.locator(".a-action")).to_have_text("replay")
