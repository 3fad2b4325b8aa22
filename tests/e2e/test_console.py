"""The web console in a real browser (headless Chromium from Debian's ``chromium``, driven
by Selenium through ``chromium-driver``) against a real stack: API with its HTTP port,
scheduler, executor, and a recording target.

It logs in with a tenant token, finds a job by name and by label (never another
tenant's), watches its runs appear as they fire, triggers a run, replays a dead run,
follows a job's calendar to its dates, lists the calendars and the notification channels
and deletes one, lists the flow limits and sees a job's flow policy and its target's auth,
pauses the job, and looks at the admin view; screenshots are kept under the test's tmp
dir (the path is printed), and copied to ``$SUNDIAL_SCREENSHOTS_DIR`` when set
(``SUNDIAL_SCREENSHOTS_DIR=bench/results/console`` refreshes README's picture), so a
test run leaves the repository as it was.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from sundial.devstack import Services, Stack
from sundial.v1 import calendar_pb2, flow_pb2, job_pb2, job_service_pb2, run_pb2
from tests.helpers.cluster import ADMIN_TOKEN, Cluster, Tenant, client_of, shared_services
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = pytest.mark.timeout(240)

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 30.0
NY = "America/New_York"
EXCLUDE = calendar_pb2.CALENDAR_KIND_EXCLUDE
INCLUDE = calendar_pb2.CALENDAR_KIND_INCLUDE
DEAD = job_service_pb2.NOTIFICATION_EVENT_KIND_DEAD_RUN
PAUSED = job_service_pb2.NOTIFICATION_EVENT_KIND_AUTO_PAUSED
LATE = job_service_pb2.NOTIFICATION_EVENT_KIND_LATE_RUN
CreateChannel = job_service_pb2.CreateNotificationChannelRequest

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "the browser test needs Debian's chromium and chromium-driver packages "
        "(.ci/run installs them; apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402 - only once the browser is known to exist
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service as DriverService  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--window-size=1280,1500",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=DriverService(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def http_services(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """The services with the API's HTTP port (the console), for the module's tests (each
    with tenants of its own)."""
    with shared_services(
        stack, module_database_url, tmp_path_factory.mktemp("logs"), http=True
    ) as services:
        yield services


@pytest.fixture
async def cluster(http_services: Services) -> AsyncIterator[Cluster]:
    async with client_of(http_services) as running:
        yield running


def until(driver: WebDriver, check: Callable[[WebDriver], Any], what: str) -> Any:
    """Poll ``check`` until it returns something truthy (WebDriverWait, bounded). The
    console re-renders its tables as it polls, so an element found a moment ago may be
    gone when read: that is one more poll, not a failure."""
    return WebDriverWait(
        driver, WAIT_S, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    ).until(check, message=what)


def rows(driver: WebDriver, table_id: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr[data-run-key]")


def unlabelled(driver: WebDriver) -> list[str]:
    """Form controls of the page without a label (an accessibility failure)."""
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll('input, select, textarea')]"
            ".filter(e => !e.labels || !e.labels.length).map(e => e.id || e.name);"
        )
    )


def status_text(driver: WebDriver) -> str:
    return driver.find_element(By.ID, "status").text


def click(driver: WebDriver, css: str, what: str) -> None:
    """Click the element ``css`` finds, found afresh (the page re-renders as it polls)."""

    def clicked(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    until(driver, clicked, what)


def text_of(driver: WebDriver, element_id: str) -> str:
    """The text of element ``element_id`` once it has some (read afresh)."""
    return str(until(driver, lambda d: d.find_element(By.ID, element_id).text, element_id))


def confirm(driver: WebDriver, css: str) -> None:
    """Click the element ``css`` finds, then the confirmation dialog's confirm button."""
    click(driver, css, css)
    until(
        driver,
        lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None,
        "the confirmation dialog",
    )
    driver.find_element(By.ID, "confirm-ok").click()


