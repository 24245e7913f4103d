"""The datagrams a link's dropper saw, as the sender's qlog tells them.

A dropper's verdict log has no clock and no packet numbers: its n-th record is the n-th datagram it saw in
one direction, with its length (headers below UDP included). ``walk`` pairs each record with the sender's
datagram it was, in order: a QUIC datagram (packets coalesced into one matched by the recorded length,
behind an FEC layer's source header if any) or an FEC layer's repair (fecq's ``repair_sent``, a datagram of
its own below QUIC). ``traces.timeline`` places the drops with it.

A sender that logs its datagrams themselves (fecq's ``datagram_sent``, kind ``datagram``, beside its
``repair_sent``: each a whole datagram, in the order sent) needs no such guess: ``walk_logged`` pairs the n-th
record with the n-th datagram it logged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: What a dropper's length counts beyond the UDP payload: IPv4 / IPv6 and UDP headers, with Ethernet's or not.
_HEADERS = (28, 42, 48, 62)
#: What an FEC layer below QUIC puts in front of a QUIC datagram: nothing, fecq's source header (kind byte and
#: symbol id: quic-impls/fecq/crates/fec-core/src/frame.rs) or its plain header (the kind byte alone: a datagram
#: no repair covers, ``--fec-protect stream``), and its multipath envelope byte before either.
_SOURCE_FRAMING = (0, 1, 2, 5, 6)
_SOURCE_OVERHEADS = tuple(sorted({h + f for h in _HEADERS for f in _SOURCE_FRAMING}))
_MAX_COALESCED = 8


@dataclass(frozen=True)
class WireDatagram:
    """One datagram a dropper saw, as the sender's qlog tells it: when it was sent (NaN: past the sender's
    last), its QUIC packets (positions ``start:end`` among the ``sent`` events; none for an FEC repair), and
    whether the record's length is that datagram's (False: the walk lost its way here, or ran past the sender's
    last datagram; the datagram is then the walk's best guess, its next packet alone)."""
    t_s: float
    start: int
    end: int
    repair: bool = False
    matched: bool = True


def walk(events: pd.DataFrame, lengths: np.ndarray) -> list[WireDatagram]:
    """Per dropper record (``lengths``: what the dropper recorded, headers below UDP included), the datagram it
    was, walking the sender's datagrams in order: its next QUIC datagram (consecutive packets coalesced into
    one when their lengths add up to the record's, behind an FEC layer's source header if any), or its next
    FEC repair (fecq's ``repair_sent``, whose length is the whole datagram's) when the record has that
    repair's length and the repair was sent first. Repairs are datagrams of their own on the wire: without
    them in the walk, every record after a repair would be placed at the packet after its own."""
    sent = events[events["kind"] == "sent"]
    sizes, times = sent["bytes"].to_numpy(dtype=float), sent["t_s"].to_numpy(dtype=float)
    repairs = events[events["kind"] == "repair_sent"]
    repair_sizes, repair_times = repairs["bytes"].to_numpy(dtype=float), repairs["t_s"].to_numpy(dtype=float)
    out: list[WireDatagram] = []
    i = r = 0
    for length in lengths:
        source_end, source_fits = _source_end(sizes, i, length) if i < len(sizes) else (None, False)
        if r < len(repair_sizes) and _whole(length, repair_sizes[r]) and (
                not source_fits or repair_times[r] <= times[i]):
            out.append(WireDatagram(float(repair_times[r]), i, i, repair=True))
            r += 1
        elif source_end is None:
            out.append(WireDatagram(math.nan, -1, -1, matched=False))
        else:
            out.append(WireDatagram(float(times[i]), i, source_end, matched=source_fits))
            i = source_end
    return out


#: The kinds of a sender's logged datagrams (``walk_logged``): QUIC's, and an FEC layer's repairs.
LOGGED = ("datagram", "repair_sent")


def walk_logged(events: pd.DataFrame, lengths: np.ndarray) -> list[WireDatagram]:
    """Per dropper record, the datagram it was when the sender logs each datagram it sends (kinds ``LOGGED``,
    lengths of the whole UDP payload): the n-th record is the n-th logged datagram, matched when its length is
    that datagram's; ``start`` is its position among the logged datagrams (``end`` the next), ``repair`` an FEC
    layer's repair (``repair_sent``)."""
    logged = events[events["kind"].isin(LOGGED)]
    sizes, times = logged["bytes"].to_numpy(dtype=float), logged["t_s"].to_numpy(dtype=float)
    repair = (logged["kind"] == "repair_sent").to_numpy()
    return [WireDatagram(float(times[i]), i, i + 1, repair=bool(repair[i]), matched=_whole(length, sizes[i]))
            if i < len(sizes) else WireDatagram(math.nan, -1, -1, matched=False)
            for i, length in enumerate(lengths)]


def link_events(events: pd.DataFrame, path: int, links: int) -> pd.DataFrame | None:
    """The sender's events a lossy link on fecbench's path ``path`` (1-based; 0: not recorded) saw: those of that
    path where the qlog names it, else all of them; None when the direction crosses several lossy links
    (``links``) and the qlog names no such path (the n-th packet of a path is not the n-th packet sent)."""
    named = set(events.loc[events["kind"] == "sent", "path"].dropna())
    if links > 1 and path not in named:
        return None
    return events[events["path"] == path] if path in named else events


def _whole(length: float, size: float) -> bool:
    """Whether a record of this length is a datagram whose UDP payload is ``size`` bytes."""
    return any(length - h == size for h in _HEADERS)


def _fits(sizes: np.ndarray, length: float) -> bool:
    """Whether QUIC packets of these sizes, as one datagram, make a record of this length."""
    return any(length - h == sizes.sum() for h in _SOURCE_OVERHEADS)


def _source_end(sizes: np.ndarray, i: int, length: float) -> tuple[int, bool]:
    """The end of the QUIC datagram starting at packet ``i`` and whether its length is the record's: the
    packets whose lengths add up to the record's (coalesced), else packet ``i`` alone (not a match)."""
    j = i + 1
    while (j < len(sizes) and j - i < _MAX_COALESCED and not math.isnan(sizes[i:j].sum())
           and not _fits(sizes[i:j], length) and sizes[i:j + 1].sum() + min(_HEADERS) <= length):
        j += 1
    return (j, True) if _fits(sizes[i:j], length) else (i + 1, False)


def datagram_times(events: pd.DataFrame, lengths: np.ndarray) -> np.ndarray:
    """The send time of each dropper record (``walk``), NaN past the sender's last packet."""
    return np.array([datagram.t_s for datagram in walk(events, lengths)])
