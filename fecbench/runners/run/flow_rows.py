"""A competing-flows run's flows-table rows (runners.run.competing): each flow's counters picked out by its server's
port, per direction and time bin on the run's grid (s from the foreground client's start), its totals, and iperf3's
own summary.

Two counters see each flow on a lossy link: the dropper, before the delay element, counts what the flow offered the
link and what the loss model dropped; the delay element counts what arrived at the bottleneck queue behind it and
what that queue refused (tbf's limit or its own: the tail drops). A row's drops are both, so the flows' drops add up
to the link's, and its bytes through the bottleneck are what the queue took.
"""

from __future__ import annotations

from typing import Any


def counts_of(port: int | None, counters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-flow counter rows of the flow whose server listens on `port` (forward: its destination port,
    reverse: its source port), each with its link, direction and `source`: `dropper` (what the flow offered the
    link: packets, bytes, and those the loss model dropped) or `queue` (what arrived at the bottleneck queue:
    packets, bytes, and of those what the queue refused, `dropped` and `dropped_bytes`)."""
    rows = []
    for link in counters:
        def mine(sport: int, dport: int, direction: str = link["direction"]) -> bool:
            return (direction == "forward" and dport == port) or (direction == "reverse" and sport == port)

        base = {"link": link["link"], "direction": link["direction"]}
        for proto, sport, dport, b, packets, size, dropped in link.get("flows", []):
            if mine(sport, dport):
                rows.append({**base, "source": "dropper", "proto": proto, "bin": b, "packets": packets,
                             "bytes": size, "dropped": dropped, "t0_ns": link["t0_ns"], "bin_ns": link["bin_ns"]})
        queue = link.get("queue")
        for proto, sport, dport, b, packets, size, dropped, dropped_bytes in (queue or {}).get("flows", []):
            if mine(sport, dport):
                rows.append({**base, "source": "queue", "proto": proto, "bin": b, "packets": packets,
                             "bytes": size, "dropped": dropped, "dropped_bytes": dropped_bytes,
                             "t0_ns": queue["t0_ns"], "bin_ns": queue["bin_ns"]})
    return rows


def queue_counted(counters: list[dict[str, Any]]) -> bool:
    """Whether the delay element of every lossy link direction counted the flows (their queue drops attributed)."""
    return bool(counters) and all(link.get("queue") is not None for link in counters)


def record(flow: str, role: str, label: str, impl: str | None, tool: str | None, workload: str | None,
           start_s: float, started_s: float | None, ended_s: float | None, status: str, error: str | None,
           counts: list[dict[str, Any]], origin_ns: int, metrics: dict[str, Any] | None,
           timing: dict[str, Any] | None, queue: bool = False) -> dict[str, Any]:
    """A flows-table row: totals per direction (bytes and packets the flow offered the link; its drops: the loss
    model's and, with `queue`, the bottleneck queue's) and the per-bin series (s from the foreground's start), each
    cell [t, bytes_down, bytes_up, dropped_down, dropped_up, queue_dropped_down, queue_dropped_up, through_down,
    through_up]: the offered bytes, the drops (both kinds), of those the queue's, and the bytes that got through
    the queue (arrived at it and not refused); the last four None without `queue` (nothing attributed the queue's
    drops: the netem backend)."""
    ways = (("down", "reverse"), ("up", "forward"))
    dropper = [c for c in counts if c.get("source", "dropper") == "dropper"]
    queued = [c for c in counts if c.get("source") == "queue"] if queue else []
    totals = {f"{what}_{way}": sum(c[what] for c in dropper if c["direction"] == direction)
              for what in ("bytes", "packets", "dropped") for way, direction in ways}
    for way, direction in ways:
        totals[f"dropped_{way}"] += sum(c["dropped"] for c in queued if c["direction"] == direction)
    series: dict[float, list[Any]] = {}
    for c in [*dropper, *queued]:
        # On a grid of bins from the foreground's start (each dropper's and delay element's own bins began when
        # it was set, a few ms apart: within half a bin of the grid).
        width = c["bin_ns"]
        t = round(round((c["t0_ns"] + c["bin"] * width - origin_ns) / width) * width / 1e9, 3)
        cell = series.setdefault(t, [0, 0, 0, 0, *([0, 0, 0, 0] if queue else [None] * 4)])
        index = 0 if c["direction"] == "reverse" else 1
        if c.get("source", "dropper") == "dropper":
            cell[index] += c["bytes"]
            cell[2 + index] += c["dropped"]
        else:
            cell[2 + index] += c["dropped"]
            cell[4 + index] += c["dropped"]
            cell[6 + index] += c["bytes"] - c["dropped_bytes"]
    bin_s = counts[0]["bin_ns"] / 1e9 if counts else None
    data = "up" if workload == "upload" else "down"
    return {"flow": flow, "role": role, "label": label, "impl": impl, "tool": tool, "workload": workload, "data": data,
            "start_s": start_s, "started_s": started_s, "ended_s": ended_s, "status": status, "error": error,
            **totals, "dct_ms": (metrics or {}).get("dct_ms"), "bin_s": bin_s,
            "series": [[t, *cell] for t, cell in sorted(series.items())], "metrics": metrics, "endpoints": timing}


def iperf3_summary(text: str) -> dict[str, Any] | None:
    """What an iperf3 -J client reports: bytes and bits per second received, retransmits, its error."""
    import json

    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    end = data.get("end") or {}
    received = end.get("sum_received") or end.get("sum") or {}
    sent = end.get("sum_sent") or {}
    return {"bytes": received.get("bytes"), "bits_per_second": received.get("bits_per_second"),
            "retransmits": sent.get("retransmits"), "error": data.get("error")}
