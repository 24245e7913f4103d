"""Page graphs (fecbench.pages): the critical path's arithmetic against hand-computed schedules, the graph's
checks, the HAR and Epload conversions (a recording converted and replayed with its own object times starts every
object when the recording did), the corpus and its README, and the page workload in a design."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fecbench.inputs.errors import UserError
from fecbench.pages import corpus, epload, har
from fecbench.pages.graph import FORMAT, PageError, parse
from fecbench.runners.experiment.checks import min_duration_s
from fecbench.runners.experiment.design import parse_design
from tests.helpers.designs import QUIC_AND_RS, design_file

#: Three objects (sizes known): the root HTML (its first byte at 60 ms, all of it at 100 ms), parsed for 50 ms
#: from its first byte; a script the parser asks for 30 ms into its parse (i.e. started + 30 ms), evaluated for
#: 200 ms; an image requested when the script has run.
THREE = {"format": FORMAT, "name": "three", "load": "img_d",
         "activities": [{"id": "html_d", "kind": "download", "request": 300, "response": 20000},
                        {"id": "html_c", "kind": "compute", "ms": 50},
                        {"id": "js_d", "kind": "download", "request": 300, "response": 10000},
                        {"id": "js_c", "kind": "compute", "ms": 200},
                        {"id": "img_d", "kind": "download", "request": 300, "response": 40000}],
         "deps": [{"after": "html_d", "then": "html_c", "on": "first_byte"},
                  {"after": "html_c", "then": "js_d", "on": "start", "ms": 30},
                  {"after": "js_d", "then": "js_c"},
                  {"after": "js_c", "then": "img_d"}]}


def test_the_critical_path_by_hand() -> None:
    graph = parse(THREE)
    fetch = {"html_d": (60.0, 100.0), "js_d": (40.0, 70.0), "img_d": (40.0, 120.0)}
    times = graph.schedule(lambda a: fetch[a.id])
    # html: 0 → 60 (first byte) → 100; its parse 60 → 110; the script asked at 90, in by 160, run 160 → 360;
    # the image 360 → 480: the page loads at 480 ms (not the 100 + 70 + 120 + 250 of its parts one after another).
    assert {k: (t.start, t.end) for k, t in times.items()} == {
        "html_d": (0, 100), "html_c": (60, 110), "js_d": (90, 160), "js_c": (160, 360), "img_d": (360, 480)}
    assert graph.load_ms(times) == 480 and graph.app_bytes() == 900 + 70000
    # The least a 10 Mbit/s, 40 ms RTT network allows: each download 1 RTT plus its bytes at 1.25 bytes/µs: the
    # HTML's first byte at 40, the script asked 30 ms into its parse, in 1 RTT and 10,300 bytes later, run; the image.
    least = graph.modelled_load_ms(40.0, 1250.0)
    assert least == pytest.approx(40 + 30 + (40 + 10300 / 1250) + 200 + (40 + 40300 / 1250), abs=1e-9)
    assert min_duration_s("page", None, 40.0, 10.0, page=graph) == pytest.approx(0.08 + least / 1000)


@pytest.mark.parametrize(("change", "says"), [
    ({"format": "epload"}, "not a fecbench-page-1 graph"),
    ({"activities": []}, "\"activities\" must be a non-empty list"),
    ({"deps": [{"after": "html_d", "then": "nowhere"}]}, "'nowhere', which is no activity"),
    ({"deps": [{"after": "html_c", "then": "js_d", "on": "first_byte"}]}, "waits for the first byte of 'html_c'"),
    ({"activities": [{"id": "a", "kind": "compute", "ms": 1}], "deps": [{"after": "a", "then": "a"}], "load": None},
     "every activity waits for another"),
    ({"deps": [{"after": "js_d", "then": "js_c"}, {"after": "js_c", "then": "js_d"}]}, "a cycle of dependencies"),
    ({"load": "onload"}, "the load activity 'onload' is no activity"),
    ({"colour": 1}, "unknown key(s) ['colour']"),
    ({"deps": [{"after": "html_d", "then": "html_c", "on": "middle"}]}, "\"on\" must be one of"),
    ({"deps": [{"after": "html_d", "then": "html_c", "ms": -1}]}, "\"ms\" must be a number >= 0"),
    ({"deps": [{"after": "html_d", "then": "html_c", "ms": 1e9}]}, "\"ms\" 1e+09 is more than a day"),
])
def test_a_graph_that_cannot_load_says_why(change: dict, says: str) -> None:
    with pytest.raises(PageError, match=re.escape(says)):
        parse({**THREE, **change})
    twice = {**THREE, "activities": THREE["activities"] + [{"id": "js_c", "kind": "compute", "ms": 1}]}
    with pytest.raises(PageError, match="activity id 'js_c' twice"):
        parse(twice)


def test_a_graph_survives_its_file() -> None:
    graph = parse(THREE)
    again = parse(json.loads(graph.to_json()))
    assert again == graph and again.digest() == graph.digest()
    assert parse({**THREE, "name": "other"}).digest() == graph.digest()   # what a load does, not its name


def _entry(url: str, start_ms: float, wait_ms: float, time_ms: float, size: int, **more: object) -> dict:
    start = f"2026-01-01T00:00:{start_ms / 1000:06.3f}Z"
    return {"startedDateTime": start, "time": time_ms, "pageref": "p1",
            "request": {"method": "GET", "url": url, "headersSize": 250, "bodySize": 0},
            "response": {"status": 200, "bodySize": size, "headersSize": 150, "content": {"size": size}},
            "timings": {"blocked": 0, "dns": -1, "connect": -1, "send": 1, "wait": wait_ms - 1,
                        "receive": time_ms - wait_ms}, **more}


def test_a_har_replayed_with_its_own_times_starts_every_object_when_the_browser_did() -> None:
    entries = [_entry("https://example.org/", 0, 80, 200, 30000),
               # requested while the HTML arrived (its first byte at 80 ms), named by Chrome's initiator
               _entry("https://example.org/app.js", 120, 40, 90, 12000,
                      _initiator={"type": "parser", "url": "https://example.org/"}),
               # after the script arrived (210) and 35 ms of the browser's work
               _entry("https://cdn.example.org/img.png", 245, 30, 60, 50000),
               # a string initiator (browsertime), requested 5 ms after the HTML's request went out
               _entry("https://example.org/style.css", 5, 60, 70, 4000, _initiator="https://example.org/"),
               _entry("data:image/png;base64,xyz", 130, 0, 0, 10),
               {**_entry("https://example.org/next", 400, 10, 20, 100), "pageref": "p2"}]
    data = {"log": {"version": "1.2", "pages": [{"id": "p1"}, {"id": "p2"}], "entries": entries}}
    graph = har.convert(data, "example")
    downloads = [a for a in graph.activities if a.kind == "download"]
    assert [a.id for a in downloads] == ["d0 example.org/", "d1 example.org/style.css", "d2 example.org/app.js",
                                         "d3 cdn.example.org/img.png"]
    assert [a.response for a in downloads] == [30150, 4150, 12150, 50150] and downloads[0].request == 250
    recorded = {a.id: e for a, e in zip(downloads, sorted(entries[:4], key=lambda e: e["startedDateTime"]),
                                        strict=True)}
    times = graph.schedule(lambda a: (recorded[a.id]["timings"]["send"] + recorded[a.id]["timings"]["wait"],
                                      recorded[a.id]["time"]))
    starts = {a: round(times[a].start, 6) for a in recorded}
    assert starts == {"d0 example.org/": 0, "d1 example.org/style.css": 5, "d2 example.org/app.js": 120,
                      "d3 cdn.example.org/img.png": 245}
    assert [a.ms for a in graph.activities if a.kind == "compute"] == [35.0]   # the gap before the image
    assert graph.load_ms(times) == 305


def test_a_har_without_entries_is_refused() -> None:
    with pytest.raises(PageError, match="no complete HTTP"):
        har.convert({"log": {"entries": [_entry("data:x", 0, 0, 0, 1)]}}, "empty")


def test_an_epload_graph_with_its_objects_sizes(tmp_path: Path) -> None:
    graph = {"name": "two", "start_activity": "a_d", "load_activity": "b_c1",
             "objs": [{"id": "a", "host": "h", "path": "/a.html", "when_comp_start": 1, "download": {"id": "a_d"},
                       "comps": [{"id": "a_c1", "time": 100}, {"id": "a_c2", "time": 20}]},
                      {"id": "b", "host": "h", "path": "/b.js", "when_comp_start": -1, "download": {"id": "b_d"},
                       "comps": [{"id": "b_c1", "time": 300}]}],
             "deps": [{"id": "x", "a1": "a_c1", "a2": "b_d", "time": 40}, {"id": "y", "a1": "b_c1", "a2": "a_c2",
                                                                             "time": -1}]}
    with pytest.raises(PageError, match="no size"):
        epload.convert(graph, "two")
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "a.html").write_bytes(b"x" * 5000)
    (tmp_path / "h" / "b.js").write_bytes(b"x" * 700)
    page = epload.convert(graph, "two", tmp_path)
    assert [(a.id, a.response) for a in page.downloads] == [("a_d", 5000), ("b_d", 700)]
    deps = {(d.after, d.then): (d.on, d.ms) for d in page.deps}
    assert deps == {("a_d", "a_c1"): ("first_byte", 0), ("a_c1", "a_c2"): ("end", 0), ("b_d", "b_c1"): ("end", 0),
                    ("a_c1", "b_d"): ("start", 40), ("b_c1", "a_c2"): ("end", 0)}
    times = page.schedule(lambda a: (10.0, 50.0))
    # a: 0 → 10 → 50; a_c1 10 → 110; b asked at 50, in by 100; b_c1 100 → 400; a_c2 waits for both: 400 → 420.
    assert times["a_c2"].start == 400 and page.load_ms(times) == 400   # the graph's load activity: b_c1
    sized = {**graph, "objs": [{**o, "size": 1234} for o in graph["objs"]]}
    assert [a.response for a in epload.convert(sized, "two").downloads] == [1234, 1234]


def test_the_corpus_and_its_readme() -> None:
    names = corpus.names()
    assert len(names) >= 3
    readme = (corpus.CORPUS_DIR / "README.md").read_text()
    for name in names:
        graph, path = corpus.resolve(f"corpus:{name}", Path("unused"))
        assert path is None and "PerfCascade" in graph.source and graph.downloads
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2:] == [str(len(graph.downloads)), str(len(graph.activities) - len(graph.downloads)),
                             f"{graph.app_bytes():,}"], row
    with pytest.raises(PageError, match="no page 'nowhere' in the corpus"):
        corpus.resolve("corpus:nowhere", Path("unused"))


def test_a_page_design(tmp_path: Path) -> None:
    design = design_file(tmp_path / "p.toml", "p", seed=1, impls=QUIC_AND_RS,
                         workload={"kind": "page", "page": "corpus:nghttp2.org"})
    workload = parse_design(design).workload
    graph, _ = corpus.resolve("corpus:nghttp2.org", Path("unused"))
    assert workload.sizes == [graph.app_bytes()] and workload.page_graph == graph
    assert workload.params() == {"kind": "page", "page": "corpus:nghttp2.org", "page_sha256": graph.digest()}
    assert workload.page_file(tmp_path) == str(tmp_path / "page.json")
    (tmp_path / "mine.json").write_text(json.dumps(THREE))
    mine = design_file(tmp_path / "q.toml", "q", seed=1, impls=QUIC_AND_RS,
                       workload={"kind": "page", "page": "mine.json"})
    assert parse_design(mine).workload.sizes == [70900]
    for workload, says in (({"kind": "page", "page": "missing.har"}, "page file .* not found"),
                           ({"kind": "page", "page": "corpus:nghttp2.org", "sizes": ["1kB"]}, "sizes"),
                           ({"kind": "page"}, "page")):
        bad = design_file(tmp_path / "bad.toml", "bad", seed=1, impls=QUIC_AND_RS, workload=workload)
        with pytest.raises(UserError, match=says):
            parse_design(bad)
