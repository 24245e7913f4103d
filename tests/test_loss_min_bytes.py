"""`[loss] min_bytes` (issue 68 item 2): frames shorter than it pass the dropper untouched and take no index, so
ACK-only and probe packets, whose number follows the timing, no longer shift which data packet the n-th verdict
hits (designs/README.md, "Twins"). A real campaign: the design's key reaches the kernel's dropper of every lossy
link and direction; a bad value is refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.campaign import FECQ, fecbench, rows
from tests.helpers.designs import design_file

FACTORS = {"bw": {"levels": [20], "unit": "Mbit/s"}, "owd": {"levels": [2], "unit": "ms"}, "p": {"levels": [0.1]}}


def _design(tmp_path: Path, min_bytes: int | None) -> Path:
    loss = 'model = "uniform"\np = "p"' + ("" if min_bytes is None else f"\nmin_bytes = {min_bytes}")
    return design_file(tmp_path / f"minbytes{min_bytes}.toml", seed=5, timeout_s=20, method="factorial",
                       factors=FACTORS, loss=loss, workload='kind = "download"\nsizes = ["50kB"]',
                       impls=[("fecq", "quic", {"fec": "none"})])


@pytest.mark.require_root
def test_frames_below_min_bytes_pass_every_dropper_without_an_index(tmp_path: Path) -> None:
    if not FECQ.exists():
        pytest.skip(f"{FECQ} is not built (make bootstrap)")
    stats = {}
    for min_bytes in (None, 9000):   # 9000: longer than any frame
        db = tmp_path / f"{min_bytes}.sqlite"
        out = fecbench("run", str(_design(tmp_path, min_bytes)), "--db", str(db))
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        stats[min_bytes] = rows(db, "SELECT direction, seen, matched, dropped FROM link_stats")
    assert any(r["dropped"] > 0 for r in stats[None]), stats
    assert stats[9000] and all(r["matched"] == 0 and r["dropped"] == 0 and r["seen"] > 0 for r in stats[9000]), stats


def test_a_min_bytes_that_is_no_frame_length_is_refused(tmp_path: Path) -> None:
    for bad in ("-1", "70000", '"200"'):
        design = _design(tmp_path, 0)
        design.write_text(design.read_text().replace("min_bytes = 0", f"min_bytes = {bad}"))
        out = fecbench("run", str(design), "--dry-run")
        assert out.returncode == 2 and "loss.min_bytes" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_compare_says_where_the_same_verdicts_fell_on_other_packets() -> None:
    import numpy as np

    from fecbench.cli.compare import KeyComparison, _moved_drop, _moved_text
    from fecbench.dropper.dropper import RECORD_DTYPE

    def log(lengths: list[int], drops: list[int]) -> np.ndarray:
        records = np.zeros(len(lengths), dtype=RECORD_DTYPE)
        records["index"] = np.arange(len(lengths))
        records["len"] = lengths
        records["verdict"][drops] = 1
        return records[["index", "verdict", "state", "len"]]

    run = [1294, 1294, 1294, 1294, 1294]
    twin = [1294, 1294, 62, 1294, 1294]       # an ACK-only packet more at index 2: every later packet shifted
    assert _moved_drop(log(run, [1]), log(twin, [1])) is None          # dropped before the shift: the same
    assert _moved_drop(log(run, [2, 4]), log(twin, [2, 4])) == (2, 1294, 62)
    text = _moved_text(KeyComparison(keys=(1, 1), common=1, logged=1, drops_moved=[("k", "reverse", 2, 1294, 62)]))
    assert "another packet at a dropped index in 1 of 1" in text and "index 2 of reverse" in text, text
    assert "the same lengths" in _moved_text(KeyComparison(keys=(1, 1), common=1, logged=1))
