"""`torchx ui` in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium against real jobs — local_cwd jobs that succeeded,
failed, run, were requeued, a capped group, a pipeline, a job whose log is hostile markup,
and a job on the real Slurm cluster when one is up. Screenshots of each page go to
``$TORCHX_UI_SCREENSHOTS`` (default ``target/ui-screenshots``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _engines import slurm_up

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ENGINES = os.environ.get("TORCHX_TEST_ENGINES", "").split(",")
SHOTS = Path(os.environ.get("TORCHX_UI_SCREENSHOTS", Path(__file__).parents[2] / "target" / "ui-screenshots"))


def _browser_here() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        if "browser" in ENGINES:
            pytest.fail(f"the browser was promised for this run but is missing: {missing}")
        pytest.skip(f"no browser here: {missing} (apt install chromium chromium-driver)")


class Jobs:
    """Real jobs in a state directory of their own."""

    def __init__(self, torchx_bin: str, root: Path) -> None:
        self.bin = torchx_bin
        self.cwd = root / "cwd"
        self.cwd.mkdir()
        self.env = dict(os.environ, TORCHX_STATE_DIR=str(root / "state"), HOME=str(root))
        self.env.pop("TORCHXCONFIG", None)
        self.handles: dict[str, str] = {}

    def torchx(self, *args: str, check: bool = True) -> str:
        out = subprocess.run([self.bin, *args], cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300)
        if check:
            assert out.returncode == 0, f"torchx {args}: {out.stderr}"
        return out.stdout + out.stderr

    def first_handle(self, text: str, prefix: str = "://") -> str:
        return next(w for w in text.split() if prefix in w)


@pytest.fixture(scope="module")
def jobs(torchx_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    _browser_here()
    j = Jobs(torchx_bin, tmp_path_factory.mktemp("ui"))
    h = j.handles
    h["succeeded"] = j.first_handle(j.torchx("run", "utils.echo", "--msg", "hello"))
    h["failed"] = j.first_handle(j.torchx("run", "utils.sh", "--", "sh", "-c", "exit 3", check=False))
    h["hostile"] = j.first_handle(
        j.torchx(
            "run",
            "utils.sh",
            "--",
            "sh",
            "-c",
            "echo '<img src=x onerror=window.__pwned=1>'; echo '</script><script>window.__pwned=2</script>'",
        )
    )
    h["requeued"] = j.first_handle(
        j.torchx(
            "run",
            "--requeue_exit_code",
            "75",
            "--max_requeues",
            "2",
            "utils.sh",
            "--",
            "sh",
            "-c",
            f"test -f {j.cwd}/again || {{ touch {j.cwd}/again; exit 75; }}; echo resumed",
        )
    )
    h["group"] = j.torchx(
        "run", "--detach", "--array", "4%2", "utils.sh", "--", "sh", "-c", "sleep 1; exit $((TORCHX_ARRAY_INDEX % 2))"
    ).split()[0]
    (j.cwd / "pipe.yaml").write_text(
        "name: chain\nsteps:\n"
        "  - {name: prepare, component: utils.sh, args: [sh, -c, 'echo ready']}\n"
        "  - {name: train, component: utils.sh, args: [sh, -c, 'exit 1'], after: [prepare]}\n"
        "  - {name: report, component: utils.sh, args: [sh, -c, 'echo report'], after: ['train:any']}\n"
    )
    h["pipeline"] = j.first_handle(j.torchx("run", "pipe.yaml", check=False), "pipeline://")
    h["running"] = j.torchx("run", "--detach", "utils.sh", "--", "sleep", "600").split()[0]
    h["hung"] = j.first_handle(
        j.torchx("run", "--hang_timeout", "1s", "utils.sh", "--", "sh", "-c", "sleep 600", check=False)
    )
    if slurm_up():
        h["slurm"] = j.first_handle(j.torchx("run", "-s", "slurm", "--wait", "utils.echo", "--msg", "on slurm"))
    yield j
    for handle in h.values():
        j.torchx("cancel", handle, check=False)


@pytest.fixture(scope="module")
def ui(jobs: Jobs) -> Iterator[str]:
    args = [jobs.bin, "ui", "--port", "0"] + (["-s", "slurm"] if "slurm" in jobs.handles else [])
    server = subprocess.Popen(
        args, cwd=jobs.cwd, env=jobs.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert server.stdout is not None
    first = server.stdout.readline().strip()
    assert first.startswith("torchx ui: http://127.0.0.1:"), first
    yield first.removeprefix("torchx ui: ")
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(ui: str) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # As root, in a closed network: no sandbox, and nothing that calls home.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,860",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.get(ui)  # the token becomes the cookie, then leaves the address bar
    assert "token=" not in driver.current_url
    yield driver
    driver.quit()


def base(ui: str) -> str:
    return ui.split("/?token=")[0]


def page(ui: str, kind: str, handle: str) -> str:
    return f"{base(ui)}/#/{kind}/{urllib.parse.quote(handle, safe='')}"


def until(what: str, check: Callable[[], Any], within: float = 60) -> Any:
    deadline = time.monotonic() + within
    while True:
        try:
            got = check()
        except Exception:  # noqa: BLE001 - the element may not be there yet
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def row_state(browser: Any, handle: str) -> str | None:
    found = browser.execute_script(
        "const r = [...document.querySelectorAll('#jobs tr')].find(r => r.dataset.handle === arguments[0]);"
        "return r ? r.querySelector('[data-state]').dataset.state : null;",
        handle,
    )
    return str(found) if found else None


def shot(browser: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"{name}.png"))


def test_the_jobs_page_shows_every_job_with_its_state(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(base(ui) + "/#/")
    expected = {
        "succeeded": "SUCCEEDED",
        "failed": "FAILED",
        "hostile": "SUCCEEDED",
        "requeued": "SUCCEEDED",
        "running": "RUNNING",
        "pipeline": "FAILED",
        "group": "FAILED",
        "hung": "FAILED",
        "slurm": "SUCCEEDED",
    }
    for name, handle in jobs.handles.items():
        until(f"{name} {expected[name]}", lambda h=handle, n=name: row_state(browser, h) == expected[n])
    # Filters work on the loaded rows.
    browser.find_element("id", "filter-name").send_keys("chain")
    until("the filter", lambda: browser.find_element("id", "count").text.startswith("1 of"))
    browser.find_element("id", "filter-name").clear()
    browser.execute_script("document.getElementById('filter-name').dispatchEvent(new Event('input'))")
    shot(browser, "jobs")


def test_a_state_change_shows_without_a_reload(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(base(ui) + "/#/")
    browser.execute_script("window.__same_page = true")
    handle = jobs.torchx("run", "--detach", "utils.sh", "--", "sleep", "3").split()[0]
    until("the new job running", lambda: row_state(browser, handle) == "RUNNING")
    until("the new job succeeded", lambda: row_state(browser, handle) == "SUCCEEDED")
    assert browser.execute_script("return window.__same_page") is True


def test_a_hostile_log_line_is_shown_as_text(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(page(ui, "logs", jobs.handles["hostile"]))
    text = until(
        "the log",
        lambda: (
            (t := browser.execute_script("return document.getElementById('log').textContent")) and "script" in t and t
        ),
    )
    assert "<img src=x onerror=window.__pwned=1>" in text
    assert "</script><script>window.__pwned=2</script>" in text
    assert browser.execute_script("return document.querySelectorAll('#main img, #main script').length") == 0
    assert browser.execute_script("return window.__pwned === undefined") is True
    shot(browser, "logs")


def test_a_job_page_shows_attempts_and_how_to_run_it_again(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(page(ui, "app", jobs.handles["requeued"]))
    rows = until(
        "two attempts",
        lambda: (r := browser.find_elements("css selector", "table.attempts tr")) and len(r) == 3 and r,
    )
    assert "requeued" in rows[1].text and "75" in rows[1].text, rows[1].text
    assert "succeeded" in rows[2].text, rows[2].text
    assert "torchx run -s local_cwd ./app.yaml" in browser.find_element("id", "main").text
    native = browser.find_element("id", "native").text
    assert "sh" in native, native
    shot(browser, "job")


def test_a_hung_job_page_shows_the_stacks_the_watchdog_captured(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(page(ui, "app", jobs.handles["hung"]))
    block = until("the stacks", lambda: browser.find_element("css selector", ".stacks[data-replica='sh/0'] pre"))
    assert "sleep 600" in block.text and "=== sh/0 pid " in block.text, block.text
    assert "hung" in browser.find_element("css selector", "table.attempts").text
    assert "sh/0 hung: no progress" in browser.find_element("id", "msg").text
    shot(browser, "hung")


def test_a_group_page_shows_progress_with_the_failed_tasks_first(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(page(ui, "app", jobs.handles["group"]))
    until("the group over", lambda: browser.find_element("css selector", "h1 [data-state]").text == "FAILED")
    segments = browser.find_elements("css selector", "#progress span")
    widths = {s.get_attribute("class"): s.value_of_css_property("width") for s in segments}
    assert set(widths) == {"fill-FAILED", "fill-SUCCEEDED"}, widths
    tasks = browser.find_elements("css selector", "#tasks tr[data-task]")
    assert [t.find_element("css selector", "[data-state]").text for t in tasks] == [
        "FAILED",
        "FAILED",
        "SUCCEEDED",
        "SUCCEEDED",
    ]
    assert browser.find_element("id", "rerun").is_displayed()
    shot(browser, "group")


def test_a_pipeline_page_draws_its_steps_with_their_states(jobs: Jobs, ui: str, browser: Any) -> None:
    browser.get(page(ui, "app", jobs.handles["pipeline"]))
    states = until(
        "the steps",
        lambda: browser.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#dag g')].map(g => [g.dataset.step, g.dataset.state]))"
        ),
    )
    assert states == {"prepare": "SUCCEEDED", "train": "FAILED", "report": "SUCCEEDED"}, states
    assert len(browser.find_elements("css selector", "#dag line")) == 2
    shot(browser, "pipeline")


def test_cancel_from_the_page_stops_the_job(jobs: Jobs, ui: str, browser: Any) -> None:
    handle = jobs.handles["running"]
    browser.get(page(ui, "app", handle))
    until("the cancel button", lambda: browser.find_element("id", "cancel")).click()
    alert = until("the confirmation", lambda: browser.switch_to.alert)
    assert handle in alert.text
    alert.accept()
    until("CANCELLED on the page", lambda: browser.find_element("css selector", "h1 [data-state]").text == "CANCELLED")
    assert json.loads(jobs.torchx("status", "--json", handle))["state"] == "CANCELLED"


def test_the_page_refuses_a_browser_without_the_token(ui: str, browser: Any) -> None:
    # A fresh profile has no cookie: the page and its API refuse it.
    browser.delete_all_cookies()
    browser.get(base(ui) + "/")
    assert "token is needed" in browser.find_element("tag name", "body").text
    browser.get(ui)
    until("the page again", lambda: browser.find_element("id", "jobs"))


def test_a_slurm_job_shows_with_its_scheduler(jobs: Jobs, ui: str, browser: Any) -> None:
    if "slurm" not in jobs.handles:  # slurm_up() failed the fixture if the cluster was promised
        pytest.skip("no Slurm cluster up (scripts/slurm/up.sh)")
    browser.get(page(ui, "app", jobs.handles["slurm"]))
    until("the slurm job", lambda: browser.find_element("css selector", "h1 [data-state]").text == "SUCCEEDED")
    browser.get(base(ui) + "/#/")
    until("its row", lambda: row_state(browser, jobs.handles["slurm"]) == "SUCCEEDED")
    row = browser.execute_script(
        "return [...document.querySelectorAll('#jobs tr')].find(r => r.dataset.handle === arguments[0]).innerText",
        jobs.handles["slurm"],
    )
    assert "slurm" in row
