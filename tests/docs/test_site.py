"""The documentation site: it builds with --strict, its reference pages are generated from the code,
and headless Chromium (Debian's package, driven by selenium) renders every page of the nav, draws
every diagram a page declares, fits its tables and code to the column, and finds a rule by its id
with the site's own search box."""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sagestack.project.rules import RULES
from tests.docs.site import REPO, nav_pages, url_of

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def test_every_nav_page_is_built_and_nothing_is_written_into_the_repository(built_site: Path) -> None:
    for _title, source in nav_pages():
        assert (built_site / url_of(source)).is_file(), source
    # the reference pages are generated in memory on every build, never written under docs/
    assert not list((REPO / "docs").glob("reference/*.md"))


def test_the_reference_pages_hold_what_the_code_defines(built_site: Path) -> None:
    rules = (built_site / "reference" / "rules.html").read_text()
    assert all(f'id="{rule}"' in rules for rule in RULES)
    spec = (built_site / "reference" / "spec.html").read_text()
    for anchor in ("jobspec-instance-type", "endpointspec-rollout", "llmspec-container", "projectspec-jobs"):
        assert f'id="{anchor}"' in spec, anchor
    cli = (built_site / "reference" / "cli.html").read_text()
    for anchor in ("sagestack-validate", "sagestack-local-train", "sagestack-capacity-offerings"):
        assert f'id="{anchor}"' in cli, anchor
    assert "--max-parallel" in cli
    api = (built_site / "reference" / "constructs.html").read_text()
    for name in ("TrainingPipeline", "InferenceEndpoint", "ArtifactBucket"):
        assert f'id="sagestack.constructs.{name}"' in api, name
    assert "grant_start_execution" in api  # members come from the docstrings, not only the class names


def test_getting_started_shows_the_screens_of_a_fresh_project(built_site: Path) -> None:
    """The screens are captured at build time from a project `sagestack init` has just written."""
    page = (built_site / "getting-started.html").read_text()
    assert "<!-- screen:" not in page
    for command in (
        "$ sagestack init digits",
        "$ sagestack validate",
        "$ sagestack plan --env dev",
        "$ sagestack local train train",
    ):
        assert command in page, command
    assert "✓ dev: digits in us-east-1" in page  # validate's verdict on the fresh project
    assert "ml.m5.xlarge" in page  # the skeleton job's candidate, in plan's table
    # a real local training run: its steps, then its verdict with the metrics and where the model is
    assert re.search(r"step \d+/\d+ · ", page) and "✓ trained train: val_accuracy=" in page
    assert "model: .sagestack/local/dev/train/model" in page


def test_the_guides_show_the_recorded_bench_runs(built_site: Path) -> None:
    """Each recorded `local bench` run (docs/data/) is printed as the command prints it and drawn as a
    PNG beside its guide, both at build time from the record: no PNG is kept in the repository."""
    from tests.support.charts import assert_a_chart

    assert not list((REPO / "docs").rglob("*.png"))
    for source, name, size in (("endpoints", "digits", (640, 480)), ("llm", "chat", (1280, 480))):
        page = (built_site / "guide" / f"{source}.html").read_text()
        assert "<!-- bench:" not in page
        assert f'src="bench-{name}.png"' in page and f"bench-{name}.json" in page
        assert "best:" in page or "no configuration meets the target" in page
        assert "chart: .sagestack/local/" in page  # the record's own path
        assert_a_chart(built_site / "guide" / f"bench-{name}.png", size)
        assert (built_site / "data" / f"bench-{name}.json").is_file()  # the figures, linked from the page


