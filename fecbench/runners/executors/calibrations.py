"""`--jobs auto` on a machine that calibrated before: a kept calibration, confirmed instead of redone.

A full calibration (`executors.calibrate`) costs its serial pilot plus one loaded round per N (about
20 min for a 72-run real-time cut). What it chooses depends on the machine and on how much CPU a run
needs, not on the design's exact points, so each one is kept, per machine and workload class, in a
JSON file (FECBENCH_CALIBRATIONS; default ~/.cache/fecbench/jobs-calibrations.json):

- machine: host name, CPU model and count, memory, kernel release (`hostinfo.fingerprint`), and where a campaign
  puts its endpoints (`fecbench.host.affinity`: a calibration under another placement measured other waits);
- workload class: workload kind, number of paths of the topology, implementations, link backend option.

A later campaign of the same class on the same machine, within MAX_AGE_H of that calibration, runs a
short paired pilot instead: CONFIRM_RUNS of its own runs serially (recorded as results, as a
calibration's serial pilot is) and the same runs on the chosen N networks (kept busy by other runs),
judged by the calibration's own rule (no run beyond a bound, every run ending as serially, median
paired ratio within 5 %; Wilcoxon at 1 % cannot reject with 6 pairs, so the ratio and the bounds
decide; a pilot that differs by its outcomes alone is judged against serial twins, as a calibration's is). If it
keeps the results, N is reused; if not, the campaign calibrates in full and that calibration replaces the kept
one. The age counts from the full calibration: a confirmation does not extend it. A kept choice of 1 network is
reused without a pilot only when one network's runs already took the CPUs it may keep busy (its serial pilot's
network limit below 2, or unmeasured before limits were kept); else the short pilot tries 2 networks, and if
they keep the results the kept choice was a busy moment's, not the machine's: it calibrates in full.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.host.paths import user_cache_file
from fecbench.runners.executors import calibrate as full
from fecbench.runners.executors.jobs import CpuModel
from fecbench.runners.executors.serial import TestbedFactory
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.testbed import MininetTestbed
from fecbench.timekeeping.lateness import QUANTILE_FRAMES, criterion_text

if TYPE_CHECKING:
    from fecbench.runners.executors.calibrate import SerialPilot
    from fecbench.runners.executors.progress import Reporter

MAX_AGE_H = 7 * 24
CONFIRM_RUNS = 6
STORE_ENV = "FECBENCH_CALIBRATIONS"


def store_path() -> Path:
    return user_cache_file(STORE_ENV, "jobs-calibrations.json")


def machine() -> dict[str, Any]:
    from fecbench.host import affinity
    from fecbench.runners.executors.hostinfo import fingerprint

    host = fingerprint()
    return {**{key: host.get(key) for key in ("hostname", "cpu", "cpus", "mem_kib", "kernel")},
            "cpu_placement": affinity.policy()}


def workload_class(prepared: Prepared, link_backend: str | None) -> dict[str, Any]:
    design = prepared.design
    return {"workload": design.workload.kind, "paths": prepared.topology.paths,
            "implementations": sorted({entry.name for entry in design.impls}),
            "link_backend": link_backend or "probe"}


def class_key(prepared: Prepared, link_backend: str | None) -> str:
    """The workload class as one string (a calibration per class within one command)."""
    return json.dumps(workload_class(prepared, link_backend), sort_keys=True)


def _entries(path: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):   # none yet, or unreadable: a full calibration follows and writes a new file
        return []
    return entries if isinstance(entries, list) else []


def find(prepared: Prepared, link_backend: str | None, now: float | None = None) -> dict[str, Any] | None:
    """The newest kept calibration of this machine and workload class within MAX_AGE_H, with its age."""
    now = time.time() if now is None else now
    here, kind = machine(), workload_class(prepared, link_backend)
    found = [e for e in _entries(store_path()) if e.get("machine") == here and e.get("class") == kind
             and 0 <= now - float(e.get("at", 0)) <= MAX_AGE_H * 3600]
    if not found:
        return None
    newest = max(found, key=lambda e: float(e["at"]))
    return {**newest, "age_h": round((now - float(newest["at"])) / 3600, 2)}


def keep(prepared: Prepared, link_backend: str | None, calibration: dict[str, Any], now: float | None = None) -> None:
    """Keep a full calibration (replacing the one of the same machine and class); written whole, then renamed."""
    path = store_path()
    here, kind = machine(), workload_class(prepared, link_backend)
    entries = [e for e in _entries(path) if not (e.get("machine") == here and e.get("class") == kind)]
    entries.append({"machine": here, "class": kind, "at": time.time() if now is None else now,
                    "design": prepared.design.name, "chosen": calibration["chosen"],
                    "rows": calibration["rows"], "cpu_model": calibration.get("cpu_model")})
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(entries, indent=1))
    partial.replace(path)


def confirm(prepared: Prepared, link_backend: str | None, jobs: int, runs: list[Run] | None,
            serial_pilot: SerialPilot, factory: TestbedFactory = MininetTestbed,
            cpu: CpuModel | None = None) -> tuple[list[str], list[dict]]:
    """The short paired pilot: CONFIRM_RUNS runs serially and on `jobs` networks (under the kept CPU model's admission,
    if any; against serial twins when its outcomes alone differ); its keys and two rows."""
    epsilon = full.outcome_metric(prepared)[1]
    pilot, fillers = full.pilot_of(prepared, CONFIRM_RUNS, runs)
    serial = serial_pilot(pilot)
    loaded = full.execute(prepared, pilot, fillers, jobs, link_backend, factory, cpu)
    twins = full.SerialTwins(prepared, pilot, link_backend, factory)
    rows = [{**full.summarise(1, serial, None, epsilon), "tries": 1},
            {**full.judge(jobs, loaded, serial, epsilon, twins), "tries": 1}]
    return [run.key for run in pilot], rows


def cpu_bound(found: dict[str, Any]) -> bool:
    """Whether a kept choice of 1 network was the CPUs' (one network's runs took what the networks may use)."""
    serial = next((row for row in found.get("rows") or [] if row.get("jobs") == 1), {})
    limit = serial.get("network_limit")
    return "network_limit" not in serial or (limit is not None and limit < 2)


def auto_jobs(prepared: Prepared, link_backend: str | None, *, runs: list[Run] | None = None,
              serial_pilot: SerialPilot | None = None, factory: TestbedFactory = MininetTestbed,
              pilot_runs: int = full.PILOT_RUNS, report: Callable[[dict[str, Any]], None] = lambda row: None,
              recalibrate: bool = False, now: float | None = None) -> dict[str, Any]:
    """`--jobs auto`: a kept calibration confirmed by a short paired pilot, else a full one (then kept).
    The result is what `calibrate` returns plus `reused` (the kept calibration's date, age and design, or
    None), `confirmation` (the short pilot's rows, when one ran) and `recorded` (the keys of the runs the
    serial pilots recorded as results: the campaign skips them)."""
    recorded = serial_pilot is not None
    serial_pilot = serial_pilot or full.unrecorded_serial_pilot(prepared, link_backend, factory)
    found = None if recalibrate else find(prepared, link_backend, now)
    confirmed: list[str] = []
    confirmation = None
    if found is not None:
        reused = {"calibrated_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(found["at"])),
                  "age_h": found["age_h"], "max_age_h": MAX_AGE_H, "design": found["design"]}
        base = {**full.rule(prepared), "reused": reused, "calibrated_rows": found["rows"],
                "cpu_model": found.get("cpu_model")}
        if found["chosen"] == 1 and cpu_bound(found):
            return {**base, "chosen": 1, "pilot": [], "rows": [], "confirmation": None, "recorded": []}
        trying = max(2, found["chosen"])
        confirmed, confirmation = confirm(prepared, link_backend, trying, runs, serial_pilot, factory,
                                          CpuModel.read(found.get("cpu_model")))
        for row in confirmation:
            report(row)
        if found["chosen"] == 1 and not confirmation[-1]["keeps_results"]:   # 2 networks still change them
            return {**base, "chosen": 1, "pilot": confirmed, "rows": confirmation, "confirmation": confirmation,
                    "recorded": confirmed if recorded else []}
        if found["chosen"] > 1 and confirmation[-1]["keeps_results"]:
            return {**base, "chosen": found["chosen"], "pilot": confirmed, "rows": confirmation,
                    "confirmation": confirmation, "recorded": confirmed if recorded else []}
        done = set(confirmed)
        runs = [run for run in (runs if runs is not None else prepared.runs) if run.key not in done]
    calibration = full.calibrate(prepared, link_backend, factory=factory, pilot_runs=pilot_runs, report=report,
                                 runs=runs, serial_pilot=serial_pilot)
    keep(prepared, link_backend, calibration, now)
    pilots = [*confirmed, *calibration["pilot"]]
    return {**calibration, "reused": None, "confirmation": confirmation, "recorded": pilots if recorded else []}


def for_campaign(prepared: Prepared, db_path: Path, link_backend: str | None, reporter: Reporter, *, runs: list[Run],
                 pilot_runs: int, recalibrate: bool) -> dict[str, Any]:
    """`--jobs auto` for a campaign (`fecbench run`, `fecbench reproduce`): `auto_jobs` with its serial pilots
    drawn from `runs` and recorded in the campaign's database, each measurement said to the reporter, and the
    result recorded with the campaign."""
    reporter.say(f"--jobs auto: calibrating on {prepared.design.name} (the serial pilot's runs are kept as "
                 "results of the campaign)")
    serial = full.RecordedSerialPilot(prepared, db_path, link_backend, reporter)
    calibration = auto_jobs(prepared, link_backend, runs=runs, serial_pilot=serial, pilot_runs=pilot_runs,
                            recalibrate=recalibrate, report=lambda row: reporter.say(row_text(row)))
    serial.record(calibration)
    reporter.say(choice_text(calibration))
    return calibration


def plan_text(prepared: Prepared, link_backend: str | None, runs: list[Run], seconds: dict[str, float], *,
              pilot_runs: int = full.PILOT_RUNS, recalibrate: bool = False) -> str:
    """What `--jobs auto` will run before the campaign (`fecbench run --dry-run --jobs auto`): the pilot's runs, the
    networks it tries and about how long, from `seconds` (run key -> its estimate; the model's where missing)."""
    from fecbench.runners.experiment.estimate import duration_text, schedule_seconds

    def took(pilot: list[Run], jobs: int = 1) -> float:
        return schedule_seconds([seconds.get(r.key, prepared.estimate(r)) for r in pilot], jobs)

    found = None if recalibrate else find(prepared, link_backend)
    if found is not None and found["chosen"] == 1 and cpu_bound(found):
        return (f"--jobs auto: reuses this machine's calibration of {found['design']} ({found['age_h']:.1f} h old): "
                "1 network, its runs took the CPUs: no pilot")
    confirm_text = ""
    if found is not None:
        pilot = full.pilot_of(prepared, CONFIRM_RUNS, runs)[0]
        trying = max(2, found["chosen"])
        outcome = ("if they keep the results, a full calibration follows (1 network was a busy moment's choice): "
                   if found["chosen"] == 1 else "if that changes the results, a full calibration follows: ")
        confirm_text = (f"--jobs auto: confirms this machine's calibration of {found['design']} "
                        f"({found['age_h']:.1f} h old, {found['chosen']} network(s)) first: {len(pilot)} of the runs "
                        f"to do serially (kept as results, about {duration_text(took(pilot))}), then the same on "
                        f"{trying} networks (thrown away, about {duration_text(took(pilot, trying))}); " + outcome)
    pilot = full.pilot_of(prepared, pilot_runs, runs)[0]
    tried = full.networks_to_try(None, len(prepared.runs))
    rounds = [took(pilot, jobs) for jobs in tried]
    loaded = (f"then the same {len(pilot)} runs on {', '.join(map(str, tried))} networks at once (none beyond "
              f"{full.CPU_TARGET:.0%} of the CPUs by the serial pilot's CPU use, that limit itself tried), the "
              f"networks kept busy by other runs (thrown away), each N measured up to {full.TRIES} times and stopping "
              f"at the first that changes the results (against serial twins of the pilot, run once more, when only "
              f"its outcomes differ): about {duration_text(rounds[0])} to "
              f"{duration_text(full.TRIES * sum(rounds))} more") if tried else "no other N to try"
    return ((confirm_text or "--jobs auto: calibrates first: ")
            + f"a serial pilot of {len(pilot)} of the runs to do (kept as results: about "
            + f"{duration_text(took(pilot))}), "
            + loaded + f"; N is the largest that keeps the results, kept for this machine for {MAX_AGE_H} h")


def row_text(row: dict[str, Any]) -> str:
    """One measured row of a calibration or confirmation, for the reporter."""
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g} ms"

    late = (f"; {criterion_text(row['lateness'])}" if row.get("lateness") and row["lateness"].get("runs")
            else f", delay elements {ms(row['lateness_p99_ms'])}")   # netem, or a calibration kept from before
    text = (f"--jobs auto: {row['jobs']} network(s): {row['ok']} of {row['runs']} pilot runs ok, worst p99 "
            f"endpoints {ms(row['endpoint_p99_ms'])}{late}")
    if row["jobs"] > 1:
        text += f", median ratio to serial {row.get('median_ratio')}, Wilcoxon p {row.get('wilcoxon_p')}"
        twins = row.get("twins")
        if twins:
            text += (f"; serial twins: {len(twins['changed_status'])} of {twins['runs']} ended otherwise, median "
                     f"ratio {twins['median_ratio']}, loaded further from serial: Wilcoxon p {twins['spread_p']}")
        text += f" (measurement {row['tries']})" if row["tries"] > 1 else ""
        text += ": keeps the results" if row["keeps_results"] else f": changes them ({row['why']})"
    elif row["why"]:
        text += f" (serially: {row['why']})"
    if row.get("cpu_s") is not None:
        limit, cpu = row.get("network_limit"), row.get("cpu_model")
        text += (f"; one network used {row['cpu_s']:.3g} s of CPU in {row['wall_s']:.3g} s: " +
                 (f"at most {limit} networks on {row['cpus']} CPUs" if limit else "too short to limit the networks"))
        if cpu:
            text += (f" (a run takes {cpu['floor']:.3g} core + {cpu['per_mbit']:.3g} per Mbit/s it moves; networks "
                     f"start runs while those in flight take at most {cpu['budget']:.3g} cores)")
    return text