def job(
    name: str, url: str, labels: dict[str, str], *, zone: str = "Europe/Berlin", **schedule: Any
) -> job_pb2.Job:
    return job_pb2.Job(
        name=name,
        labels=labels,
        schedule=job_pb2.Schedule(time_zone=zone, **schedule),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
    )


def channel(name: str, url: str, *kinds: int) -> job_service_pb2.NotificationChannel:
    return job_service_pb2.NotificationChannel(
        display_name=name,
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
        event_kinds=kinds,  # type: ignore[arg-type]
    )


def search(driver: WebDriver, field: str, text: str, *, shown: str, hidden: str) -> None:
    """Type ``text`` into the search ``field``, search, wait for the filtered list."""
    driver.find_element(By.ID, field).send_keys(text)
    driver.find_element(By.ID, "search").click()

    def filtered(d: WebDriver) -> bool:
        listed = d.find_element(By.ID, "jobs-table").text
        return shown in listed and hidden not in listed

    until(driver, filtered, f"the jobs list filtered by {field}")


@dataclass
class Visit:
    """What the browser session works on."""

    base: str
    tenant: Tenant
    beat_id: str
    broken_id: str
    shots: Path
    notify_url: str
    old_channel_id: str


def listed_rows(driver: WebDriver, table_id: str, key: str) -> dict[str, str]:
    """The rows of a list table by their ``data-<key>``, once there are some."""

    def found(d: WebDriver) -> dict[str, str]:
        return {
            str(r.get_attribute(f"data-{key}")): r.text
            for r in d.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr[data-{key}]")
        }

    return dict(until(driver, found, f"the rows of {table_id}"))


def calendars_and_channels(driver: WebDriver, visit: Visit) -> None:
    """From the broken job's page (its schedule names `holidays`) to that calendar, the
    calendars list, and the notification channels, one deleted."""
    click(driver, "#job-calendars a.calendar-link", "the job's calendar link")
    dates = listed_rows(driver, "dates-table", "date")
    assert text_of(driver, "calendar-name") == "holidays"
    facts = text_of(driver, "calendar-facts")
    assert "exclude" in facts and "office closed" in facts, facts
    # As stored: single dates first, then yearly ones.
    assert list(dates) == ["2027-03-13", "2031-01-01", "12-25"], dates
    assert "once Saturday" in dates["2027-03-13"], dates
    assert "every year 25 December" in dates["12-25"], dates
    driver.save_screenshot(str(visit.shots / "7-calendar.png"))

    driver.find_element(By.ID, "nav-calendars").click()
    calendars = listed_rows(driver, "calendars-table", "calendar")
    assert list(calendars) == ["holidays", "quarter-ends"], calendars  # not the other's
    assert "include" in calendars["quarter-ends"], calendars
    counts = until(
        driver,
        lambda d: [
            e.text
            for e in d.find_elements(By.CSS_SELECTOR, '#calendars-table td[data-count="dates"]')
        ],
        "the calendars' date counts",
    )
    assert counts == ["3", "4"], counts
    click(driver, '#calendars-table a[href="#/calendars/quarter-ends"]', "quarter-ends")
    assert list(listed_rows(driver, "dates-table", "date"))[-1] == "2031-12-31"
    driver.find_element(By.ID, "nav-calendars").click()
    listed_rows(driver, "calendars-table", "calendar")
    driver.save_screenshot(str(visit.shots / "8-calendars.png"))

    driver.find_element(By.ID, "nav-channels").click()
    channels = listed_rows(driver, "channels-table", "channel-id")
    assert len(channels) == 2, channels
    pager = next(text for key, text in channels.items() if key != visit.old_channel_id)
    assert "ops pager" in pager and f"POST {visit.notify_url}" in pager, pager
    assert "dead run, auto paused" in pager and "5 min (one digest" in pager, pager
    old = channels[visit.old_channel_id]
    assert "old webhook" in old and "late run" in old and "none (one notification" in old, old
    assert unlabelled(driver) == []
    driver.save_screenshot(str(visit.shots / "9-channels.png"))
    confirm(driver, f'#channels-table tr[data-channel-id="{visit.old_channel_id}"] .delete-channel')
    until(driver, lambda d: "Deleted old webhook." in status_text(d), "the delete's answer")
    until(
        driver,
        lambda d: list(listed_rows(d, "channels-table", "channel-id")) != list(channels),
        "the channel gone from the list",
    )
    assert visit.old_channel_id not in listed_rows(driver, "channels-table", "channel-id")