@pytest.fixture(scope="module")
def served(built_site: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if CHROMIUM is None or DRIVER is None:
        pytest.fail("chromium and chromedriver are missing: `make setup` installs Debian's packages")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.page_load_strategy = "eager"  # the DOM is enough: no wait for images
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def test_chromium_renders_every_page_of_the_nav(served: str, browser: object) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    for title, source in nav_pages():
        browser.get(served + url_of(source))
        assert "404" not in browser.title, source
        assert title in browser.title or source == "index.md", (source, browser.title)
        assert browser.title.endswith("sagestack"), browser.title
        assert browser.find_elements(By.CSS_SELECTOR, "header.md-header"), source  # Material's header
        assert browser.find_element(By.CSS_SELECTOR, "article.md-content__inner h1").text, source


def test_every_picture_of_the_guides_loads(served: str, browser: object) -> None:
    """A picture is a file beside its page (no script draws it, nothing is fetched from elsewhere):
    each <img> of every page loads, and the multi-account guide shows its diagram."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    pictures: dict[str, list[str]] = {}
    for _title, source in nav_pages():
        browser.get(served + url_of(source))
        WebDriverWait(browser, 20).until(
            lambda d: d.execute_script(
                "return [...document.querySelectorAll('article img')].every(i => i.complete)"
            )
        )
        images = browser.find_elements(By.CSS_SELECTOR, "article img")
        broken = [i.get_attribute("src") for i in images if not i.get_property("naturalWidth")]
        assert not broken, (source, broken)
        pictures[source] = [urlsplit(i.get_attribute("src") or "").path for i in images]
    assert pictures["guide/multi-account.md"] == ["/guide/multi-account.svg"]
    # the charts of the recorded `local bench` runs, drawn at build by the command's own code
    assert pictures["guide/endpoints.md"] == ["/guide/bench-digits.png"]
    assert pictures["guide/llm.md"] == ["/guide/bench-chat.png"]
    for source in ("guide/endpoints.md", "guide/llm.md"):
        browser.get(served + url_of(source))
        WebDriverWait(browser, 20).until(
            lambda d: d.execute_script("return document.querySelector('article img').complete")
        )
        (image,) = browser.find_elements(By.CSS_SELECTOR, "article img")
        assert image.get_property("naturalWidth") >= 640 and image.get_property("naturalHeight") == 480
        assert (image.get_attribute("alt") or "").startswith("The chart sagestack local bench drew for")


def test_the_search_box_finds_a_rule_by_its_id(served: str, browser: object) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    rule = "spot-checkpoint"
    assert rule in RULES
    browser.get(served + "index.html")
    box = WebDriverWait(browser, 20).until(
        expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input"))
    )
    box.send_keys(rule)

    def found(driver: WebDriver) -> bool:
        links = [
            urlsplit(a.get_attribute("href") or "")
            for a in driver.find_elements(By.CSS_SELECTOR, ".md-search-result a")
        ]
        return any(link.path == "/reference/rules.html" and link.fragment == rule for link in links)

    # the results are drawn anew as each key of the query arrives: a link read between two drawings
    # is gone (stale), and the wait reads them again
    WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,)).until(found)
    first = browser.find_element(By.CSS_SELECTOR, ".md-search-result__list a")
    assert "reference/rules.html" in (first.get_attribute("href") or "")


def test_the_site_opens_from_the_disk(built_site: Path, browser: object) -> None:
    """`make docs` says to open site/index.html: its links lead to pages, not to folders."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    browser.get((built_site / "index.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, "article a[href='reference/rules.html']").click()
    assert browser.current_url == (built_site / "reference" / "rules.html").as_uri()
    assert browser.title.startswith("Rules")
    assert browser.find_element(By.ID, "spot-checkpoint").text.startswith("spot-checkpoint")


MERMAID = re.compile(r"^```mermaid\n(?P<body>.*?)^```", re.S | re.M)
SNIPPET = re.compile(r'^--8<-- "(?P<name>[^"]+)"$', re.M)


def declared_diagrams(source: str) -> list[str]:
    """The Mermaid source of each ```mermaid fence of a page (a snippet line read from docs/diagrams/)."""
    path = REPO / "docs" / source
    if not path.is_file():  # a reference page, generated by the hooks: it declares none
        return []
    return [
        SNIPPET.sub(lambda s: (REPO / "docs" / "diagrams" / s["name"]).read_text(), m["body"])
        for m in MERMAID.finditer(path.read_text())
    ]


