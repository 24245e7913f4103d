"""The pages a design can load: the repository's corpus (pages/, each graph with where it came from) by name, or a
file of the user's: a HAR recording, an Epload graph or a fecbench-page-1 graph.

    [workload]
    kind = "page"
    page = "corpus:nghttp2.org"        # pages/nghttp2.org.json
    page = "recordings/my-site.har"    # relative to the design file (then the current folder, the checkout)
    page = "graphs/58.com.json"        # an Epload graph; its objects' sizes from `page_objects` (a folder)
"""

from __future__ import annotations

import json
from pathlib import Path

from fecbench.host.paths import REPO_ROOT
from fecbench.pages import epload, har
from fecbench.pages.graph import PageError, PageGraph, parse

CORPUS_DIR = REPO_ROOT / "pages"
PREFIX = "corpus:"


def names() -> list[str]:
    """The corpus's pages."""
    return sorted(p.stem for p in CORPUS_DIR.glob("*.json"))


def load(path: Path, objects: Path | None = None) -> PageGraph:
    """The page graph a file holds, whichever of the three formats it is; PageError saying why not."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PageError(f"{path}: not a JSON file ({exc})") from None
    if har.is_har(data):
        return har.convert(data, path.stem, source=f"HAR {path.name}")
    if epload.is_epload(data):
        return epload.convert(data, str(data.get("name") or path.stem), objects, source=f"Epload graph {path.name}")
    return parse(data, str(path))


def resolve(value: str, where: Path, objects: Path | None = None) -> tuple[PageGraph, Path | None]:
    """A design's `page` value as its graph and the file it came from (None: the corpus's own file is it)."""
    if value.startswith(PREFIX):
        name = value.removeprefix(PREFIX)
        if name not in names():
            raise PageError(f"no page {name!r} in the corpus ({CORPUS_DIR}): one of {', '.join(names())}")
        return parse(json.loads((CORPUS_DIR / f"{name}.json").read_text()), value), None
    if not where.is_file():
        raise PageError(f"page file {where} not found (or name a page of the corpus: corpus:NAME)")
    return load(where, objects), where
