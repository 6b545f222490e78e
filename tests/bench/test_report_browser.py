"""The HTML report in a real browser: Debian's chromium, headless, opens the report from 127.0.0.1
as a reader would, at a 1280 x 2000 window. Every plot must load and show at its own proportions,
every link to the data files must answer, no table or other part of the page may be wider than the
window, and nothing may be fetched from anywhere but the report's own folder. Screenshots of the
window and of the whole page are kept in the test's temporary folder (their paths are printed).

The browser is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON
messages ended by a NUL byte, commands on the browser's file descriptor 3, answers and events on
4), so the test needs neither a WebSocket client nor a debugging port.

The run is realistic and made in about a second: one real agent run on the local onnxruntime, its
document copied into two boards x two variants (stock, tuned) x fp32/int8 x five rounds with
latencies scaled like a Pi's, one failed board, fp32/int8 agreement, and a stored verify result.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import functools
import http.server
import json
import os
import select
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_models import agent_doc, conv_model

from orchestrator.bench import results
from orchestrator.bench.report import plots
from orchestrator.bench.report.html import write_html
from orchestrator.bench.results import ResultStore, RunRecord
from orchestrator.bench.series import pairings_within

pytestmark = pytest.mark.integration

WINDOW = (1280, 2000)
# Headless, and nothing from outside: no sandbox (chromium starts none as root), no GPU, and none of
# the browser's own traffic (updates, sync, QUIC probes), which a closed test network refuses; a
# new empty profile each time (--user-data-dir, added at the start).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
    "--remote-debugging-pipe",
)
TIMEOUT_S = 30.0

MODEL = "mobilenetv2-12.onnx"
BOARDS = {  # name: (CPU, kernel, governor, slowdown against the Pi 5)
    "rpi5-desk": ("Cortex-A76", "6.12.25+rpt-rpi-2712", "performance", 1.0),
    "rpi4-shelf": ("Cortex-A72", "6.12.25+rpt-rpi-v8", "ondemand", 2.4),
}
RELEASES = {  # variant: (release id, route, speed against stock)
    "stock": ("stock-1.32.0-3f9c2a1b", "official", 1.0),
    "tuned": ("tuned-1.32.0-8d41e0c7", "system", 0.83),
}
QUANTS = {"fp32": 1.0, "int8-static": 0.55}
ROUNDS = 5
FAILED = {"jetson-nano": "jetson-nano: ssh: connect to host 192.168.1.37 port 22: No route to host"}


# --------------------------------------------------------------------------------- the run


def _measured(agent: dict[str, Any], scale: float, rng: np.random.Generator) -> dict[str, Any]:
    """The real agent document with its latencies scaled (and jittered) as a board would give them."""
    document = copy.deepcopy(agent)
    latencies = [float(v) * scale * rng.lognormal(0.0, 0.04) for v in agent["timing"]["latencies_ms"]]
    document["timing"]["latencies_ms"] = latencies
    ordered = np.sort(latencies)
    document["stats"].update(
        n=len(latencies),
        p50_ms=float(np.percentile(ordered, 50)),
        p90_ms=float(np.percentile(ordered, 90)),
        p99_ms=float(np.percentile(ordered, 99)),
        mean_ms=float(ordered.mean()),
        std_ms=float(ordered.std()),
        throughput_ips=1000.0 / float(ordered.mean()),
    )
    return document


def _as_board(agent: dict[str, Any], name: str) -> dict[str, Any]:
    """The agent document as if measured on ``name``: its CPU, kernel, governor and temperatures."""
    cpu, kernel, governor, _ = BOARDS[name]
    document = copy.deepcopy(agent)
    board = document["board"]
    cores = {f"cpu{i}": {"governor": governor, "cur_khz": 2400000, "min_khz": 1500000,
                         "max_khz": 2400000, "hw_max_khz": 2400000} for i in range(4)}  # fmt: skip
    board["before"].update(
        hostname=name, kernel=kernel, machine="aarch64", cpu_model=cpu, online_cpus=[0, 1, 2, 3],
        online_cores=4, usable_cores=4, cpufreq=cores, thermal=[{"zone": "cpu-thermal", "temp_c": 47.2}],
    )  # fmt: skip
    board["after"].update(cpufreq=cores, thermal=[{"zone": "cpu-thermal", "temp_c": 58.9}])
    return document


def _quantised(release: str) -> dict[str, Any]:
    """What `--quantize static` stores per release and model: how the int8 model was made, and how
    well it agrees with fp32 on the board."""
    output = {"name": "output", "shape": [1, 1000], "max_abs_diff": 0.41, "mean_abs_diff": 0.052,
              "max_abs_fp32": 14.7, "classifier": True, "top1_agreement": 0.9375, "top1_rows": 16}  # fmt: skip
    return {
        "int8_file": f"mobilenetv2-12.int8-static.{release[-8:]}.onnx",
        "mode": "static",
        "calibration": {"source": "user", "files": {"input": "cal.npy"}, "id": "9c1e", "samples": 16},
        "ops": {"QuantizeLinear": 53, "DequantizeLinear": 105, "int8 initializers": 52},
        "agreement": {"samples": 16, "outputs": [output]},
        "warnings": [],
    }


def _verify(directory: Path, run_id: str) -> None:
    """A stored `orch verify` result for both boards (the report's conformance section)."""
    boards = {}
    for name in BOARDS:
        builds = []
        for variant, (release, _, _) in RELEASES.items():
            regressions = [{"case": "test_resize_downsample_scales_cubic"}] if variant == "tuned" else []
            builds.append(
                {
                    "release": release,
                    "ort_version": "1.32.0",
                    "cases": 1374,
                    "counts": {"pass": 1291, "fail": 12 + len(regressions), "unsupported": 70},
                    "reference_counts": {"pass": 1292, "fail": 12, "unsupported": 70},
                    "regressions": regressions,
                    "gaps": [],
                }
            )
        boards[name] = {"status": "ok", "builds": builds}
    document = {"schema": "orch-verify/1", "run_id": run_id, "onnx": "1.19.1", "boards": boards}
    (directory / f"verify-{run_id}.json").write_text(json.dumps(document))


def stored_run(root: Path) -> RunRecord:
    """`orch bench --variant stock,tuned --quantize static --rounds 5` on two boards, one more failed."""
    agent = agent_doc(conv_model(root / MODEL), "all")
    rng = np.random.default_rng(20261201)
    store = ResultStore(root / "results")
    run_id = results.new_run_id()
    command = (
        f"orch bench --variant stock,tuned --model {MODEL} --quantize static "
        f"--calibration input=cal.npy --rounds {ROUNDS} --pin-clocks"
    )
    store.begin_run(run_id, command=command)
    for name, (_, _, _, slowdown) in BOARDS.items():
        on_board = _as_board(agent, name)
        measurements = []
        for round_ in range(1, ROUNDS + 1):
            for variant, (release, _, speed) in RELEASES.items():
                for quant, quant_speed in QUANTS.items():
                    key = {"variant": variant, "release": release, "model": MODEL, "quant": quant, "ep": "cpu",
                           "opt_level": "all", "intra_threads": 0, "inter_threads": 0}  # fmt: skip
                    # ~0.1 ms on this machine's tiny model: about what a Pi 5 takes for a small CNN x 40
                    scale = 40 * slowdown * speed * quant_speed
                    agent_run = _measured(on_board, scale, rng)
                    measurements.append(
                        {"key": key, "round": round_, "step": len(measurements), "agent": agent_run}
                    )
        document = {
            "schema": results.BOARD_SCHEMA,
            "run_id": run_id,
            "board": name,
            "status": "ok",
            "error": None,
            "releases": [
                {"id": release, "variant": variant, "ort_version": "1.32.0", "route": route}
                for variant, (release, route, _) in RELEASES.items()
            ],
            "quantization": {release: {MODEL: _quantised(release)} for release, _, _ in RELEASES.values()},
            "measurements": measurements,
            "clocks": {"requested": True, "pinned": True, "restored": True, "messages": []},
        }
        store.write_board(run_id, document)
    for name, error in FAILED.items():
        store.write_board(
            run_id,
            {"schema": results.BOARD_SCHEMA, "run_id": run_id, "board": name, "status": "failed",
             "error": error, "measurements": []},
        )  # fmt: skip
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "command": command,
            "boards": {
                **{name: {"status": "ok"} for name in BOARDS},
                **{name: {"status": "failed"} for name in FAILED},
            },
        },
    )
    _verify(store.root, results.new_run_id())
    return store.load(run_id)