def flow_limits(driver: WebDriver, visit: Visit) -> None:
    """The Flow view: the tenant's limits by key (not the other tenant's), each with its
    waiting and running runs."""
    driver.find_element(By.ID, "nav-flow").click()
    limits = listed_rows(driver, "flow-table", "flow-key")
    assert list(limits) == ["https://crm.example.com:443", "team=core"], limits
    crm = limits["https://crm.example.com:443"]
    assert "10/s" in crm and "20.0" in crm, crm  # the rate, and a full bucket of 20

    def counts(d: WebDriver) -> dict[str, dict[str, str]]:
        # Read afresh in one go: the view re-renders as it polls.
        return {
            str(row.get_attribute("data-flow-key")): {
                str(cell.get_attribute("data-count")): cell.text
                for cell in row.find_elements(By.CSS_SELECTOR, "td[data-count]")
            }
            for row in d.find_elements(By.CSS_SELECTOR, "#flow-table tbody tr[data-flow-key]")
        }

    shown = until(driver, counts, "the flow limits' counts")
    assert shown["https://crm.example.com:443"]["waiting"] == "0", shown
    assert shown["team=core"]["max-running"] == "2", shown
    # The beat job's runs count under team=core as they wait and run (one every 2 s).
    assert shown["team=core"]["waiting"].isdigit(), shown
    assert shown["team=core"]["running"].isdigit(), shown
    assert unlabelled(driver) == []
    driver.save_screenshot(str(visit.shots / "10-flow.png"))


