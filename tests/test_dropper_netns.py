"""The dropper on real interfaces: two hosts and a router in network namespaces this test creates.
Tests taking the `hook` fixture run on both attach paths: tcx links and clsact cls_bpf filters."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from fecbench.dropper import Dropper, Filter, GilbertElliott, NoLoss, Trace, Uniform, reference_verdicts
from fecbench.dropper.dropper import PIN_ROOT, hooks, tcx_available
from fecbench.host import cleanup
from fecbench.inputs.errors import UserError

pytestmark = pytest.mark.require_root

PORT = 5001
RECEIVER = """
import socket, struct, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)  # dual stack: IPv4 arrives v4-mapped
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
s.bind(("::", int(sys.argv[1])))
print("ready", flush=True)
s.settimeout(float(sys.argv[2]))  # until the first datagram: the sender may take seconds to start
seen = []
try:
    while True:
        seen.append(struct.unpack("!Q", s.recv(2048)[:8])[0])
        s.settimeout(1.0)
except socket.timeout:
    pass
sys.stdout.write(" ".join(map(str, seen)) + "\\n")
"""
SENDER = """
import socket, struct, sys, time
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 32, 16 << 20)  # SO_SNDBUFFORCE
payload = bytes(100)
gso = len(sys.argv) > 4  # one sendmsg of 8 datagrams: a UDP GSO super-packet
if gso:
    s.setsockopt(17, 103, 108)  # UDP_SEGMENT: 108-byte segments
for i in range(int(sys.argv[3])):
    data = b"".join(struct.pack("!Q", 8 * i + j) + payload for j in range(8)) if gso else struct.pack("!Q", i) + payload
    s.sendto(data, (sys.argv[1], int(sys.argv[2])))
    if i % 200 == 199:
        time.sleep(0.0005)  # keep the veth backlogs (1000 packets) from overflowing
"""


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture(params=["tcx", "clsact"])
def hook(request):
    if request.param == "tcx" and not tcx_available():
        pytest.skip("this kernel has no tcx links (Linux < 6.6)")
    return request.param


def tc_show(ns: str, dev: str, *what: str) -> str:
    """`tc filter show dev DEV egress` (what = ("filter", "egress")) or `tc qdisc show dev DEV` in `ns`."""
    kind, *hook = what
    return subprocess.run(["ip", "netns", "exec", ns, "tc", kind, "show", "dev", dev, *hook],
                          capture_output=True, text=True, check=True).stdout


def attached_on(d: Dropper, ns: str, dev: str, direction: str = "egress") -> bool:
    """Is this instance's program on the hook: its tcx link pinned, or its clsact filter present?"""
    if d.hook == "tcx":
        return (d.pin / "link").exists()
    return "fecdrop" in tc_show(ns, dev, "filter", direction)