def choice_text(c: dict[str, Any]) -> str:
    """The choice of --jobs auto and what it rests on, in one line."""
    rule = (f"{c['metric']} within {c['ratio_tolerance']:.0%} of serial; bounds: endpoints p99 ≤ "
            f"{c['endpoint_bound_ms']:g} ms, delay elements p99 ≤ {c['bound_ms']:g} ms where a direction sent n ≥ "
            f"{QUANTILE_FRAMES:,} frames, and the latest frame's share of the run")
    weighted = "; networks start runs by CPU (those in flight within its budget)" if c.get("cpu_model") else ""
    if c.get("reused"):
        r = c["reused"]
        how = ("its runs took the CPUs: nothing to confirm" if not c["pilot"] else
               f"2 networks changed the results again in a paired pilot of {len(c['pilot'])} runs" if c["chosen"] == 1
               else f"confirmed by a paired pilot of {len(c['pilot'])} runs")
        return (f"--jobs auto: {c['chosen']} network(s), this machine's calibration of {r['calibrated_at']} "
                f"({r['design']}, {r['age_h']:.1f} h old, reused up to {r['max_age_h']} h), {how}; {rule}{weighted}")
    again = " (the kept calibration was not confirmed)" if c.get("confirmation") else ""
    return f"--jobs auto: {c['chosen']} network(s){again} (pilot of {len(c['pilot'])} runs, {rule}){weighted}"