def browse(driver: WebDriver, visit: Visit) -> dict[str, str]:
    """The whole browser session (Selenium is synchronous: run off the event loop)."""
    base, tenant, shots = visit.base, visit.tenant, visit.shots
    beat_id, broken_id = visit.beat_id, visit.broken_id
    driver.get(f"{base}/console/")
    token = until(driver, lambda d: d.find_element(By.ID, "token"), "the login form")
    token.send_keys(tenant.token + Keys.ENTER)  # the keyboard alone logs in
    until(driver, lambda d: "beat" in d.find_element(By.ID, "jobs-table").text, "the jobs list")
    assert unlabelled(driver) == []
    listed = text_of(driver, "jobs-table")
    assert "broken" in listed
    assert "other-tenants-job" not in listed  # another tenant's job is never shown
    assert tenant.token not in driver.current_url  # the token is never in a URL
    driver.save_screenshot(str(shots / "1-jobs.png"))

    # Search by label, then by name prefix (server-side filters).
    search(driver, "search-label", "team=growth", shown="broken", hidden="beat")
    driver.find_element(By.ID, "search-label").clear()
    search(driver, "search-name", "be", shown="beat", hidden="broken")
    driver.find_element(By.LINK_TEXT, "beat").click()

    # Runs appear as they fire (the page polls).
    until(driver, lambda d: len(rows(d, "runs-table")) >= 1, "a first run")
    first = len(rows(driver, "runs-table"))
    until(driver, lambda d: len(rows(d, "runs-table")) > first, "runs appearing as they fire")
    until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#outcomes li.ok"), "a success")
    until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#lateness-chart circle"), "a chart")
    facts = text_of(driver, "job-facts")
    assert "every 2.00 s" in facts, facts
    assert "pause after 3 consecutive dead runs" in facts, facts
    assert driver.find_elements(By.CSS_SELECTOR, "#upcoming-table tbody tr")
    # Its policies, the lateness threshold among them, and its SLO over the default
    # windows: the runs that fired were started on time by the executor.
    assert "late after 30.00 s" in text_of(driver, "job-policies")
    flow = text_of(driver, "job-flow")
    assert "priority 1" in flow and "concurrency key team=core" in flow, flow
    assert "rate-limit key the target's origin" in flow, flow
    auth = text_of(driver, "job-auth")  # the target's auth (issue 27)
    assert auth == (
        "Standard Webhooks on, identity token for https://beat.example.com, valid 10.0 min"
    ), auth
    assert "within 30.00 s" in text_of(driver, "slo-table")

    def slo_rows(d: WebDriver) -> list[dict[str, int]]:
        found = []
        for row in d.find_elements(By.CSS_SELECTOR, "#slo-table tbody tr[data-window]"):
            cells = row.find_elements(By.CSS_SELECTOR, "td[data-count]")
            found.append(
                {
                    str(c.get_attribute("data-count")): int(c.text)
                    for c in cells
                    if c.get_attribute("data-count") != "ratio"
                }
            )
        return found

    def on_time_slo(d: WebDriver) -> list[dict[str, int]] | None:
        found = slo_rows(d)
        return found if len(found) == 3 and all(r["on-time"] >= 1 for r in found) else None

    slo = until(driver, on_time_slo, "the SLO with on-time runs")
    assert all(r["due"] >= r["on-time"] + r["late"] for r in slo), slo
    assert [r["missed"] for r in slo] == [0, 0, 0], slo
    # The revisions: the update made before the visit is version 2; version 1 shown
    # beside the current definition marks what changed since.
    until(
        driver,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#revisions-table tr[data-version]")) == 2,
        "two revisions",
    )
    assert "description" in text_of(driver, "revisions-table")
    click(driver, '#revisions-table tr[data-version="1"] button.view-revision', "Show version 1")
    assert "Version 1" in text_of(driver, "revision-title")
    changed = until(
        driver,
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#revision-facts dd.changed")],
        "the changed fields of version 1",
    )
    assert len(changed) == 1 and "changed since" in changed[0], changed
    # Read in one poll: the job page re-renders its SLO table as it refreshes.
    windows = until(
        driver,
        lambda d: [
            r.find_element(By.TAG_NAME, "th").text
            for r in d.find_elements(By.CSS_SELECTOR, "#slo-table tbody tr")
        ],
        "the SLO table",
    )
    assert windows == ["1 h", "24 h", "7 d"], windows
    driver.save_screenshot(str(shots / "6-revision.png"))
    # Roll back to it: version 3 has version 1's definition (no description).
    confirm(driver, "#revision-rollback")
    until(driver, lambda d: "now version 3" in status_text(d), "the rollback's answer")
    until(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, '#revisions-table tr[data-version="3"]'),
        "the rollback's revision",
    )

    assert unlabelled(driver) == []
    # Trigger with the keyboard: the dialog takes the focus to its confirm button.
    driver.find_element(By.ID, "action-trigger").send_keys(Keys.ENTER)
    until(
        driver,
        lambda d: d.switch_to.active_element.get_attribute("id") == "confirm-ok",
        "the focus on the dialog's confirm button",
    )
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    until(driver, lambda d: "Triggered: run" in status_text(d), "the trigger's answer")
    until(
        driver,
        lambda d: any("manual" in r.text for r in rows(d, "runs-table")),
        "the manual run in the history",
    )
    driver.save_screenshot(str(shots / "2-job.png"))

    # The dead run of the other job, replayed.
    driver.get(f"{base}/console/#/jobs/{broken_id}")
    dead_key = until(
        driver,
        lambda d: (
            d.find_element(By.CSS_SELECTOR, "#dead-table button.replay")
            .find_element(By.XPATH, "./ancestor::tr")
            .get_attribute("data-run-key")
        ),
        "the dead run's Replay button",
    )
    facts = text_of(driver, "job-facts")
    assert "at 02:30, every day (America/New_York)" in facts, facts
    # Fire times across the spring-forward gap carry their DST note.
    driver.execute_script(
        "const i = document.getElementById('preview-after'); i.value = '2027-03-12';"
    )
    driver.find_element(By.ID, "preview").click()
    gap = until(
        driver,
        lambda d: [
            (r.text, r.find_element(By.CLASS_NAME, "dst").text)
            for r in d.find_elements(By.CSS_SELECTOR, "#preview-table tbody tr")
            if "2027-03-14" in r.text
        ],
        "the preview across the DST gap",
    )
    assert "03:00" in gap[0][0] and gap[0][1], gap[0]
    driver.save_screenshot(str(shots / "3-dead-run.png"))
    # Its calendar drops the preview's 13 March, with the calendar's name.
    dropped = until(
        driver,
        lambda d: [
            r.text
            for r in d.find_elements(By.CSS_SELECTOR, "#preview-table tbody tr")
            if "2027-03-13" in r.text
        ],
        "the date the calendar drops",
    )
    assert "holidays" in dropped[0], dropped
    confirm(driver, "#dead-table button.replay")
    until(driver, lambda d: "Replayed:" in status_text(d), "the replay's answer")
    calendars_and_channels(driver, visit)
    flow_limits(driver, visit)

    # Pause the first job, with a note.
    driver.get(f"{base}/console/#/jobs/{beat_id}")
    until(driver, lambda d: d.find_elements(By.ID, "action-pause"), "the Pause button")
    driver.find_element(By.ID, "action-pause").click()
    until(driver, lambda d: d.find_element(By.ID, "pause-note").is_displayed(), "the note field")
    driver.find_element(By.ID, "pause-note").send_keys("maintenance")
    driver.find_element(By.ID, "confirm-ok").click()
    until(driver, lambda d: d.find_elements(By.ID, "action-resume"), "the job shown paused")
    until(driver, lambda d: "maintenance" in d.find_element(By.ID, "job-facts").text, "the note")
    until(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, '#revisions-table tr[data-version="4"]'),
        "the pause's revision",
    )
    driver.save_screenshot(str(shots / "4-paused.png"))

    # The admin view, with an admin token.
    driver.find_element(By.ID, "logout").click()
    token = until(driver, lambda d: d.find_element(By.ID, "token"), "the login form again")
    token.send_keys(ADMIN_TOKEN)
    driver.find_element(By.ID, "login").click()
    until(
        driver,
        lambda d: tenant.tenant_id in d.find_element(By.ID, "tenants-table").text,
        "the tenants list",
    )
    until(
        driver,
        lambda d: (
            d.find_elements(By.ID, "cluster-facts")
            or "Cluster status" in d.find_element(By.ID, "cluster").text
        ),
        "the cluster section",
    )
    driver.save_screenshot(str(shots / "5-admin.png"))

    blocked = [
        entry["message"]
        for entry in driver.get_log("browser")
        if "Content Security Policy" in entry["message"] or entry["level"] == "SEVERE"
    ]
    # The 401/403 answers the login probe draws are expected in the log; nothing else is.
    unexpected = [m for m in blocked if "401" not in m and "403" not in m]
    assert not unexpected, unexpected
    return {"dead_key": dead_key or ""}


