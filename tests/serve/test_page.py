"""`mtkit serve`'s page at GET / in a real headless Chromium, driven by Selenium.

Skipped with the reason where selenium, chromium or chromedriver is missing (`pip install -e '.[browser]'`,
`apt-get install chromium chromium-driver`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.serve.test_app import Server

PHONE = (390, 844)  # CSS pixels of a common phone held upright
WAIT_S = 60
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def find_browser() -> tuple[str, str]:
    """Paths of chromium and chromedriver, or skip naming what is missing."""
    pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[browser]'")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromedriver are needed: apt-get install chromium chromium-driver")
    return chromium, driver


def start_browser(profile: Path, size: tuple[int, int]) -> Any:
    """Headless Chromium in a fresh, empty profile, reaching nothing but the server under test."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = find_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium  # with the driver's path given too, Selenium downloads nothing
    for flag in CHROMIUM_FLAGS + (f"--user-data-dir={profile}",):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    # A phone's screen, as the browser's device emulation sets it: a window cannot be made narrower than 500 px.
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": True},
    )
    return browser


ENGINE_LINES = {"torch": "torch (cpu, fp32)", "ctranslate2": "ctranslate2 (cpu, float32)"}  # what /info gives


@pytest.fixture(scope="module", params=list(ENGINE_LINES))
def page_server(request: pytest.FixtureRequest, tiny_run: Path, tmp_path_factory: pytest.TempPathFactory):
    find_browser()  # skip before paying for a server start
    if request.param == "ctranslate2":
        pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install -e '.[ctranslate2]'")
    started = Server(
        tiny_run, tmp_path_factory.mktemp("serve-page") / "stderr.log", "--max-lines", "3", "--engine", request.param
    )
    started.engine = request.param
    yield started
    started.stop()


@pytest.fixture
def browser(tmp_path: Path):
    driver = start_browser(tmp_path / "profile", PHONE)
    yield driver
    driver.quit()


def test_page_translates_as_the_api_does(page_server: Server, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    lines = ["A man is sleeping on a bench.", "Two dogs play in the snow."]
    status, _, expected = page_server.translate({"text": lines})
    assert status == 200
    browser.get(f"http://127.0.0.1:{page_server.port}/")
    wait = WebDriverWait(browser, WAIT_S)
    wait.until(lambda driver: driver.find_element(By.ID, "engine").text != "…")  # /info has been shown
    wait.until(lambda driver: "loading" not in driver.find_element(By.ID, "pair").text)  # /languages too
    assert Select(browser.find_element(By.ID, "pair")).first_selected_option.text == "en → de"
    assert not browser.find_element(By.ID, "key-label").is_displayed()  # no --api-keys: no key to ask for
    assert browser.find_element(By.ID, "engine").text == ENGINE_LINES[page_server.engine]

    browser.find_element(By.ID, "source").send_keys("\n".join(lines))
    browser.find_element(By.ID, "translate").click()
    wait.until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "#output li"))
    shown = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#output li .text")]
    assert shown == expected["translations"] and not browser.find_element(By.ID, "error").is_displayed()
    # each line's weakest sentence's confidence, as the API gave it
    notes = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#output li .confidence")]
    weakest = [min(s["confidence"] for s in sentences) for sentences in expected["sentences"]]
    shown_scores = [float(note.split(";")[0].removeprefix("confidence ")) for note in notes]
    assert len(shown_scores) == len(weakest) and all(abs(a - b) <= 0.0051 for a, b in zip(shown_scores, weakest))
    # Usable on a phone: the viewport is the phone's width (viewport meta), and nothing scrolls sideways.
    assert browser.execute_script("return window.innerWidth") == PHONE[0]
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    assert browser.save_screenshot(str(tmp_path / "page.png"))


def test_page_shows_the_api_error(page_server: Server, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"http://127.0.0.1:{page_server.port}/")
    browser.find_element(By.ID, "source").send_keys("A dog.\n" * 4)  # 5 lines with the last, empty one
    browser.find_element(By.ID, "translate").click()
    error = browser.find_element(By.ID, "error")
    WebDriverWait(browser, WAIT_S).until(lambda driver: error.is_displayed())
    assert "5 lines" in error.text and "--max-lines" in error.text


def test_page_picks_the_language_pair_of_a_server_of_two_models(
    tiny_run: Path, de_en_run: Path, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    server = Server(tiny_run, tmp_path / "stderr.log", f"de-en={de_en_run}")  # named on the command line
    try:
        lines = ["Ein Mann schläft.", "Zwei Hunde spielen im Schnee."]
        status, _, expected = server.translate({"text": lines, "source": "de", "target": "en"})
        assert status == 200
        browser.get(f"http://127.0.0.1:{server.port}/")
        wait = WebDriverWait(browser, WAIT_S)
        wait.until(lambda driver: "loading" not in driver.find_element(By.ID, "pair").text)
        pair = Select(browser.find_element(By.ID, "pair"))
        assert [option.text for option in pair.options] == ["de → en", "en → de"]
        wait.until(lambda driver: driver.find_element(By.ID, "models").text)
        # each model by its name, never its path on the server
        assert browser.find_element(By.ID, "models").text == f"2 models: {tiny_run.name} (en->de); de-en (de->en)"
        pair.select_by_visible_text("de → en")
        browser.find_element(By.ID, "source").send_keys("\n".join(lines))
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "#output li"))
        shown = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#output li .text")]
        assert shown == expected["translations"]
    finally:
        server.stop()


def test_page_translates_a_file_as_the_endpoint_does(page_server: Server, browser: Any, tmp_path: Path) -> None:
    """LibreTranslate's file flow in the page: choose a document, translate it, fetch the link it shows."""
    import requests
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    document = tmp_path / "notes.txt"
    document.write_text("A man is sleeping on a bench. Two dogs play in the snow.\n", encoding="utf-8")
    files = {"file": ("notes.txt", document.read_bytes())}
    asked = requests.post(
        f"http://127.0.0.1:{page_server.port}/translate_file", files=files, data={"source": "en", "target": "de"}
    )
    expected = requests.get(asked.json()["translatedFileUrl"]).content
    browser.get(f"http://127.0.0.1:{page_server.port}/")
    wait = WebDriverWait(browser, WAIT_S)
    wait.until(lambda driver: "loading" not in driver.find_element(By.ID, "pair").text)
    wait.until(lambda driver: ".docx" in driver.find_element(By.ID, "file").get_attribute("accept"))
    browser.find_element(By.ID, "file").send_keys(str(document))
    browser.find_element(By.ID, "translate-file").click()
    link = browser.find_element(By.ID, "download-link")
    wait.until(lambda driver: link.is_displayed())
    assert requests.get(link.get_attribute("href")).content == expected
    assert expected.decode().strip() and "A man" not in expected.decode()
