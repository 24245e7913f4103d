"""Small results databases for the analysis tests, written through fecbench.records.db (the real schema).

The values are synthetic but shaped like a campaign's: a download design (quic vs two FEC labels,
four sizes, a few repetitions, common loss seeds) and a messages design (udp, reliable QUIC,
QUIC-FEC), with dropper counters and fidelity measurements. Tests compute their expectations from
what they put in, never from constants.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from fecbench.records import db as dbmod
from fecbench.records import run_records

FACTORS = {"bw": "REAL", "owd": "REAL", "p": "REAL", "r": "REAL", "k": "REAL", "h": "REAL"}
DOWNLOAD_LABELS = {"quic": "none", "quic-fec-rs": "rs:30,20", "quic-fec-rlc": "rlc:3,2,20"}
MESSAGE_LABELS = {"udp": "udp", "quic": "reliable", "quic-fec-rs": "rs:30,20"}
SIZES = [1_000, 10_000, 50_000, 1_000_000]


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _points(rng: np.random.Generator, n: int) -> list[dict]:
    return [{"point": i, "bw": float(rng.uniform(0.3, 10)), "owd": float(rng.uniform(10, 100)),
             "p": float(rng.uniform(0.01, 0.08)), "r": float(rng.uniform(0.08, 0.5)),
             "k": float(rng.uniform(0.98, 1.0)), "h": float(rng.uniform(0.0, 0.1))} for i in range(n)]


def _new_campaign(conn, name: str, points: list[dict], repetitions: int, design_text: str = "# test") -> int:
    with dbmod.transaction(conn):
        cid = dbmod.insert_campaign(conn, name=name, design_path=f"designs/{name}.toml",
                                    design_text=design_text, design_hash=_key(name), fecbench_version="test",
                                    git_sha="test", created_at="2026-01-01T00:00:00Z",
                                    host_json={"kernel": "test"}, impls_json={}, plan_json={},
                                    seed=7, repetitions=repetitions, topology="single",
                                    link_backend="netem")
        dbmod.ensure_factor_columns(conn, FACTORS)
        dbmod.insert_points(conn, cid, points)
    return cid


def _record(conn, cid: int, point: dict, label: str, impl_arg: str, workload: str, size: int | None,
            rep: int, status: str, metrics: dict | None, fidelity_ok: bool = True) -> str:
    key = _key(cid, point["point"], label, workload, size, rep)
    with dbmod.transaction(conn):
        run_records.insert_pending_runs(conn, [{
            "key": key, "campaign_id": cid, "point": point["point"], "impl": "fecq", "label": label,
            "impl_args": json.dumps({"fec": impl_arg}), "workload": workload, "size": size,
            "repetition": rep, "loss_seed": 1000 * point["point"] + rep,
            "applied_json": json.dumps(applied(point, label, impl_arg, workload, size, rep))}])
    run_records.start_run(conn, key, "2026-01-01T00:00:00Z", "netem", "test")
    sent = int((metrics or {}).get("packets_sent", 100))
    seen = sent + 10
    params = {"p": point["p"], "r": point["r"], "k": point["k"], "h": point["h"]}
    dropped = int(round(seen * _ge_loss(point)))
    rtt = 2 * point["owd"]
    run_records.finish_run(
        conn, key, status=status, error=None if status == "ok" else f"{status} in test",
        server_log_tail="", client_log_tail="", finished_at="2026-01-01T00:00:01Z", duration_s=1.2,
        metrics=metrics, client_wall_ms=None if metrics is None else metrics.get("dct_ms", 0) + 40,
        link_stats=[{"link": "bottleneck", "direction": "forward", "seen": seen, "matched": seen,
                     "dropped": dropped, "model": {"model": "gilbert-elliott", "params": params,
                                                     "seed": point["point"], "stream": 0}},
                    {"link": "bottleneck", "direction": "reverse", "seen": 20, "matched": 20,
                     "dropped": 0, "model": {"model": "none", "dropper": {}}}],
        fidelity=[{"path": 0, "rtt_configured_ms": rtt, "rtt_measured_ms": rtt * 1.02 + 0.1,
                   "rate_configured_mbit": point["bw"], "rate_measured_mbit": point["bw"] * 0.97,
                   "ok": fidelity_ok}])
    return key


def applied(point: dict, label: str, impl_arg: str, workload: str, size: int | None, rep: int) -> dict:
    """What the runner records as a run's settings (runs.applied_json, fecbench.runners.experiment.applied): the
    network of the point, the workload, the implementation."""
    values = {k: v for k, v in point.items() if k != "point"}
    link = {"rate_mbit": point["bw"], "owd_ms": point["owd"], "queue": 100, "queue_unit": "packets"}
    return {"point": point["point"], "values": values, "links": {"bottleneck": {"forward": link, "reverse": link}},
            "loss": {"model": "gilbert-elliott", "directions": ["forward"],
                     "links": {"bottleneck": {"params": {k: point[k] for k in "prkh"},
                                              "long_run_loss": _ge_loss(point), "mean_burst": None}}},
            "workload": {"kind": workload, "size": size}, "impl": {"name": "fecq", "label": label,
                                                                  "args": {"fec": impl_arg}},
            "timeout_s": 10.0, "loss_seed": 1000 * point["point"] + rep}


def _ge_loss(point: dict) -> float:
    bad = point["p"] / (point["p"] + point["r"])
    return (1 - bad) * (1 - point["k"]) + bad * (1 - point["h"])


def make_download_db(path: Path, *, points: int = 6, repetitions: int = 3, seed: int = 1,
                     failures: int = 2) -> Path:
    """A download campaign: DCT grows with size/bandwidth and RTT, FEC adds overhead and saves losses."""
    rng = np.random.default_rng(seed)
    conn = dbmod.connect(path)
    pts = _points(rng, points)
    cid = _new_campaign(conn, "test-download", pts, repetitions)
    failed = 0
    for pt in pts:
        rtt = 2 * pt["owd"]
        for rep in range(repetitions):
            losses = rng.poisson(3)  # same loss pattern (seed) for every label: common random numbers
            for size in SIZES:
                for label, fec in DOWNLOAD_LABELS.items():
                    overhead = 1.0 if fec == "none" else 1.5
                    transfer = size * 8 / (pt["bw"] * 1e3) * overhead
                    penalty = 0.0 if fec != "none" else losses * rtt * min(1.0, size / 50_000)
                    dct = 2 * rtt + transfer + penalty + rng.uniform(0, 5)
                    status = "ok"
                    if label == "quic-fec-rlc" and failed < failures:
                        status, failed = ("failed" if failed % 2 == 0 else "timeout"), failed + 1
                    metrics = None if status != "ok" else {
                        "dct_ms": dct, "handshake_ms": rtt, "bytes_app": size,
                        "packets_sent": size // 1200 + 5, "lost": int(losses), "recovered": 0,
                        "rtt_ms": rtt}
                    _record(conn, cid, pt, label, fec, "download", size, rep, status, metrics)
    conn.close()
    return path


def make_messages_db(path: Path, *, points: int = 5, repetitions: int = 2, seed: int = 2) -> Path:
    """A real-time messages campaign: UDP loses data, reliable QUIC re-buffers, FEC recovers most."""
    rng = np.random.default_rng(seed)
    conn = dbmod.connect(path)
    pts = _points(rng, points)
    cid = _new_campaign(conn, "test-messages", pts, repetitions)
    sent_bytes = 25 * 30 * 8 * 1000
    for pt in pts:
        for rep in range(repetitions):
            lost_msgs = int(rng.poisson(20))
            for label, mode in MESSAGE_LABELS.items():
                if mode == "udp":
                    received, late, corrupt = sent_bytes - lost_msgs * 4000, 0, lost_msgs
                elif mode == "reliable":
                    received, late, corrupt = sent_bytes, int(lost_msgs * (1 + pt["owd"] / 50)), 0
                else:
                    received, late, corrupt = sent_bytes - lost_msgs * 400, 0, lost_msgs // 4
                metrics = {"bytes_app": received, "rebuffering_ms": (late + corrupt) * 33.3,
                           "messages_late": late, "messages_corrupt": corrupt, "packets_sent": 6000}
                _record(conn, cid, pt, label, mode, "messages", None, rep, "ok", metrics)
    conn.close()
    return path


def make_table_db(path: Path, rows: list[tuple], *, timeout_s: float | None = 10.0, name: str = "hand") -> Path:
    """A download campaign from a hand-made table: one ``(point, label, size, rep, status, dct_ms)``
    per run (``dct_ms`` None for runs without metrics). The design file stored with the campaign
    sets ``timeout_s`` (none: the runner's default applies)."""
    conn = dbmod.connect(path)
    point_ids = sorted({row[0] for row in rows})
    pts = [{"point": i, "bw": 1.0 + i, "owd": 50.0, "p": 0.02, "r": 0.3, "k": 1.0, "h": 0.0} for i in point_ids]
    text = f'[design]\nname = "{name}"\n' + (f"timeout_s = {timeout_s}\n" if timeout_s is not None else "")
    cid = _new_campaign(conn, name, pts, max(row[3] for row in rows) + 1, design_text=text)
    by_id = {pt["point"]: pt for pt in pts}
    for point, label, size, rep, status, dct in rows:
        metrics = None if dct is None else {"dct_ms": float(dct), "packets_sent": 10}
        fec = "none" if label == "quic" else "rs:30,20"   # the same stack with and without FEC
        _record(conn, cid, by_id[point], label, fec, "download", size, rep, status, metrics)
    conn.close()
    return path


T = "timeout"
#: A hand-made download campaign with timeouts on either side (tests of fecbench.analysis.ratios, documented
#: in notebooks/README.md). (point, repetition) → (quic, fec): a DCT in ms, "timeout", another status, or None (no run).
#: The design's timeout_s is 10 s: a timeout is censored at 10 000 ms.
CENSORED_TABLE = {
    # point 0: one timeout on each side, fewer than half: both medians exact, ratio 150 / 300 = 0.5
    (0, 0): (100, 50), (0, 1): (200, 100), (0, 2): (300, T), (0, 3): (400, 150), (0, 4): (T, 250),
    # point 1: fec timed out on 3 of 5 seeds: its median is >= 10 000, ratio >= 10 000 / 120;
    # seed 5 failed for fec, so quic's 150 ms there is left out of quic's median (same seeds)
    (1, 0): (100, T), (1, 1): (110, T), (1, 2): (120, T), (1, 3): (130, 60), (1, 4): (140, 70),
    (1, 5): (150, "failed"),
    # point 2: quic timed out on 3 of 4 seeds: ratio <= 130 / 10 000; seed 4 has no quic run
    (2, 0): (T, 100), (2, 1): (T, 120), (2, 2): (T, 140), (2, 3): (200, 160), (2, 4): (None, 100),
    # point 3: both sides timed out on every usable seed: undefined; seed 2: quic unsupported
    (3, 0): (T, T), (3, 1): (T, T), (3, 2): ("unsupported", 90),
}


def table_rows(table: dict) -> list[tuple]:
    """A ``CENSORED_TABLE``-like dict as ``make_table_db`` rows (label quic then fec, size 1 kB)."""
    rows = []
    for (point, rep), sides in table.items():
        for label, cell in zip(("quic", "fec"), sides, strict=True):
            if cell is None:
                continue
            status, dct = ("ok", float(cell)) if isinstance(cell, int) else (cell, None)
            rows.append((point, label, 1000, rep, status, dct))
    return rows


def add_label_later(path: Path, label: str = "quic-fec-rs-free", *, points: int, repetitions: int, seed: int = 1,
                    other_points: bool = False) -> Path:
    """A second campaign (another design hash, as a design with a label added) running only ``label`` on the
    points, sizes and repetitions of ``make_download_db(path, points=…, repetitions=…, seed=…)`` (the same loss
    seeds), or with ``other_points`` on points of its own."""
    pts = _points(np.random.default_rng(seed), points)   # make_download_db's points (its first draws)
    if other_points:
        pts = [{**pt, "bw": pt["bw"] + 1.0} for pt in pts]
    conn = dbmod.connect(path)
    cid = _new_campaign(conn, "test-download-with-" + label, pts, repetitions)
    for pt in pts:
        for rep in range(repetitions):
            for size in SIZES:
                _record(conn, cid, pt, label, "rs:12,10", "download", size, rep, "ok",
                        {"dct_ms": 100.0 + size / 1000, "packets_sent": 10})
    conn.close()
    return path


def flag_and_schedule(path: Path, share: float = 0.3, seed: int = 5) -> Path:
    """Flag a share of the runs `fidelity` (as the runner does: the flag's reason, the run's own outcome kept)
    and give every run a link schedule: two outage events and the outage's drops on the lossy link."""
    rng = np.random.default_rng(seed)
    conn = dbmod.connect(path)
    keys = [k for (k,) in conn.execute("SELECT key FROM runs WHERE status = 'ok' ORDER BY key")]
    with dbmod.transaction(conn):
        for key in keys:
            if rng.random() < share:
                conn.execute("UPDATE runs SET status = 'fidelity', error = ? WHERE key = ?",
                             ("endpoints: waits beyond 2 ms added up to 12 ms, 1.5 % of the run's 800 ms > 1 %", key))
            for seq, (kind, at) in enumerate((("outage-start", 1.0), ("outage-end", 1.06))):
                conn.execute("INSERT INTO link_events VALUES (?, ?, ?, 'bottleneck', 'forward', ?, ?, 0.2, '{}')",
                             (key, seq, kind, at, at + 0.0003))
            conn.execute("UPDATE link_stats SET outage_dropped = 3, dropped = dropped + 3 WHERE run_key = ? "
                         "AND direction = 'forward'", (key,))
    conn.close()
    return path