# ------------------------------------------------------------------------- the browser


def chromium_binary() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail(
            "the report's browser test needs Debian's chromium: apt-get install chromium"
            " (scripts/setup installs it)",
            pytrace=False,
        )
    return found


class DevTools:
    """One headless chromium driven over the DevTools protocol on a pipe."""

    def __init__(self, binary: str, profile: Path, log: Path) -> None:
        commands_read, commands_write = os.pipe()
        answers_read, answers_write = os.pipe()
        # The browser's ends go on fds >= 10 first, so placing them on 3 and 4 never overwrites one
        # with the other; bash does the placing (dash takes no fd number above 9).
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_read, answers_write)]
        os.close(commands_read)
        os.close(answers_write)
        place = f'exec "$@" 3<&{ends[0]} 4>&{ends[1]} {ends[0]}<&- {ends[1]}>&-'
        self.log = log
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                ["bash", "-c", place, "chromium", binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"],
                pass_fds=ends,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
            )
        for fd in ends:
            os.close(fd)
        self._commands, self._answers = commands_write, answers_read
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = memoryview(json.dumps(message).encode() + b"\0")
        while data:
            data = data[os.write(self._commands, data) :]
        answer = self._read_until(lambda m: m.get("id") == ident, f"the answer to {method}")
        if "error" in answer:
            pytest.fail(f"chromium refused {method} {params}: {answer['error']}", pytrace=False)
        result: dict[str, Any] = answer["result"]
        return result

    def wait_for(self, event: str, since: int) -> dict[str, Any]:
        """The first ``event`` after the first ``since`` events (``len(events)`` before the command)."""
        for seen in self.events[since:]:
            if seen["method"] == event:
                return seen
        return self._read_until(lambda m: m.get("method") == event, event)

    def _read_until(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._answers], [], [], max(left, 0))
            chunk = os.read(self._answers, 1 << 20) if ready else b""
            if not chunk:
                why = "closed the pipe" if ready else f"sent nothing for {TIMEOUT_S:.0f} s"
                pytest.fail(f"chromium {why} waiting for {what}; its log:\n{self._log_tail()}", pytrace=False)
            self._buffer += chunk

    def _log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def close(self) -> None:
        with suppress(OSError):
            os.write(self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        os.close(self._commands)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._answers)