@pytest.fixture(scope="module")
def line():
    """h1 -- r -- h2 with veth pairs; r forwards. Yields the namespace names."""
    tag = f"{cleanup.prefix()}{uuid.uuid4().hex[:4]}"
    h1, r, h2 = f"{tag}h1", f"{tag}r", f"{tag}h2"
    try:
        for ns in (h1, r, h2):
            sh("ip", "netns", "add", ns)
            cleanup.record("netns", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", h1, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", r)
        sh("ip", "-n", h2, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1", "netns", r)
        for ns, dev, addr, addr6 in ((h1, "eth0", "10.0.1.1/24", "fd00:1::1/64"),
                                     (r, "eth0", "10.0.1.254/24", "fd00:1::fe/64"),
                                     (r, "eth1", "10.0.2.254/24", "fd00:2::fe/64"),
                                     (h2, "eth0", "10.0.2.1/24", "fd00:2::1/64")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "addr", "add", addr6, "dev", dev, "nodad")
            sh("ip", "-n", ns, "link", "set", dev, "up")
        for host, gw, gw6 in ((h1, "10.0.1.254", "fd00:1::fe"), (h2, "10.0.2.254", "fd00:2::fe")):
            sh("ip", "-n", host, "route", "add", "default", "via", gw)
            sh("ip", "-n", host, "-6", "route", "add", "default", "via", gw6)
        sh("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        for dst in ("10.0.2.1", "fd00:2::1"):  # the first IPv6 pings fail while link-local DAD runs
            for _ in range(30):
                if subprocess.run(["ip", "netns", "exec", h1, "ping", "-c1", "-W1", dst],
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.2)
            else:
                raise RuntimeError(f"{h1} cannot reach {dst}")
        yield h1, r, h2
    finally:
        for ns in (h1, r, h2):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
            cleanup.forget("netns", ns)


def transfer(line, packets: int, dst: str = "10.0.2.1", gso: bool = False, wait: float = 60.0) -> np.ndarray:
    """Send `packets` numbered UDP datagrams h1 -> h2 (`gso`: 8 per sendmsg, as one UDP GSO super-packet);
    return the sequence numbers h2 received. `wait`: seconds h2 waits for the first one (a Python sender
    takes seconds to start in an emulated guest; a transfer expected to lose everything waits less)."""
    h1, _, h2 = line
    rx = subprocess.Popen(["ip", "netns", "exec", h2, sys.executable, "-c", RECEIVER, str(PORT), str(wait)],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        subprocess.run(["ip", "netns", "exec", h1, sys.executable, "-c", SENDER, dst, str(PORT),
                        str(packets), *(["gso"] if gso else [])], check=True)
        out, _ = rx.communicate(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    return np.array(sorted(map(int, out.split())), dtype=np.int64)


def missing(received: np.ndarray, packets: int) -> np.ndarray:
    return np.setdiff1d(np.arange(packets), received)


def test_router_egress_drops_exactly_the_predicted_packets(line, hook):
    n = 100_000
    model = GilbertElliott(0.02, 0.25, 0.995, 0.1)
    udp = Filter(proto="udp", port=PORT)
    with Dropper.attach("eth1", netns=line[1], model=model, seed=7, stream=1, filter=udp, log=True, hook=hook) as d:
        assert d.hook == hook and d.stats()["hook"] == hook
        assert attached_on(d, line[1], "eth1")
        entries = json.loads(cleanup.state_file().read_text())
        assert any(e["kind"] == "bpf_pin" and e["name"] == str(d.pin) for e in entries)

        lost = missing(transfer(line, n), n)
        want = np.flatnonzero(reference_verdicts(model, 7, 1, n))
        assert len(want) > 1000
        assert np.array_equal(lost, want)
        st = d.stats()
        assert st["matched"] == n and st["dropped"] == len(want) and st["gso"] == 0
        log = d.verdict_log()
        assert np.array_equal(log["index"], np.arange(n))
        assert np.array_equal(np.flatnonzero(log["verdict"]), want)

        d.set(seed=7)  # same seed: the same losses again
        assert np.array_equal(missing(transfer(line, n), n), want)
        d.set(seed=8)
        other = missing(transfer(line, n), n)
        assert not np.array_equal(other, want)
        assert np.array_equal(other, np.flatnonzero(reference_verdicts(model, 8, 1, n)))
    assert not (PIN_ROOT / d.name).exists()
    assert hooks("eth1", line[1]) == {"egress": 0, "ingress": 0}
    entries = json.loads(cleanup.state_file().read_text()) if cleanup.state_file().exists() else []
    assert not any(e["kind"] == "bpf_pin" and e["name"] == str(d.pin) for e in entries)


def test_per_flow_counters_split_the_link_by_port_and_time(line):
    """With flow counting on (competing flows), every packet and drop is counted once, under its flow (protocol
    and ports) and time bin; without it, nothing is counted per flow."""
    with Dropper.attach("eth1", netns=line[1], model=Uniform(0.1), seed=3) as d:
        transfer(line, 300)
        assert d.flows()["flows"] == [] and d.flows()["counting"] is False
        d.set(seed=3, flow_bin_ms=50)
        start = time.monotonic_ns()
        transfer(line, 3000)
        time.sleep(0.1)
        transfer(line, 1000, dst="fd00:2::1")
        got, st = d.flows(), d.stats()
    assert got["counting"] is True and got["bin_ns"] == 50_000_000
    assert abs(got["t0_ns"] - start) < 5_000_000_000   # the same clock as time.monotonic_ns()
    rows = [r for r in got["flows"] if r[0] == 17 and r[2] == PORT]
    assert sum(r[4] for r in rows) == 4000 and sum(r[6] for r in rows) == st["dropped"] > 200
    assert sum(r[5] for r in rows) == 3000 * 150 + 1000 * 170   # frame lengths: IPv4 and IPv6, 108-byte payloads
    assert sum(r[4] for r in got["flows"]) == st["matched"]      # everything the dropper matched, once
    assert len({r[3] for r in rows}) >= 2                         # more than one 50 ms bin
    assert len({r[1] for r in rows}) == 2                         # two senders: two source ports


ICMP_ERRORS = """
import socket, struct, sys
# ICMP errors h1 -> h2 quoting a UDP datagram h2:PORT -> h1:40000 (as h1 would send if it had closed that
# port), then plain echo requests, which quote nothing.
port, count = int(sys.argv[1]), int(sys.argv[2])
udp = struct.pack("!HHHH", port, 40000, 108, 0)
v4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
quoted = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 128, 1, 0, 64, 17, 0, socket.inet_aton("10.0.2.1"),
                     socket.inet_aton("10.0.1.1")) + udp
v6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)   # the kernel sums ICMPv6
quoted6 = struct.pack("!IHBB16s16s", 6 << 28, 108, 17, 64, socket.inet_pton(socket.AF_INET6, "fd00:2::1"),
                      socket.inet_pton(socket.AF_INET6, "fd00:1::1")) + udp
for _ in range(count):
    v4.sendto(struct.pack("!BBHI", 3, 3, 0, 0) + quoted, ("10.0.2.1", 0))   # port unreachable
    v6.sendto(struct.pack("!BBHI", 1, 4, 0, 0) + quoted6, ("fd00:2::1", 0))  # port unreachable
    v4.sendto(struct.pack("!BBHI", 8, 0, 0, 0), ("10.0.2.1", 0))            # echo request
"""


def test_an_icmp_error_counts_under_the_flow_it_reports(line):
    """An ICMP or ICMPv6 error (a closed port's answer to a flow's last packets) counts under the flow whose
    datagram it quotes, with that flow's ports as seen in its own direction, so every drop of a run with
    competing flows belongs to a flow; other ICMP (echo) has no ports."""
    with Dropper.attach("eth1", netns=line[1], model=Uniform(0.1), seed=3) as d:
        d.set(seed=3, flow_bin_ms=50)
        subprocess.run(["ip", "netns", "exec", line[0], sys.executable, "-c", ICMP_ERRORS, str(PORT), "40"],
                       check=True)
        got = d.flows()["flows"]
    for proto in (1, 58):
        assert sum(r[4] for r in got if r[0] == proto and (r[1], r[2]) == (40000, PORT)) == 40, got
    assert sum(r[4] for r in got if r[0] == 1 and (r[1], r[2]) == (0, 0)) == 40, got


def test_filter_non_matching_traffic_passes_and_keeps_the_index(line):
    # everything dropped, but only for another port: our datagrams pass and ARP/ping still work
    with Dropper.attach("eth1", netns=line[1], model=Uniform(1.0), filter=Filter("udp", 9999)) as d:
        assert len(transfer(line, 2000)) == 2000
        st = d.stats()
        assert st["matched"] == 0 and st["dropped"] == 0 and st["seen"] >= 2000


def test_ipv6_address_pair_filter_and_gso_count(line):
    pair = Filter(proto="udp", port=PORT, src="fd00:1::1", dst="fd00:2::1")
    with Dropper.attach("eth1", netns=line[1], model=Uniform(1.0), filter=pair) as d:
        assert len(transfer(line, 500, dst="fd00:2::1", wait=5.0)) == 0
        assert len(transfer(line, 500)) == 500  # IPv4: not the filtered pair
        st = d.stats()
        assert st["matched"] == 500 and st["dropped"] == 500 and st["unmatched"] >= 500
    with Dropper.attach("eth1", netns=line[1], model=NoLoss(), filter=Filter("udp", PORT)) as d:
        assert len(transfer(line, 50, gso=True)) == 400
        st = d.stats()
        assert st["gso"] > 0 and st["matched"] < 400  # one verdict covered several wire packets


def test_ingress_by_pid_and_two_instances(line, hook):
    h1, r, h2 = line
    holder = subprocess.Popen(["ip", "netns", "exec", r, "sleep", "60"])
    try:
        pid = holder.pid  # `ip netns exec` execs the command: this PID lives in r's namespace...
        want = os.stat(f"/run/netns/{r}").st_ino
        for _ in range(600):  # ...once it has entered it (seconds on an emulated CPU)
            if os.stat(f"/proc/{pid}/ns/net").st_ino == want:
                break
            time.sleep(0.01)
        udp = Filter(proto="udp", port=PORT)
        with Dropper.attach("eth0", netns=pid, direction="ingress", model=Trace.load([0, 5]), filter=udp,
                            hook=hook) as a, \
                Dropper.attach("eth0", netns=h2, model=Uniform(0.0), filter=udp, hook=hook) as b, \
                Dropper.attach("eth0", netns=h1, model=Trace.load([7]), filter=udp, hook=hook) as c:
            assert list(missing(transfer(line, 10), 10)) == [0, 5, 7]
            assert a.stats()["dropped"] == 2 and b.stats()["matched"] == 0  # h2's egress sees no data
            assert c.stats()["dropped"] == 1 and {a.hook, b.hook, c.hook} == {hook}
    finally:
        holder.kill()
        holder.wait()


def _own_pins() -> set[str]:
    """This process's pinned objects (other test workers pin and unpin theirs meanwhile)."""
    mine = f"{cleanup.prefix()}-"
    return {n for n in (os.listdir(PIN_ROOT) if PIN_ROOT.exists() else []) if n.startswith(mine)}


def test_bad_input_leaves_nothing_attached(line, hook):
    h1, r, h2 = line
    before = _own_pins()
    with pytest.raises(UserError, match="unknown interface"):
        Dropper.attach("nosuch0", netns=r)
    with pytest.raises(UserError, match="namespace"):
        Dropper.attach("eth0", netns="fecbench-no-such-ns")
    with pytest.raises(UserError, match="PID"):
        Dropper.attach("eth0", netns=2**22 + 12345)
    with pytest.raises(UserError, match="hook must be auto, tcx or clsact"):
        Dropper.attach("eth1", netns=r, hook="tc")
    with Dropper.attach("eth1", netns=r, hook=hook):
        for again in ("tcx", "clsact"):  # one dropper per interface direction, whatever the hook
            if again == "tcx" and not tcx_available():
                continue
            with pytest.raises(UserError, match="already attached"):
                Dropper.attach("eth1", netns=r, hook=again)
        assert hooks("eth1", r) == {"egress": 1, "ingress": 0}
    assert _own_pins() == before
    assert hooks("eth1", r) == {"egress": 0, "ingress": 0}


def test_cli_attach_set_stats_detach(line, hook):
    r = line[1]
    fb = [sys.executable, "-m", "fecbench", "dropper"]
    name = f"{cleanup.prefix()}-cli-{uuid.uuid4().hex[:4]}"
    try:
        run = subprocess.run([*fb, "attach", "--dev", "eth1", "--netns", r, "--model", "uniform", "--p", "0.5",
                              "--proto", "udp", "--port", str(PORT), "--name", name, "--hook", hook],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        # the hook also comes from the environment (a whole suite or campaign on one path)
        again = subprocess.run([*fb, "attach", "--dev", "eth1", "--netns", r, "--model", "none"],
                               capture_output=True, text=True, env={**os.environ, "FECBENCH_DROPPER_HOOK": hook})
        assert again.returncode == 2 and "already attached" in again.stderr
        received = transfer(line, 1000)
        st = json.loads(subprocess.run([*fb, "stats", "--name", name, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
        assert st["matched"] == 1000 and st["dropped"] == 1000 - len(received) and st["hook"] == hook
        assert np.array_equal(missing(received, 1000),
                              np.flatnonzero(reference_verdicts(Uniform(0.5), 0, 0, 1000)))
        subprocess.run([*fb, "set", "--name", name, "--model", "none", "--seed", "3"], check=True,
                       capture_output=True)
        assert len(transfer(line, 500)) == 500
    finally:
        subprocess.run([*fb, "detach", "--name", name], capture_output=True)
    assert not Path(PIN_ROOT / name).exists()
    assert hooks("eth1", r) == {"egress": 0, "ingress": 0}
    bad = subprocess.run([*fb, "attach", "--dev", "eth1", "--netns", r, "--model", "none"], capture_output=True,
                         text=True, env={**os.environ, "FECBENCH_DROPPER_HOOK": "bogus"})
    assert bad.returncode == 2 and "FECBENCH_DROPPER_HOOK" in bad.stderr


def test_clean_detaches_a_killed_process_dropper(line, hook):
    """A process that attached a dropper and was killed: its recorded resources (pins; the clsact filter),
    once removed the way `fecbench clean` does, leave nothing attached."""
    r = line[1]
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from fecbench.dropper import Dropper, GilbertElliott, NoLoss, Trace, Uniform\n"
        f"Dropper.attach('eth1', netns={r!r}, model=Uniform(0.5), hook={hook!r})\n"
        "print('attached', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "attached"
        assert hooks("eth1", r)["egress"] == 1
    finally:
        child.kill()
        child.wait()
    state = cleanup.state_file(child.pid)
    entries = json.loads(state.read_text())
    assert [e["kind"] for e in entries] == (["bpf_pin"] if hook == "tcx" else ["bpf_pin", "tc_filter"])
    cleanup.remove_entries(entries)  # what `fecbench clean` does for this dead process
    state.unlink()
    # the kernel frees an unpinned link after an RCU grace period: allow it a moment
    for _ in range(100):
        if hooks("eth1", r)["egress"] == 0:
            break
        time.sleep(0.02)
    assert hooks("eth1", r) == {"egress": 0, "ingress": 0}
    assert not Path(entries[0]["name"]).exists()
    assert "clsact" not in tc_show(r, "eth1", "qdisc")  # the killed process had created it


def test_verdict_log_overflow_is_counted(line):
    with Dropper.attach("eth1", netns=line[1], model=Uniform(0.2), filter=Filter("udp", PORT),
                        log=True, log_bytes=4096) as d:
        transfer(line, 1000)
        log, st = d.verdict_log(), d.stats()
        assert st["log_lost"] > 0 and len(log) + st["log_lost"] == 1000
        want = reference_verdicts(Uniform(0.2), 0, 0, 1000)
        assert np.array_equal(log["verdict"].astype(bool), want[log["index"].astype(np.int64)])



# --- the verdict logs of a committed reference (tcx, this project's CI kernel) ------------------------
# vm/reference/verdicts-tcx.txt holds, per model and seed, a digest of the whole verdict log (index,
# verdict, state, len of every packet) and the verdicts as a hex bitmap, recorded through tcx links.
# Every hook must reproduce it byte for byte: `make test-kernels` runs this on Debian 12's kernel,
# where only clsact exists. Rewrite it (on a tcx kernel) with FECBENCH_WRITE_VERDICT_REFERENCE=1.
REFERENCE = Path(__file__).resolve().parent.parent / "vm" / "reference" / "verdicts-tcx.txt"
REFERENCE_PACKETS = 3000
REFERENCE_MODELS = {
    "uniform": Uniform(0.1),
    "ge": GilbertElliott(0.05, 0.3, 0.99, 0.2),
    "trace": Trace.load(np.random.default_rng(17).choice(REFERENCE_PACKETS, 200, replace=False)),
}


def verdict_record(log: np.ndarray) -> str:
    """One reference line's payload: packets, drops, sha256 of every field of every record, verdict bitmap."""
    digest = hashlib.sha256(b"".join(np.asarray(log[f]).astype("<u8").tobytes()
                                     for f in ("index", "verdict", "state", "len"))).hexdigest()
    bits = np.packbits(np.asarray(log["verdict"]).astype(bool)).tobytes().hex()
    return f"packets={len(log)} dropped={int(np.count_nonzero(log['verdict']))} sha256={digest} verdicts={bits}"


def test_verdict_logs_equal_the_committed_tcx_reference(line, hook):
    lines = [f"# fecbench dropper verdict logs: {REFERENCE_PACKETS} UDP datagrams h1 -> r -> h2, dropper on r's "
             "egress, stream 1; recorded with hook tcx (tests/test_dropper_netns.py)"]
    for name, model in REFERENCE_MODELS.items():
        with Dropper.attach("eth1", netns=line[1], model=model, seed=1, stream=1, filter=Filter("udp", PORT),
                            log=True, hook=hook) as d:
            for seed in (1, 2, 3):
                d.set(seed=seed)
                transfer(line, REFERENCE_PACKETS)
                log = d.verdict_log()
                assert d.stats()["log_lost"] == 0
                assert np.array_equal(log["index"], np.arange(REFERENCE_PACKETS))
                assert np.array_equal(log["verdict"].astype(bool),
                                      reference_verdicts(model, seed, 1, REFERENCE_PACKETS))
                lines.append(f"{name} seed={seed} {verdict_record(log)}")
    text = "\n".join(lines) + "\n"
    if os.environ.get("FECBENCH_WRITE_VERDICT_REFERENCE") == "1" and hook == "tcx":
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(text)
    want = REFERENCE.read_text().splitlines()
    got = text.splitlines()
    differ = [w.split(" sha256=")[0] for w, g in zip(want, got, strict=True) if w != g]
    assert not differ, f"hook {hook}: verdict logs differ from {REFERENCE.name} for: {differ}"
    assert text == REFERENCE.read_text()

def test_detach_after_the_namespace_is_gone(hook):
    ns = f"{cleanup.prefix()}{uuid.uuid4().hex[:4]}gone"
    sh("ip", "netns", "add", ns)
    cleanup.record("netns", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
        d = Dropper.attach("v0", netns=ns, model=Uniform(0.5), hook=hook)
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        cleanup.forget("netns", ns)
    d.detach()  # the interface vanished with its namespace: detach still removes the pins
    assert not d.pin.exists()


def test_clean_after_the_namespace_is_gone():
    """`fecbench clean` of a clsact dropper whose namespace is already gone: nothing left, no error."""
    ns = f"{cleanup.prefix()}{uuid.uuid4().hex[:4]}cg"
    sh("ip", "netns", "add", ns)
    cleanup.record("netns", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
        d = Dropper.attach("v0", netns=ns, model=Uniform(0.5), hook="clsact")
        entries = [e for e in json.loads(cleanup.state_file().read_text()) if e["name"] == str(d.pin)]
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        cleanup.forget("netns", ns)
    cleanup.remove_entries(entries)
    assert not d.pin.exists()
    cleanup.forget("tc_filter", str(d.pin))
    cleanup.forget("bpf_pin", str(d.pin))


@pytest.fixture
def scratch():
    """A namespace with a veth pair (v0, v1) for tests that inspect a device's qdiscs and filters."""
    ns = f"{cleanup.prefix()}{uuid.uuid4().hex[:4]}q"
    sh("ip", "netns", "add", ns)
    cleanup.record("netns", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        cleanup.forget("netns", ns)


def test_clsact_detach_removes_exactly_what_attach_created(scratch):
    ns = scratch
    # no qdisc before: attach creates clsact, detach removes it again
    with Dropper.attach("v0", netns=ns, model=Uniform(0.5), hook="clsact") as d:
        assert "clsact" in tc_show(ns, "v0", "qdisc") and "fecdrop" in tc_show(ns, "v0", "filter", "egress")
    assert "clsact" not in tc_show(ns, "v0", "qdisc")

    # a clsact qdisc and a filter that are someone else's: they stay, only our filter goes
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "v1", "clsact")
    sh("ip", "netns", "exec", ns, "tc", "filter", "add", "dev", "v1", "egress", "pref", "7", "bpf",
       "bytecode", "1,6 0 0 4294967295,")
    foreign = tc_show(ns, "v1", "filter", "egress")
    with Dropper.attach("v1", netns=ns, model=NoLoss(), hook="clsact") as d, \
            Dropper.attach("v1", netns=ns, direction="ingress", model=NoLoss(), hook="clsact") as i:
        assert hooks("v1", ns) == {"egress": 1, "ingress": 1}
        assert d.stats()["hook"] == i.stats()["hook"] == "clsact"
    assert tc_show(ns, "v1", "filter", "egress") == foreign and tc_show(ns, "v1", "filter", "ingress") == ""
    assert "clsact" in tc_show(ns, "v1", "qdisc")

    # two instances on one device: the qdisc stays while the other one still uses it
    with Dropper.attach("v0", netns=ns, model=NoLoss(), hook="clsact") as e:
        i = Dropper.attach("v0", netns=ns, direction="ingress", model=NoLoss(), hook="clsact")
        e.detach()
        assert "clsact" in tc_show(ns, "v0", "qdisc") and hooks("v0", ns) == {"egress": 0, "ingress": 1}
        i.detach()
    assert hooks("v0", ns) == {"egress": 0, "ingress": 0}


TWO_CPU_SENDER = """
import os, socket, struct, sys, time
os.sched_setaffinity(0, {int(sys.argv[3])})
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 32, 16 << 20)
first, count = int(sys.argv[1]), int(sys.argv[2])
time.sleep(max(0.0, float(sys.argv[5]) - time.time()))  # both senders start together
start = time.time()
for i in range(first, first + count):
    s.sendto(struct.pack("!Q", i) + bytes(100), ("10.0.2.1", int(sys.argv[4])))
    if i % 200 == 199:
        time.sleep(0.0005)
print(start, time.time())
"""


def test_two_cpus_through_the_attached_hook(line, hook):
    """Two senders pinned to two CPUs: the router forwards (and runs the dropper) on both at once. The
    verdict logged for each stream index still equals the reference D[i], and the index ends at the
    number of packets."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs")
    h1, r, h2 = line
    n = 20_000
    model = GilbertElliott(0.05, 0.3, 0.99, 0.2)
    with Dropper.attach("eth1", netns=r, model=model, seed=11, stream=2, filter=Filter("udp", PORT), log=True,
                        hook=hook) as d:
        rx = subprocess.Popen(["ip", "netns", "exec", h2, sys.executable, "-c", RECEIVER, str(PORT), "60"],
                              stdout=subprocess.PIPE, text=True)
        try:
            assert rx.stdout.readline().strip() == "ready"
            go = time.time() + 1.0
            senders = [subprocess.Popen(["ip", "netns", "exec", h1, sys.executable, "-c", TWO_CPU_SENDER,
                                         str(cpu * n), str(n), str(cpu), str(PORT), str(go)],
                                        stdout=subprocess.PIPE, text=True) for cpu in (0, 1)]
            spans = [tuple(map(float, s.communicate(timeout=60)[0].split())) for s in senders]
            assert all(s.returncode == 0 for s in senders)
            assert max(a for a, _ in spans) < min(b for _, b in spans), f"the senders did not overlap: {spans}"
            out, _ = rx.communicate(timeout=60)
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.wait()
        received = len(out.split())
        st, log = d.stats(), d.verdict_log()
        want = reference_verdicts(model, 11, 2, 2 * n)
        assert st["matched"] == 2 * n and st["dropped"] == want.sum() == 2 * n - received
        assert np.array_equal(log["index"], np.arange(2 * n))
        assert np.array_equal(log["verdict"].astype(bool), want)


def test_min_len_lets_shorter_frames_pass_without_an_index(line):
    # The sender's frames are 150 bytes (Ethernet 14 + IPv4 20 + UDP 8 + 108): with min_len 151 every one passes a
    # drop-everything model untouched and takes no index (ACK-only packets do not shift the data's verdicts);
    # with min_len 150 every one is the model's again.
    with Dropper.attach("eth1", netns=line[1], model=Uniform(1.0), filter=Filter("udp", PORT)) as d:
        d.set(min_len=151)
        assert len(transfer(line, 1000)) == 1000
        st = d.stats()
        assert (st["matched"], st["dropped"], st["min_len"]) == (0, 0, 151) and st["unmatched"] >= 1000
        d.set(min_len=150)
        assert len(transfer(line, 300, wait=5.0)) == 0
        st = d.stats()
        assert (st["matched"], st["dropped"], st["min_len"]) == (300, 300, 150)
        d.set()
        assert d.stats()["min_len"] == 0
        with pytest.raises(UserError, match="min_len"):
            d.set(min_len=70000)
