"""One run's timeline (``fecbench explain``): what its data sender's stack did over time, and why.

From the run's kept qlog files (``<db stem>.artifacts/<run key>/``, listed in the ``artifacts`` table or,
without it, found in that folder; ``fecbench.analysis.traces.qlog`` reads them) and what the database recorded:

- ``find_run(db, key)``: the run (a unique prefix of its key will do);
- ``qlog_files(db, key)``: its qlog files; ``NoQlog`` (exit 2, saying how to keep them) when there are none;
- ``build(db, run)``: a ``Timeline``: the data sender's metrics over time per path (congestion window, bytes
  in flight, smoothed RTT: each qlog update holds until the next), its sending rate per path (bytes of the
  packets it sent per time bin), the marks (dropper drops, declared losses, repairs sent, sources recovered,
  recoveries signalled, blocks abandoned), the competing flows' throughput (``flows`` table) and
  ``summary``: the numbers (DCT, losses by cause as far as recorded, repairs, recoveries, max cwnd, min
  and median smoothed RTT);
- ``twin(db, run)``: the run's twin without FEC on the same losses (``cross_stack.twins``: the same
  implementation's no-FEC label with the same other arguments, `baselines.fec_twin`; same design, workload,
  point, repetition and size: the same loss seed).

The data sender is the server for downloads and messages, the client for uploads. A dropper's verdict log
(``verdict_log = true``) orders packets, it has no clock: the n-th packet it saw in the data direction is
placed at the time the sender's qlog says it sent its n-th datagram (packets coalesced into one datagram
matched by the length the dropper recorded; an FEC layer's repairs below QUIC, fecq's ``repair_sent``, are
datagrams of their own, told apart by their length), on the path of the dropper's link; ``reconcile`` then tells, by
packet number, which drops the sender declared lost, which it never did, and which declared losses no dropper
drop explains (the queue's, or spurious ones). A multipath run whose qlog names no paths gets its drops
counted, not placed. Times are seconds from the
sender's first qlog event; the competing flows' bins count from the foreground client's start (the two
clocks differ by the handshake's first flight).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import tomllib

from fecbench.analysis import baselines, results, tables
from fecbench.analysis.results import DbLike
from fecbench.analysis.studies import cross_stack, flows, loss_position
from fecbench.analysis.studies.campaign_provenance import campaign_json
from fecbench.analysis.traces import capacity, losses, qlog, wire
from fecbench.inputs.directions import SENDER_DIRECTION
from fecbench.inputs.errors import UserError

#: Marks on a timeline, in the order of its legend: qlog kind (or a dropper's drop) → name.
MARKS = {"drop": "dropper drop", "repair_drop": "dropper drop (repair)", "lost": "declared lost",
         "repair_sent": "repair sent", "recovered": "source recovered", "signalled": "recovery signalled",
         "abandoned": "block abandoned"}
#: The side sending a workload's data (the other one only acknowledges).
SENDER = {"download": "server", "messages": "server", "upload": "client", "reqresp": "server", "page": "server"}


class NoQlog(UserError):
    """A run without kept qlog files."""


@dataclass
class Timeline:
    run: dict[str, Any]                                   # the run's row of results.load
    sender: str                                           # server or client
    metrics: pd.DataFrame                                 # t_s, path, cwnd, bytes_in_flight, srtt_ms
    rate: pd.DataFrame                                    # t_s, path, mbit_s (per bin)
    marks: pd.DataFrame                                   # t_s, path, mark
    flows: pd.DataFrame                                   # t_s, flow, mbit_s, dropped
    summary: dict[str, Any] = field(default_factory=dict)
    flow_windows: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["t_s", "flow", "cwnd"]))
    capacity: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=capacity.COLUMNS))  # trace links
    notes: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[int]:
        found = set(self.metrics["path"].dropna()) | set(self.rate["path"].dropna()) | set(self.marks["path"].dropna())
        return sorted(int(p) for p in found) or [0]


def find_run(db: DbLike, key: str) -> dict[str, Any]:
    """The run whose key is ``key`` or starts with it (UserError naming the database otherwise)."""
    runs = results.load(db)
    found = runs[runs["key"].astype(str).str.startswith(key)] if key else runs.iloc[0:0]
    if found.empty:
        raise UserError(f"{db}: no run with key {key!r} (keys: fecbench export {db}, column key)")
    if len(found) > 1:
        raise UserError(f"{db}: {len(found)} runs have keys starting with {key!r}; give more of the key")
    return found.iloc[0].to_dict()


def artifacts_dir(db: DbLike) -> Path:
    path = Path(db)
    return path.resolve().parent / f"{path.stem}.artifacts"


def writes_qlog(db: DbLike, impl: str) -> bool | None:
    """Whether the campaign asked the implementation for qlog, by what the database recorded of it (its
    fingerprint's ``qlog_capable``; before that was recorded, the ``[capture] qlog`` arguments of the descriptor
    text it kept): an old run is read by its own rules, never by today's descriptors. None: nothing recorded."""
    found = None
    for camp in results.campaigns(db).to_dict("records"):
        for label, entry in campaign_json(camp.get("impls_json")).items():
            if not isinstance(entry, dict) or impl not in (entry.get("name"), label):
                continue
            if isinstance(entry.get("qlog_capable"), bool):
                found = bool(found) or entry["qlog_capable"]
            elif isinstance(entry.get("descriptor"), str):
                found = bool(found) or _asks_for_qlog(entry["descriptor"])
    return found