def first_label(diagram: str) -> str:
    """The first node's or box's label of a Mermaid flowchart, as it reads drawn (no markup)."""
    label = re.search(r'\["([^"]+)"\]', diagram)
    assert label, diagram
    return re.sub(r"<[^>]+>", " ", label[1]).split()[0]


def drawn_diagrams(browser: object) -> list[str]:
    """The text of every SVG Mermaid drew on the page. Material puts each in a closed shadow root,
    which no page script can enter: the DevTools protocol's DOM, with shadow roots pierced, can."""
    tree = browser.execute_cdp_cmd("DOM.getDocument", {"depth": -1, "pierce": True})  # type: ignore[attr-defined]

    def text(node: dict) -> str:
        own = node.get("nodeValue", "") if node.get("nodeType") == 3 else ""
        return " ".join([own, *(text(c) for c in node.get("children", []))]).strip()

    def walk(node: dict) -> list[str]:
        attributes = dict(zip(node.get("attributes", [])[::2], node.get("attributes", [])[1::2], strict=True))
        if node.get("nodeName") == "svg" and attributes.get("id", "").startswith("__mermaid_"):
            return [" ".join(text(node).split())]
        return [d for k in ("children", "shadowRoots") for c in node.get(k, []) for d in walk(c)]

    return walk(tree["root"])


def test_every_page_that_declares_a_diagram_shows_it_drawn(served: str, browser: object) -> None:
    """A ```mermaid fence becomes an SVG drawn by Mermaid (not its source shown as text, not Mermaid's
    'Syntax error' picture): on the home page and Getting started (what one environment deploys),
    and on every page that declares one."""
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    declared = {source: declared_diagrams(source) for _title, source in nav_pages()}
    assert declared["index.md"] and declared["getting-started.md"]
    assert declared["guide/development.md"] and declared["guide/multi-account.md"]  # the layers, promotion
    for source, diagrams in declared.items():
        browser.get(served + url_of(source))
        if not diagrams:
            continue
        count = len(diagrams)
        drawn = WebDriverWait(browser, 30).until(
            lambda d, n=count: found if len(found := drawn_diagrams(d)) >= n else None
        )
        assert len(drawn) == len(diagrams), (source, drawn)
        for diagram, svg in zip(diagrams, drawn, strict=True):
            assert "Syntax error" not in svg, (source, svg)
            assert first_label(diagram) in svg, (source, first_label(diagram), svg)
        # no fence was left as text: Material replaces each drawn one
        shown = browser.execute_script(
            "return [...document.querySelectorAll('article pre')].map(p => p.textContent).join('\\n')"
        )
        assert "flowchart" not in shown and "--8<--" not in shown, source


# Where a page's tables and code blocks are wider than its column (a code block scrolls, cut on the
# right), or a table cell breaks a name in two (a code span on two lines with no space in it).
TOO_WIDE = """
const column = document.querySelector('article.md-content__inner');
const found = [];
for (const code of column.querySelectorAll('pre > code')) {
  if (code.scrollWidth > code.clientWidth + 1) {
    const line = code.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
    found.push(`code block ${code.scrollWidth - code.clientWidth}px too wide: ${line}`);
  }
}
for (const table of column.querySelectorAll('table')) {
  const room = table.closest('.md-typeset__scrollwrap') || column;
  if (table.scrollWidth > room.clientWidth + 1)
    found.push(`table ${table.scrollWidth - room.clientWidth}px too wide: ${table.rows[0].textContent.trim()}`);
  for (const code of table.querySelectorAll('code'))
    if (code.getClientRects().length > 1 && !/\\s/.test(code.textContent))
      found.push(`a name broken in two in a table: ${code.textContent}`);
}
return found;
"""


def test_no_table_or_code_block_is_wider_than_its_column(served: str, browser: object) -> None:
    """At Material's widest column (a 1280-pixel window): nothing is cut on the right or scrolls, and no
    table cell breaks a variable's name; every page of the nav, the generated reference included."""
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    wrong = []
    for _title, source in nav_pages():
        browser.get(served + url_of(source))
        wrong += [f"{source}: {problem}" for problem in browser.execute_script(TOO_WIDE)]
    assert not wrong, "\n".join(wrong)
