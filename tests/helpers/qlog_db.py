"""Results databases with runs that kept qlog files, for `fecbench explain` (fecbench.analysis.traces.timeline).

Written through records.db and records.run_records (the real schema): one campaign, one design point, runs
described by the test, their qlog files copied as a campaign keeps them (``<db stem>.artifacts/<run key>/``,
gzip'd, rows in the ``artifacts`` table unless ``listed`` is False), a verdict log per run when given.

``TQUIC_DOWNLOAD`` holds real qlog files recorded for these tests (tests/data/qlog/README.md). ``fec_qlog``
writes a JSON qlog (``traces`` array, qlog 0.3 names) of a sender whose events the test chooses: for what the
recorded samples cannot show (paths named by id, fecq's FEC events) and for pairing logic.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.records import db as dbmod
from fecbench.records import run_records

DATA = Path(__file__).resolve().parent.parent / "data" / "qlog"
TQUIC_DOWNLOAD = DATA / "tquic-download"
FECQ_RS_DOWNLOAD = DATA / "fecq-rs-download"
#: What the recorded tquic download was (tests/data/qlog/README.md).
TQUIC_SIZE = 120_000
RECORD_DTYPE = np.dtype([("index", "<u8"), ("verdict", "u1"), ("state", "u1"), ("len", "<u4")])


def fecq_rs_files() -> list[Path]:
    return sorted(FECQ_RS_DOWNLOAD.glob("*.sqlog.gz"))


def fecq_rs_verdicts() -> np.ndarray:
    return np.load(FECQ_RS_DOWNLOAD / "verdicts-reverse.npy")


def tquic_files() -> list[Path]:
    return sorted(TQUIC_DOWNLOAD.glob("*.qlog.gz"))


def tquic_verdicts() -> np.ndarray:
    return np.load(TQUIC_DOWNLOAD / "verdicts-reverse.npy")


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def make_db(path: Path, runs: list[dict[str, Any]], *, listed: bool = True) -> dict[str, str]:
    """Record ``runs`` (dicts: label, impl, args, size, repetition, metrics, qlogs: files to keep, verdicts: a
    record array for the reverse direction, link_path, flows; qlog_capable: what the campaign records of its
    implementation, default True; trace: what a trace link "cell" recorded in the reverse direction,
    `fecbench.inputs.traces.trace_used`) and return label → run key (``label#N`` for repetitions N > 0)."""
    impls = {run["label"]: {"name": run.get("impl", "fecq"), "qlog_capable": run.get("qlog_capable", True)}
             for run in runs}
    conn = dbmod.connect(path)
    with dbmod.transaction(conn):
        cid = dbmod.insert_campaign(conn, name="explain", design_path="designs/explain.toml", design_text="# test",
                                    design_hash=_key("explain"), fecbench_version="test", git_sha="test",
                                    created_at="2026-01-01T00:00:00Z", host_json={}, impls_json=impls, plan_json={},
                                    seed=7, repetitions=1, topology="single", link_backend="delayline")
        dbmod.ensure_factor_columns(conn, {"bw": "REAL"})
        dbmod.insert_points(conn, cid, [{"point": 0, "bw": 10.0}])
    root = path.resolve().parent / f"{path.stem}.artifacts"
    keys = {}
    for run in runs:
        key = _key(run["label"], run.get("repetition", 0))
        keys[run["label"] + (f"#{run['repetition']}" if run.get("repetition") else "")] = key
        with dbmod.transaction(conn):
            run_records.insert_pending_runs(conn, [{
                "key": key, "campaign_id": cid, "point": 0, "impl": run.get("impl", "fecq"), "label": run["label"],
                "impl_args": json.dumps(run.get("args", {})), "workload": run.get("workload", "download"),
                "size": run.get("size", TQUIC_SIZE), "repetition": run.get("repetition", 0), "loss_seed": 11}])
        run_records.start_run(conn, key, "2026-01-01T00:00:00Z", "delayline", "test")
        artifacts = []
        for file in run.get("qlogs", []):
            target = root / key / (file.name if file.suffix == ".gz" else f"{file.name}.gz")
            target.parent.mkdir(parents=True, exist_ok=True)
            if file.suffix == ".gz":
                shutil.copyfile(file, target)
            else:
                target.write_bytes(gzip.compress(file.read_bytes()))
            artifacts.append({"kind": "qlog", "path": str(target.relative_to(root)), "bytes": target.stat().st_size})
        verdicts = run.get("verdicts")
        logs, stats = [], []
        if verdicts is not None:
            buffer = io.BytesIO()
            np.save(buffer, verdicts, allow_pickle=False)
            logs.append(("l1", "reverse", buffer.getvalue()))
            stats.append({"link": "l1", "direction": "reverse", "seen": len(verdicts), "matched": len(verdicts),
                          "dropped": int(verdicts["verdict"].sum()),
                          "model": {"model": "uniform", "params": {"p": 0.06}, "path": run.get("link_path", 1)}})
        if run.get("trace"):
            stats.append({"link": "cell", "direction": "reverse", "delay": {"trace": run["trace"]}})
        run_records.finish_run(conn, key, status=run.get("status", "ok"), error=None, server_log_tail="",
                               client_log_tail="", finished_at="2026-01-01T00:00:01Z", duration_s=1.0,
                               metrics=run.get("metrics"), link_stats=stats, verdict_logs=logs,
                               artifacts=artifacts if listed else None, flows=run.get("flows"))
    conn.close()
    return keys


def fec_qlog(path: Path, *, paths: tuple[int, ...] = (0,), packets: int = 40, lost: tuple[int, ...] = (),
             repairs: tuple[int, ...] = (), recovered: tuple[int, ...] = (), vantage: str = "server") -> Path:
    """A JSON qlog of a sender on ``paths`` (multipath path ids: 0 is fecbench's path 1): per path ``packets``
    packets of 1200 bytes 1 ms apart (packet n at n ms on every path), a metrics update after each (cwnd
    growing by 1200 from 12000, bytes in flight, smoothed RTT 20 + n/10 ms), the packet numbers in ``lost``
    declared lost, repairs after the packets in ``repairs`` and recoveries after those in ``recovered``
    (fecq's namespace), on every path."""
    events: list[dict[str, Any]] = []
    for path_id in paths:
        for n in range(packets):
            t = float(n)
            events.append({"time": t, "name": "transport:packet_sent", "data": {
                "header": {"packet_type": "1RTT", "packet_number": n}, "raw": {"length": 1200}, "path_id": path_id}})
            events.append({"time": t + 0.1, "name": "recovery:metrics_updated", "data": {
                "congestion_window": 12000 + 1200 * n, "bytes_in_flight": 1200 * (n % 10 + 1),
                "smoothed_rtt": 20 + n / 10, "path_id": path_id}})
            if n in lost:    # as noq-proto writes them: no path (it is the path of the packet sent last)
                events.append({"time": t + 0.5, "name": "recovery:packet_lost", "data": {
                    "header": {"packet_type": "1RTT", "packet_number": n}}})
            if n in repairs:
                events.append({"time": t + 0.2, "name": "fecq:repair_sent", "data": {
                    "block": n // 10, "symbol": n % 10, "path_id": path_id}})
            if n in recovered:
                events.append({"time": t + 0.3, "name": "fecq:source_recovered", "data": {
                    "block": n // 10, "symbol": n % 10, "path_id": path_id}})
    events.sort(key=lambda e: e["time"])
    document = {"qlog_version": "0.3", "qlog_format": "JSON", "traces": [{
        "vantage_point": {"type": vantage}, "common_fields": {"ODCID": "abcd", "time_format": "relative",
                                                              "reference_time": 1.7e12},
        "events": events}]}
    path.write_text(json.dumps(document))
    return path