def _asks_for_qlog(text: str) -> bool | None:
    """A recorded descriptor text's ``[capture] qlog`` arguments (None: the text does not parse)."""
    try:
        capture = tomllib.loads(text).get("capture") or {}
    except tomllib.TOMLDecodeError:
        return None
    return bool(capture.get("qlog")) if isinstance(capture, dict) else None


def kept_qlog(db: DbLike, key: str) -> list[Path]:
    """The run's kept qlog files, its competing flows' included (``flow-<id>-…``: runners.experiment.capture.
    Keeper): the ``artifacts`` table's rows, else what the run's artifacts folder holds."""
    root = artifacts_dir(db)
    listed = [r[0] for r in results.rows(db, "artifacts", ["path"], where={"run_key": key}, order_by=["path"])] \
        if "artifacts" in results.table_names(db) else []
    files = [root / p for p in listed] if listed else sorted(p for p in (root / key).rglob("*") if p.is_file())
    return [f for f in files if qlog.is_qlog(f) and f.is_file()]


def qlog_files(db: DbLike, key: str, impl: str | None = None) -> list[Path]:
    """The qlog files of the run's own connection (``kept_qlog`` without its competing flows')."""
    root = artifacts_dir(db)
    files = [f for f in kept_qlog(db, key) if not f.name.startswith("flow-")]
    if not files:
        if impl is not None and writes_qlog(db, impl) is False:
            raise NoQlog(f"run {key[:12]} has no qlog: {impl} is not asked for any (its impl.toml has no [capture] "
                         "qlog arguments), so `fecbench explain` cannot draw its runs; explain a run of an "
                         "implementation whose impl.toml has them")
        raise NoQlog(f"run {key[:12]} has no qlog kept in {root / key} (the campaign kept none for it). Run it "
                     f"again with its key and loss seed, its qlog kept: `fecbench run DESIGN --db again.sqlite --only "
                     f"{key[:16]} --capture qlog=all`, then `fecbench explain again.sqlite {key[:16]}` (or keep "
                     "every run's: `[capture] qlog = \"all\"` in the design)")
    return files