async def test_the_console_in_a_browser(
    cluster: Cluster, target: RecordingTarget, browser: WebDriver, tmp_path: Path
) -> None:
    target.script("/broken", status=400, body=b"bad request")
    tenant = await cluster.tenant()
    other = await cluster.tenant()
    await other.create_job(job("other-tenants-job", f"{target.url}/ok", {}, cron="0 3 * * *"))
    beat_job = job(
        "beat",
        f"{target.url}/ok",
        {"team": "core"},
        interval=job_pb2.IntervalSchedule(every={"seconds": 2}),
    )
    beat_job.policies.lateness_threshold.FromSeconds(30)
    beat_job.policies.failure.pause_after_consecutive_dead = 3
    beat_job.policies.flow.priority = 1
    beat_job.policies.flow.concurrency_key = "team=core"
    beat_job.target.http.auth.standard_webhooks = True
    beat_job.target.http.auth.identity_token.audience = "https://beat.example.com"
    beat_job.target.http.auth.identity_token.lifetime.FromSeconds(600)
    beat = await tenant.create_job(beat_job)
    await tenant.call(
        "UpdateJob",
        job_service_pb2.UpdateJobRequest(
            job=job_pb2.Job(job_id=beat.job_id, description="every two seconds"),
            update_mask={"paths": ["description"]},
        ),
    )
    calendars = [
        ("holidays", EXCLUDE, "office closed", ["12-25", "2031-01-01", "2027-03-13"]),
        ("quarter-ends", INCLUDE, "", ["2031-03-31", "2031-06-30", "2031-09-30", "2031-12-31"]),
    ]
    for name, kind, description, dates in calendars:
        await tenant.call(
            "CreateCalendar",
            job_service_pb2.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(
                    name=name, kind=kind, description=description, dates=dates
                )
            ),
        )
    await other.call(
        "CreateCalendar",
        job_service_pb2.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="other-tenants", kind=EXCLUDE, dates=["01-01"])
        ),
    )
    for owner, key, limit in (
        (tenant, "team=core", flow_pb2.FlowLimit(max_running=2)),
        (tenant, "https://crm.example.com:443", flow_pb2.FlowLimit(rate_per_second=10, burst=20)),
        (other, "other-tenants-key", flow_pb2.FlowLimit(max_running=1)),
    ):
        limit.key = key
        await owner.call("SetFlowLimit", flow_pb2.SetFlowLimitRequest(limit=limit))
    notify_url = f"{target.url}/notify"
    pager = channel("ops pager", notify_url, DEAD, PAUSED)
    pager.digest_window.FromTimedelta(timedelta(minutes=5))
    await tenant.call("CreateNotificationChannel", CreateChannel(channel=pager))
    old = await tenant.call(
        "CreateNotificationChannel",
        CreateChannel(channel=channel("old webhook", notify_url, LATE)),
    )
    broken = await tenant.create_job(
        job(
            "broken",
            f"{target.url}/broken",
            {"team": "growth"},
            cron="30 2 * * *",
            zone=NY,
            calendars=["holidays"],
        )
    )
    await tenant.call("TriggerJob", job_service_pb2.TriggerJobRequest(job_id=broken.job_id))

    async def dead() -> run_pb2.Run:
        runs = [r for r in await tenant.runs(broken.job_id) if r.status == run_pb2.RUN_STATUS_DEAD]
        assert runs, "the broken job's run is not dead yet"
        return runs[0]

    await assert_eventually(dead, timeout_s=30, interval_s=0.3)

    shots = tmp_path / "screenshots"
    shots.mkdir()
    base = cluster.services.processes["api"].http_url
    assert base is not None
    seen = await asyncio.to_thread(
        browse,
        browser,
        Visit(base, tenant, beat.job_id, broken.job_id, shots, notify_url, old.channel.channel_id),
    )

    # What the browser did, as the gRPC API sees it.
    async def replayed() -> None:
        runs = {r.run_key: r for r in await tenant.runs(broken.job_id)}
        assert runs[seen["dead_key"]].replay_count == 1

    await assert_eventually(replayed, timeout_s=10, interval_s=0.2)
    got = await tenant.call("GetJob", job_service_pb2.GetJobRequest(job_id=beat.job_id))
    assert got.job.paused
    assert got.job.pause_note == "maintenance"
    # The rollback restored version 1's definition: the description is gone again.
    assert got.job.description == "" and got.job.version == 4
    rolled = await tenant.call(
        "GetJob", job_service_pb2.GetJobRequest(job_id=beat.job_id, version=3)
    )
    assert rolled.job.description == "" and rolled.job.schedule == beat.schedule
    kinds = [r.kind for r in await tenant.runs(beat.job_id)]
    assert run_pb2.RUN_KIND_MANUAL in kinds
    # The channel deleted in the browser is gone; the other stays.
    left = await tenant.call(
        "ListNotificationChannels", job_service_pb2.ListNotificationChannelsRequest()
    )
    assert [c.display_name for c in left.channels] == ["ops pager"]
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await tenant.call(
            "GetNotificationChannel",
            job_service_pb2.GetNotificationChannelRequest(channel_id=old.channel.channel_id),
        )
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND

    # Tokens reach no log: not the API's (which saw every request) nor any other.
    for log in cluster.services.log_dir.iterdir():
        text = log.read_text(errors="replace")
        assert tenant.token not in text, f"{log.name} holds the tenant token"
        assert ADMIN_TOKEN not in text, f"{log.name} holds the admin token"

    print(f"console screenshots: {shots}")
    await asyncio.to_thread(_keep_screenshots, shots)