@contextmanager
def browser(root: Path) -> Iterator[DevTools]:
    binary = chromium_binary()
    profile = root / "profile"
    profile.mkdir()
    devtools = DevTools(binary, profile, root / "chromium.log")
    try:
        yield devtools
    finally:
        devtools.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def served(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 (a free port) for as long as the block runs."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# What the reader sees, measured in the page: the plots, the page's size, the tables, every element
# or text that reaches outside the window (named by the section heading above it), and the links.
LAYOUT = """(() => {
  const usable = document.documentElement.clientWidth;  // the window less its scroll bar
  const box = e => e.getBoundingClientRect();
  const texts = () => {  // every text node as a range (boxes of its own) with its parent element
    const found = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      found.push(Object.assign(range, {parent: node.parentElement, textContent: node.textContent}));
    }
    return found;
  };
  const section = e => {
    for (let n = e; n && n !== document.body; n = n.parentElement) {
      for (let p = n.previousElementSibling; p; p = p.previousElementSibling) {
        if (/^H[1-6]$/.test(p.tagName)) return p.textContent;
      }
    }
    return "(top of the page)";
  };
  return {
    width: window.innerWidth,
    height: window.innerHeight,
    client_width: usable,
    page_width: document.documentElement.scrollWidth,
    page_height: document.documentElement.scrollHeight,
    images: [...document.images].map(i => ({
      src: i.getAttribute("src"), complete: i.complete,
      natural: [i.naturalWidth, i.naturalHeight], shown: [box(i).width, box(i).height]})),
    tables: [...document.querySelectorAll("table")].map(t => ({
      section: section(t), rows: t.rows.length, left: Math.round(box(t).left),
      right: Math.round(box(t).right)})),
    // Elements, and text that runs out of its element's box (a long word in a list item).
    outside: [...document.body.querySelectorAll("*"), ...texts()].map(e => [e, box(e)])
      .filter(([, b]) => b.width > 0 && (b.left < -0.5 || b.right > usable + 0.5)).map(([e, b]) => ({
        tag: e.parent ? `text in <${e.parent.tagName.toLowerCase()}>` : e.tagName.toLowerCase(),
        section: section(e.parent || e), left: Math.round(b.left), right: Math.round(b.right),
        text: (e.textContent || (e.outerHTML || "")).slice(0, 80)})),
    links: [...document.links].map(a => a.getAttribute("href")),
  };
})()"""

FETCH_LINKS = """Promise.all([...document.links].map(a =>
  fetch(a.href).then(r => r.text().then(body => [a.getAttribute("href"), r.status, body.length]))))"""


def evaluate(devtools: DevTools, session: str, expression: str) -> Any:
    answer = devtools.call(
        "Runtime.evaluate", session, expression=expression, returnByValue=True, awaitPromise=True
    )
    if "exceptionDetails" in answer:
        pytest.fail(f"the page's script failed: {answer['exceptionDetails']}", pytrace=False)
    return answer["result"]["value"]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# --------------------------------------------------------------------------------- the test


def test_the_report_in_a_headless_browser_loads_every_plot_and_fits_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chromium_binary()  # before the run is made: a missing browser fails at once
    monkeypatch.setenv("ORCH_RESULTS", str(tmp_path / "results"))  # where the report finds verify results
    record = stored_run(tmp_path)
    page = tmp_path / "report" / "report.html"
    written = write_html(record, pairings_within(record.series()), page)
    html_text = written["html"].read_text()
    for heading in ("Failed boards", "Comparisons", "fp32 vs int8", "Conformance", "Latency over the run"):
        assert heading in html_text, f"the run should give the report's {heading!r} section"
    visit = visited(page, tmp_path)
    check_screenshots(visit, tmp_path)
    check_plots(visit.layout)
    check_fits_the_window(visit.layout)
    check_requests(visit)


@dataclass(frozen=True)
class Visit:
    """What the browser saw of the report: its layout, what it fetched, its screenshots."""

    base: str  # the served folder's URL
    layout: dict[str, Any]
    fetched: list[Any]  # every data link: (href, status, size)
    loading: list[dict[str, Any]]  # the page's own events up to its load event
    shot: bytes  # the window
    full: bytes  # the whole page


def visited(page: Path, tmp_path: Path) -> Visit:
    width, height = WINDOW
    with served(page.parent) as base, browser(tmp_path) as devtools:
        target = devtools.call("Target.createTarget", url="about:blank")["targetId"]
        session = devtools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        devtools.call("Page.enable", session)
        devtools.call("Network.enable", session)
        devtools.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        url, before = f"{base}{page.name}", len(devtools.events)
        navigated = devtools.call("Page.navigate", session, url=url)
        assert "errorText" not in navigated, f"chromium could not open {url}: {navigated}"
        devtools.wait_for("Page.loadEventFired", since=before)  # the load event waits for every image
        loading = devtools.events[before:]  # what the page itself asked for, up to its load event
        layout = evaluate(devtools, session, LAYOUT)
        fetched = evaluate(devtools, session, FETCH_LINKS)
        shot = base64.b64decode(devtools.call("Page.captureScreenshot", session, format="png")["data"])
        whole = {"x": 0, "y": 0, "width": width, "height": layout["page_height"], "scale": 1}
        full = devtools.call(
            "Page.captureScreenshot", session, format="png", captureBeyondViewport=True, clip=whole
        )
    return Visit(
        base=base,
        layout=layout,
        fetched=fetched,
        loading=loading,
        shot=shot,
        full=base64.b64decode(full["data"]),
    )


def check_screenshots(visit: Visit, tmp_path: Path) -> None:
    """The artifacts: the window as a reader first sees it, and the whole page."""
    width, height = WINDOW
    layout, shot = visit.layout, visit.shot
    screenshot = tmp_path / f"report-{width}x{height}.png"
    screenshot.write_bytes(shot)
    full_page = tmp_path / f"report-{width}-whole-page.png"
    full_page.write_bytes(visit.full)
    print(f"screenshots of the report: {screenshot} (the window), {full_page} (the whole page)")
    assert (layout["width"], layout["height"]) == WINDOW, layout
    assert png_size(shot) == WINDOW and len(shot) > 50_000, (
        f"{screenshot}: {png_size(shot)}, {len(shot)} bytes"
    )
    assert png_size(full_page.read_bytes()) == (width, layout["page_height"])


def check_plots(layout: dict[str, Any]) -> None:
    """Every plot loaded, at the size it was drawn, and is shown in its own proportions."""
    images = layout["images"]
    broken = [i["src"] for i in images if not (i["complete"] and i["natural"][0] > 0)]
    assert not broken, f"images that did not load in the browser: {broken}"
    assert [i["src"] for i in images] == [
        f"report_files/{name}" for name in ("latency_distribution.png", "p50_ci.png", "latency_over_runs.png")
    ], images
    for image in images:
        assert tuple(image["natural"]) == plots.PLOT_PIXELS, image
        shown_width, shown_height = image["shown"]
        drawn = plots.PLOT_PIXELS[0] / plots.PLOT_PIXELS[1]
        assert abs(shown_width / shown_height - drawn) < 0.01, f"{image['src']} is shown distorted: {image}"


def check_fits_the_window(layout: dict[str, Any]) -> None:
    """Nothing is wider than the window (less its scroll bar): no table, no cell, no plot, not the page."""
    usable = layout["client_width"]
    assert len(layout["tables"]) == 5, layout["tables"]
    for table in layout["tables"]:
        assert table["left"] >= 0 and table["right"] <= usable, (
            f"the table under {table['section']!r} spans {table['left']}..{table['right']} px,"
            f" the window shows 0..{usable} px"
        )
    too_wide = "\n".join(
        f"  <{e['tag']}> under {e['section']!r} spans {e['left']}..{e['right']} px: {e['text']!r}"
        for e in layout["outside"]
    )
    assert not too_wide, f"parts of the report reach outside the window's 0..{usable} px:\n{too_wide}"
    assert layout["page_width"] <= usable, f"the page scrolls sideways: {layout['page_width']} px wide"


def check_requests(visit: Visit) -> None:
    """Everything the page asked for came from the report's own folder, and came: the page and its
    three plots (the browser may ask for /favicon.ico by itself; the report names no icon); and every
    data link answers with its file."""
    base, loading, fetched = visit.base, visit.loading, visit.fetched
    icon = f"{base}favicon.ico"
    sent = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in loading
            if e["method"] == "Network.requestWillBeSent"}  # fmt: skip
    outside = sorted(u for u in sent.values() if not u.startswith(base))
    assert not outside, f"the report fetches from outside its folder: {outside}"
    failed = [(sent.get(e["params"]["requestId"]), e["params"].get("errorText"))
              for e in loading if e["method"] == "Network.loadingFailed"]  # fmt: skip
    assert not failed, f"requests of the page that failed: {failed}"
    answers = {e["params"]["response"]["url"]: e["params"]["response"]["status"] for e in loading
               if e["method"] == "Network.responseReceived" and e["params"]["response"]["url"] != icon}  # fmt: skip
    assert set(answers) == set(sent.values()) - {icon} and len(answers) == 4, (
        f"asked {sent}, answered {answers}"
    )
    assert all(status == 200 for status in answers.values()), answers
    assert [href for href, _, _ in fetched] == visit.layout["links"] and len(fetched) == 3, fetched
    assert all(status == 200 and size > 0 for _, status, size in fetched), fetched