def flow_windows(db: DbLike, key: str, origin_abs_s: float) -> pd.DataFrame:
    """The competing flows' senders' congestion windows (their kept qlog, ``flow-<id>-…``) on the run's time
    axis (``origin_abs_s``: the run's sender's t_s = 0 on the wall clock): t_s, flow, cwnd."""
    frames = []
    flows_kept = [f for f in kept_qlog(db, key) if f.name.startswith("flow-")] if not math.isnan(origin_abs_s) else []
    for file in flows_kept:
        try:
            traces = qlog.read(file)
        except (OSError, ValueError, EOFError):
            continue
        for trace in traces:
            events = trace.events
            metrics = events[(events["kind"] == "metrics") & events["cwnd"].notna()]
            if metrics.empty or metrics["t_abs_s"].isna().all() or (events["kind"] == "sent").sum() < 100:
                continue   # the flow's receiver (it sends only ACKs), or no wall clock to place it on
            name = file.name.removeprefix("flow-").split(f"-{trace.vantage}-")[0]
            frames.append(pd.DataFrame({"t_s": metrics["t_abs_s"] - origin_abs_s, "flow": name,
                                        "cwnd": metrics["cwnd"]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["t_s", "flow", "cwnd"])


def has_qlog(db: DbLike, key: str) -> bool:
    try:
        return bool(qlog_files(db, key))
    except NoQlog:
        return False


def sender_trace(traces: list[qlog.QlogTrace], sender: str) -> qlog.QlogTrace | None:
    """The sender's connection with the most packets sent (another endpoint's or a retried one's aside)."""
    def sent(t: qlog.QlogTrace) -> int:
        return int((t.events["kind"] == "sent").sum())
    mine = [t for t in traces if t.vantage == sender] or [t for t in traces if t.vantage == "unknown"]
    return max(mine, key=sent) if mine else None


def _receiver_trace(traces: list[qlog.QlogTrace], sender: str) -> qlog.QlogTrace | None:
    """The other end's connection with the most packets received: where FEC rebuilds what was lost."""
    other = "client" if sender == "server" else "server"
    theirs = [t for t in traces if t.vantage == other]
    return max(theirs, key=lambda t: int((t.events["kind"] == "received").sum())) if theirs else None


#: The marks of what FEC does for the data at the receiver's end.
RECEIVER_MARKS = ("recovered", "signalled", "abandoned")


def _receiver_marks(events: pd.DataFrame, receiver: qlog.QlogTrace | None) -> pd.DataFrame | None:
    """The receiver's recoveries, signals and abandoned blocks on the sender's time axis (both traces on
    the wall clock), or None where they cannot be placed."""
    if receiver is None or events["t_abs_s"].isna().all() or receiver.events["t_abs_s"].isna().all():
        return None
    origin = float((events["t_abs_s"] - events["t_s"]).median())   # the sender's t_s = 0 on the wall clock
    theirs = receiver.events[receiver.events["kind"].isin(RECEIVER_MARKS)]
    return pd.DataFrame({"t_s": theirs["t_abs_s"] - origin, "path": theirs["path"], "mark": theirs["kind"]})


def rebuilt_after_declared(sender: pd.DataFrame, receiver: pd.DataFrame) -> tuple[int, int, float, int]:
    """(packets the receiver's FEC rebuilt, of them those the sender had already declared lost, their median
    lead in ms, those the sender declared lost only after they were rebuilt): a rebuilt packet is the packet the
    receiver's stack received right after a ``recovered`` event (same path); it matches a declared loss by path,
    type and number, on the traces' wall clock. A loss the sender declared, before or after FEC rebuilt it, was
    handled twice: a retransmission and a congestion response for a packet the receiver got (and, with
    recoveries reported as CE, a second signal). Declared after: the receiver acknowledged the packets past the
    gap before the repair arrived (fecq hands packets to QUIC as they come; rQUIC holds them), so the sender's
    loss detection fired although the packet was rebuilt."""
    rebuilt = []
    pending: dict[float, list[float]] = {}   # per path, the recoveries whose packet has not been received yet
    for t_abs, kind, path, ptype, number in zip(receiver["t_abs_s"], receiver["kind"], receiver["path"],
                                                receiver["packet_type"], receiver["packet_number"], strict=True):
        if kind == "recovered":   # a block decoded at once rebuilds several: their packets follow in order
            pending.setdefault(path, []).append(t_abs)
        elif kind == "received" and pending.get(path) and not math.isnan(number):
            rebuilt.append(((path, str(ptype), int(number)), pending[path].pop(0)))
    lost = sender[sender["kind"] == "lost"]
    declared = {}
    for t_abs, path, ptype, number in zip(lost["t_abs_s"], lost["path"], lost["packet_type"], lost["packet_number"],
                                          strict=True):
        if not math.isnan(number):
            declared.setdefault((path, str(ptype), int(number)), t_abs)
    leads = [(at - declared[key]) * 1000 for key, at in rebuilt
             if key in declared and not math.isnan(at) and not math.isnan(declared[key]) and declared[key] <= at]
    after = sum(1 for key, at in rebuilt
                if key in declared and not math.isnan(at) and not math.isnan(declared[key]) and declared[key] > at)
    return len(rebuilt), len(leads), float(np.median(leads)) if leads else math.nan, after


def _bin_s(span: float) -> float:
    """Time bins of a sending rate: ~80 per run, 1 ms to 1 s."""
    return float(min(1.0, max(0.001, span / 80)))


def sending_rate(events: pd.DataFrame, bin_s: float) -> pd.DataFrame:
    """Per path and time bin: Mbit/s of the packets sent (qlog lengths)."""
    sent = events[(events["kind"] == "sent") & events["bytes"].notna()]
    if sent.empty:
        return pd.DataFrame(columns=["t_s", "path", "mbit_s"])
    bins = np.floor(sent["t_s"] / bin_s) * bin_s
    out = sent.assign(t_s=bins).groupby(["path", "t_s"])["bytes"].sum().reset_index()
    frames = []
    for path, part in out.groupby("path"):     # empty bins are 0, not skipped
        grid = np.round(np.arange(0, part["t_s"].max() + bin_s / 2, bin_s), 9)
        full = part.assign(t_s=np.round(part["t_s"], 9)).set_index("t_s")["bytes"].reindex(grid, fill_value=0)
        frames.append(pd.DataFrame({"t_s": grid + bin_s / 2, "path": path,
                                    "mbit_s": full.to_numpy() * 8 / bin_s / 1e6}))
    return pd.concat(frames, ignore_index=True)


def _packet_ids(frame: pd.DataFrame) -> list[tuple[float, str, int]]:
    """(path, packet type, packet number) of each packet of a frame of qlog events that names its number."""
    named = frame[frame["packet_number"].notna()]
    return [(float(p), str(t), int(n)) for p, t, n in zip(named["path"], named["packet_type"],
                                                          named["packet_number"], strict=True)]


def link_paths(db: DbLike, key: str) -> dict[str, int]:
    """Each lossy link of the run → its path (1-based, as link_stats records it; 0 when not recorded)."""
    stats = results.frame(db, "link_stats", ["link", "model"], where={"run_key": key})
    out = {}
    for link, model in zip(stats["link"], stats["model"], strict=True):
        path = tables.link_path(model)
        out[link] = 0 if math.isnan(path) else int(path)
    return out


def dropper_marks(db: DbLike, key: str, sender: str,
                  events: pd.DataFrame) -> tuple[pd.DataFrame, list[list[tuple[float, str, int]]], list[str]]:
    """The dropper's drops in the sender's direction placed in time (see the module's text), the packets
    each dropped datagram carried (path, type, number), and notes."""
    logs = loss_position.verdict_logs(db)
    logs = logs[(logs["run_key"] == key) & (logs["direction"] == SENDER_DIRECTION[sender])]
    empty = pd.DataFrame(columns=["t_s", "path", "mark"])
    if logs.empty:
        return empty, [], ["no verdict log recorded: dropper drops are not placed in time (design: verdict_log "
                           "= true)"]
    link_path = link_paths(db, key)
    qlog_paths = set(events.loc[events["kind"] == "sent", "path"].dropna())
    rows, packets, notes = [], [], []
    for link, records in zip(logs["link"], logs["records"], strict=True):
        path = link_path.get(link, 0)
        mine = wire.link_events(events, path, len(logs))
        if mine is None:
            notes.append(f"link {link} (path {path}): the qlog names no path {path}, so its drops are not placed "
                         "(the n-th packet of a path is not the n-th packet sent)")
            continue
        mine_sent = mine[mine["kind"] == "sent"]
        for datagram, dropped in zip(wire.walk(mine, records["len"].astype(float)), records["verdict"].astype(bool),
                                     strict=True):
            if not dropped or math.isnan(datagram.t_s):
                continue
            rows.append({"t_s": datagram.t_s, "path": float(path if path in qlog_paths else 0),
                         "mark": "repair_drop" if datagram.repair else "drop"})
            if not datagram.repair:   # a repair carries no QUIC packet the sender could declare lost
                packets.append(_packet_ids(mine_sent.iloc[datagram.start:datagram.end]))
    return pd.DataFrame(rows, columns=["t_s", "path", "mark"]), packets, notes


def reconcile(dropped: list[list[tuple[float, str, int]]], events: pd.DataFrame) -> dict[str, int]:
    """Dropper drops against the sender's declared losses, by packet: drops it declared lost (any packet of
    the datagram), drops it never declared (FEC rebuilt them, or nothing needed sending again), and
    declared losses of packets no dropper drop took (the queue's drops, or spurious declarations)."""
    lost = set(_packet_ids(events[events["kind"] == "lost"]))
    dropped_ids = {p for datagram in dropped for p in datagram}
    declared = sum(1 for datagram in dropped if lost.intersection(datagram))
    return {"drops_declared": declared, "drops_not_declared": len(dropped) - declared,
            "declared_without_drop": len(lost - dropped_ids)}


def _flow_series(db: DbLike, key: str) -> pd.DataFrame:
    frame = flows.flows(db)
    frame = frame[frame["run_key"] == key] if len(frame) else frame
    rows = []
    for row in frame.itertuples(index=False):
        column = 2 if getattr(row, "data", "down") == "up" else 1
        width = float(row.bin_s or 0.1)
        for cell in row.series:
            rows.append({"t_s": cell[0] + width / 2, "flow": f"{row.flow}: {row.label} ({row.role})",
                         "mbit_s": flows.cell_bytes(cell, column) * 8 / width / 1e6, "dropped": cell[column + 2]})
    return pd.DataFrame(rows, columns=["t_s", "flow", "mbit_s", "dropped"])


def _losses(db: DbLike, key: str) -> dict[str, Any]:
    """The run's losses by cause (``losses.run_losses``: drops per cause and direction, declared, spurious)."""
    frame = losses.run_losses(db)
    row = frame[frame["run_key"] == key]
    return {k: v for k, v in row.iloc[0].to_dict().items() if k != "run_key"} if len(row) else {}


def build(db: DbLike, run: dict[str, Any]) -> Timeline:
    """The run's timeline (``NoQlog`` when it kept no qlog)."""
    key = str(run["key"])
    traces, notes = qlog.read_all(qlog_files(db, key, str(run.get("impl"))))
    sender = SENDER.get(str(run.get("workload")), "server")
    trace = sender_trace(traces, sender)
    if trace is None:
        seen = ", ".join(sorted({t.vantage for t in traces})) or "none"
        raise NoQlog(f"run {key[:12]}: no qlog of the data sender ({sender}) among its files (vantage points: "
                     f"{seen}); the implementation may write qlog for one side only")
    events = trace.events
    metrics = events[events["kind"] == "metrics"][["t_s", "path", "cwnd", "bytes_in_flight", "srtt_ms"]]
    metrics = metrics.groupby("path", group_keys=False)[["t_s", "path", "cwnd", "bytes_in_flight", "srtt_ms"]] \
        .apply(lambda part: part.ffill()).reset_index(drop=True) if len(metrics) else metrics
    span = float(events["t_s"].max()) if len(events) else 0.0
    rate = sending_rate(events, _bin_s(span))
    drops, dropped, drop_notes = dropper_marks(db, key, sender, events)
    receiver = _receiver_trace(traces, sender)
    marks = pd.concat([drops, events[events["kind"].isin(list(MARKS))][["t_s", "path", "kind"]]
                       .rename(columns={"kind": "mark"})], ignore_index=True)
    at_receiver = _receiver_marks(events, receiver)
    if at_receiver is not None:   # the data's recoveries happen at the receiver, not in the sender's trace
        marks = pd.concat([marks[~marks["mark"].isin(RECEIVER_MARKS)], at_receiver], ignore_index=True)
    timeline = Timeline(run, sender, metrics, rate, marks, _flow_series(db, key),
                        notes=[*notes, *drop_notes, *(f"{trace.file.name}: {trace.skipped} events did not parse"
                                                      for trace in traces if trace.skipped)])
    timeline.summary = summarise(run, events, marks, _losses(db, key), trace)
    if receiver is not None:
        # FEC rebuilds at the receiver: its counts, and the rebuilt packets the sender had declared lost.
        theirs = receiver.events
        timeline.summary.update({f"{kind}_receiver": int((theirs["kind"] == kind).sum())
                                 for kind in ("recovered", "signalled", "abandoned")})
        rebuilt, late, lead, after = rebuilt_after_declared(events, theirs)
        timeline.summary.update({"rebuilt": rebuilt, "rebuilt_after_declared": late, "rebuilt_lead_ms": lead,
                                 "declared_after_rebuilt": after})
    if len(drops):
        timeline.summary.update(reconcile(dropped, events))
    origin_abs_s = float((events["t_abs_s"] - events["t_s"]).median()) if len(events) else math.nan
    if len(timeline.flows):
        timeline.flow_windows = flow_windows(db, key, origin_abs_s)
    timeline.capacity, capacity_notes = capacity.link_capacity(db, key, SENDER_DIRECTION[sender], origin_abs_s,
                                                               _bin_s(span), span)
    timeline.notes += capacity_notes
    return timeline


def _count(marks: pd.DataFrame, mark: str) -> int:
    return int((marks["mark"] == mark).sum())


def summarise(run: dict[str, Any], events: pd.DataFrame, marks: pd.DataFrame, causes: dict[str, Any],
              trace: qlog.QlogTrace) -> dict[str, Any]:
    metrics = events[events["kind"] == "metrics"]
    srtt, cwnd = metrics["srtt_ms"].dropna(), metrics["cwnd"].dropna()

    def number(name: str) -> float:
        value = run.get(name)
        return float(value) if isinstance(value, (int, float)) and not pd.isna(value) else math.nan
    return {"key": run["key"], "label": run.get("label"), "impl": run.get("impl"), "status": run.get("status"),
            "size": run.get("size"), "dct_ms": number("dct_ms"), "causes": causes,
            "declared_lost": _count(marks, "lost"),
            "repairs_sent": _count(marks, "repair_sent"), "repairs_metrics": number("repair_sent"),
            "recovered": _count(marks, "recovered"), "recovered_metrics": number("recovered"),
            "sender_lost_metrics": causes.get("declared_lost"), "spurious": causes.get("spurious"),
            "signalled": _count(marks, "signalled"), "abandoned": _count(marks, "abandoned"),
            "dropper_drops_placed": _count(marks, "drop"), "repair_drops_placed": _count(marks, "repair_drop"),
            "packets_sent": int((events["kind"] == "sent").sum()),
            "max_cwnd": float(cwnd.max()) if len(cwnd) else math.nan,
            "min_srtt_ms": float(srtt.min()) if len(srtt) else math.nan,
            "median_srtt_ms": float(srtt.median()) if len(srtt) else math.nan,
            "qlog": trace.file.name, "vantage": trace.vantage}


def twin(db: DbLike, run: dict[str, Any]) -> dict[str, Any]:
    """The run's twin without FEC on the same losses (a FEC run's no-FEC twin; a no-FEC run's one FEC label)."""
    runs = results.load(db)
    twins = cross_stack.twins(runs, baselines.recorded_impls(db))
    label = str(run["label"])
    other = twins.get(label)
    if other is None:
        fec = [fec_label for fec_label, base in twins.items() if base == label]
        if len(fec) != 1:
            raise UserError(f"run {str(run['key'])[:12]} ({label}): no twin to pair with: " + (
                "its label has no no-FEC twin of the same implementation" if not fec else
                f"several FEC labels have it as their twin ({', '.join(fec)}); explain one of their runs"))
        other = fec[0]
    same = runs[(runs["label"] == other) & _same(runs, run, (*results.CONDITION, "impl"))]
    if same.empty:
        raise UserError(f"run {str(run['key'])[:12]} ({label}): its twin label {other} has no run on the same "
                        "point, repetition and size")
    return same.iloc[0].to_dict()


def _same(runs: pd.DataFrame, run: dict[str, Any], columns: Iterable[str]) -> pd.Series:
    mask = pd.Series(True, index=runs.index)
    for column in columns:
        value = run.get(column)
        mask &= runs[column].isna() if pd.isna(value) else runs[column] == value
    return mask