def _keep_screenshots(shots: Path) -> None:
    """Copy the screenshots to ``$SUNDIAL_SCREENSHOTS_DIR`` when it is set."""
    if keep := os.environ.get("SUNDIAL_SCREENSHOTS_DIR"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        for shot in sorted(shots.iterdir()):
            shutil.copyfile(shot, Path(keep) / shot.name)


def author(driver: WebDriver, base: str, tenant: Tenant, url: str, shots: Path) -> None:
    """Create a job in the form (a refused cron first, its error on the cron field), see
    its first run succeed on the Runs page, pause it and resume it by selector, then
    again by ticking it on the jobs list."""
    driver.get(f"{base}/console/")
    token = until(driver, lambda d: d.find_element(By.ID, "token"), "the login form")
    token.send_keys(tenant.token + Keys.ENTER)
    click(driver, "#new-job", "the New job link")
    until(driver, lambda d: d.find_element(By.ID, "job-form"), "the job form")
    assert unlabelled(driver) == []
    driver.find_element(By.ID, "job-name").send_keys("authored")
    driver.find_element(By.ID, "job-cron").send_keys("61 * * * *")
    driver.find_element(By.ID, "job-url").send_keys(url)
    driver.find_element(By.ID, "job-labels").send_keys("team=web")
    driver.find_element(By.ID, "job-save").click()
    error = until(
        driver, lambda d: d.find_element(By.ID, "job-cron-error").text, "the cron field's error"
    )
    assert "out of range" in error
    assert driver.find_element(By.ID, "job-cron").get_attribute("aria-invalid") == "true"
    # An interval counted from the end of each run instead: the preview shows its
    # earliest times and says so.
    cron = driver.find_element(By.ID, "job-cron")
    cron.clear()
    every = driver.find_element(By.ID, "job-every")
    every.send_keys("15m")
    driver.find_element(By.ID, "job-from-end").click()
    until(
        driver,
        lambda d: (
            len(d.find_elements(By.CSS_SELECTOR, "#form-preview li")) == 5
            and "end of the previous run" in d.find_element(By.ID, "form-preview-note").text
        ),
        "the fixed delay's preview",
    )
    driver.find_element(By.ID, "job-from-end").click()
    every.send_keys(Keys.CONTROL + "a", Keys.DELETE)
    until(
        driver,
        lambda d: not d.find_elements(By.CSS_SELECTOR, "#form-preview li"),
        "the preview emptied",
    )
    # A schedule firing every second; the preview shows its next times as it is typed.
    cron.send_keys("* * * * * *")
    until(
        driver,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#form-preview li")) == 5,
        "the live preview",
    )
    driver.save_screenshot(str(shots / "6-new-job.png"))
    driver.find_element(By.ID, "job-save").click()
    until(
        driver,
        lambda d: (
            "#/jobs/" in d.current_url and "authored" in d.find_element(By.TAG_NAME, "h1").text
        ),
        "the new job's page",
    )

    # Its first run succeeds, seen on the tenant-wide Runs page.
    driver.find_element(By.ID, "nav-runs").click()
    status = until(driver, lambda d: d.find_element(By.ID, "runs-status"), "the Runs page")
    # Chosen by value, not typed: typing into a <select> is the browser's typeahead, which
    # starts over after a pause between keys, and on a loaded machine "succeeded" ended on
    # another status (a fresh-clone CI run found no succeeded row in 30 s).
    Select(status).select_by_value("succeeded")
    selector = driver.find_element(By.ID, "runs-selector")
    selector.send_keys("team=web")
    driver.find_element(By.ID, "runs-search").click()
    until(
        driver,
        lambda d: d.find_elements(
            By.CSS_SELECTOR, '#tenant-runs-table tr[data-status="succeeded"]'
        ),
        "a succeeded run of the new job",
    )
    assert unlabelled(driver) == []
    driver.save_screenshot(str(shots / "7-runs.png"))

    # Pause it by selector: the dialog shows the count first.
    driver.find_element(By.ID, "nav-jobs").click()
    until(driver, lambda d: d.find_element(By.ID, "search-selector"), "the jobs list")
    driver.find_element(By.ID, "search-selector").send_keys("team=web")
    click(driver, "#bulk-pause", "Pause matching")
    until(
        driver,
        lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None,
        "the confirmation",
    )
    assert "Pause 1 of the 1 jobs matching team=web" in text_of(driver, "confirm-text")
    driver.find_element(By.ID, "confirm-ok").click()
    until(driver, lambda d: "Paused 1 jobs." in status_text(d), "the jobs paused")
    click(driver, "#bulk-resume", "Resume matching")
    until(
        driver,
        lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None,
        "the confirmation",
    )
    driver.find_element(By.ID, "confirm-ok").click()
    until(driver, lambda d: "Resumed 1 jobs." in status_text(d), "the jobs resumed")

    # Tick it on the list (a labelled box per row) and act on the selection: the dialog
    # names the count and the jobs.
    box = 'input.select-job[data-name="authored"]'
    until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, box), "the job's box")
    assert unlabelled(driver) == []
    for verb, done in (("pause", "Paused 1 job."), ("resume", "Resumed 1 job.")):
        click(driver, box, "the job's box")
        until(driver, lambda d: "1 selected" in text_of(d, "selection-count"), "the count")
        click(driver, f"#selected-{verb}", f"{verb} selected")
        until(
            driver,
            lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None,
            "the confirmation",
        )
        assert f"{verb.title()} 1 selected job: authored?" in text_of(driver, "confirm-text")
        driver.find_element(By.ID, "confirm-ok").click()
        until(driver, lambda d, done=done: done in status_text(d), done)
        # A job acted on leaves the selection.
        until(driver, lambda d: "0 selected" in text_of(d, "selection-count"), "no selection")
    driver.save_screenshot(str(shots / "8-selected.png"))


async def test_the_console_authors_a_job_and_acts_on_jobs_by_selector(
    cluster: Cluster, target: RecordingTarget, browser: WebDriver, tmp_path: Path
) -> None:
    tenant = await cluster.tenant()
    other = await cluster.tenant()
    theirs = await other.create_job(
        job("web", f"{target.url}/ok", {"team": "web"}, cron="0 3 * * *")
    )
    shots = tmp_path / "screenshots"
    shots.mkdir()
    base = cluster.services.processes["api"].http_url
    assert base is not None
    await asyncio.to_thread(author, browser, base, tenant, f"{target.url}/ok", shots)
    listed = await tenant.call("ListJobs", job_service_pb2.ListJobsRequest(selector="team=web"))
    [made] = listed.jobs
    assert made.name == "authored" and not made.paused
    revisions = await tenant.call(
        "ListJobRevisions", job_service_pb2.ListJobRevisionsRequest(job_id=made.job_id)
    )
    # Created; paused and resumed by selector; paused and resumed as the selection.
    assert [r.version for r in revisions.revisions] == [5, 4, 3, 2, 1]
    assert any(r.status == run_pb2.RUN_STATUS_SUCCEEDED for r in await tenant.runs(made.job_id))
    untouched = await other.call("GetJob", job_service_pb2.GetJobRequest(job_id=theirs.job_id))
    assert untouched.job.version == 1 and not untouched.job.paused
    copy_to = os.environ.get("SUNDIAL_SCREENSHOTS_DIR")
    if copy_to:
        for shot in shots.iterdir():
            shutil.copy(shot, Path(copy_to) / shot.name)
