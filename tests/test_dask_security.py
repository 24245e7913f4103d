"""Distributed campaigns let no one in: local:N speaks TLS with per-campaign credentials; a tls:// cluster
needs certificates from the campaign CA; plain tcp:// to another host is refused; an endpoint that is not
a Dask scheduler is bad input (exit 2), never a traceback or a hang. No test sends a packet off this
machine: refusals of remote addresses are tested at the address check, before any connection."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fecbench.inputs.errors import UserError
from tests.helpers.campaign import ROOT, fecbench, rows
from tests.helpers.campaign import smoke_copy as _smoke_copy

pytest.importorskip("distributed", reason="the cluster extra is not installed")

from fecbench.runners.executors import dask_certs, dask_security  # noqa: E402
from fecbench.runners.executors.dask_security import CampaignSecurity, TlsFiles  # noqa: E402

SMOKE = str(ROOT / "designs" / "smoke.toml")
DASK = str(Path(sys.executable).parent / "dask")


# --- the address policy (pure) ---------------------------------------------------------------------

@pytest.mark.parametrize("address", ["tcp://192.0.2.1:8786", "tcp://sched.example.org:8786", "tcp://[2001:db8::1]:8786",
                                     "tcp://0.0.0.0:8786"])
def test_plain_tcp_to_another_host_is_refused(address: str) -> None:
    with pytest.raises(UserError, match="--insecure"):
        dask_security.check_policy(address, insecure=False, tls=TlsFiles())
    dask_security.check_policy(address, insecure=True, tls=TlsFiles())  # allowed, deliberately


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tcp://localhost:8786", "tcp://[::1]:8786",
                                     "tls://10.0.0.1:8786"])
def test_loopback_tcp_and_any_tls_pass_the_policy(address: str) -> None:
    dask_security.check_policy(address, insecure=False, tls=TlsFiles())


def test_tls_options_need_a_tls_address() -> None:
    with pytest.raises(UserError, match="tls://"):
        dask_security.check_policy("tcp://127.0.0.1:8786", False, TlsFiles(ca_file=Path("ca.pem")))


def test_refusal_happens_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    out = fecbench("run", SMOKE, "--db", str(db), "--dask", "tcp://192.0.2.1:8786")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--insecure" in out.stderr and "fecbench dask certs" in out.stderr and "Traceback" not in out.stderr
    assert not db.exists()


def test_tls_address_without_credentials_is_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    out = fecbench("run", SMOKE, "--db", str(db), "--dask", "tls://127.0.0.1:8786")
    assert out.returncode == 2 and "--tls-ca-file" in out.stderr and "Traceback" not in out.stderr
    assert not db.exists()


# --- certificates -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tls") / "campaign"
    dask_certs.make(out, "127.0.0.1", ["localhost"])
    return out


def _cert(path: Path):  # noqa: ANN202
    from cryptography import x509

    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certs_are_issued_by_the_campaign_ca_and_keys_are_private(certs: Path, tmp_path: Path) -> None:
    ca = _cert(certs / "ca.pem")
    for host in ("127.0.0.1", "localhost", "coordinator"):
        assert dask_security.issued_by(_cert(certs / f"{host}.pem"), ca)
        assert (certs / f"{host}.key").stat().st_mode & 0o777 == 0o600
    assert (certs / "ca.key").stat().st_mode & 0o777 == 0o600 and certs.stat().st_mode & 0o777 == 0o700
    other = tmp_path / "other"
    dask_certs.make(other, "127.0.0.1", ["localhost"])
    assert not dask_security.issued_by(_cert(other / "localhost.pem"), ca)
    campaign = CampaignSecurity(security=None, ca_pem=(certs / "ca.pem").read_text())
    assert dask_security.check_worker_certificate(campaign, {"cert_pem": (certs / "localhost.pem").read_text()}) is None
    why = dask_security.check_worker_certificate(campaign, {"cert_pem": (other / "localhost.pem").read_text()})
    assert why and "not issued by the campaign's CA" in why
    assert "no TLS certificate" in (dask_security.check_worker_certificate(campaign, {"cert_pem": None}) or "")


def test_certs_command_prints_the_recipe_and_never_overwrites(tmp_path: Path) -> None:
    out = fecbench("dask", "certs", str(tmp_path / "c"), "--scheduler", "10.0.0.1", "--worker", "w1",
                   "--worker", "w2", "--port", "9786")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert ("dask scheduler --host 10.0.0.1 --port 9786 --no-dashboard --dashboard-address 127.0.0.1:8787 "
            "--tls-ca-file /etc/fecbench/tls/ca.pem --tls-cert /etc/fecbench/tls/10.0.0.1.pem") in text
    assert "dask worker tls://10.0.0.1:9786 --host w1" in text and "--tls-cert /etc/fecbench/tls/w2.pem" in text
    assert "fecbench run designs/smoke.toml --dask tls://10.0.0.1:9786" in text
    again = fecbench("dask", "certs", str(tmp_path / "c"), "--scheduler", "10.0.0.1", "--worker", "w1")
    assert again.returncode == 2 and "not empty" in again.stderr


def test_a_certificate_from_another_ca_is_refused_before_connecting(certs: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    dask_certs.make(other, "127.0.0.1", ["localhost"])
    with pytest.raises(UserError, match="not issued by the CA"):
        dask_security.for_address("tls://127.0.0.1:8786", False,
                                  TlsFiles(certs / "ca.pem", other / "coordinator.pem", other / "coordinator.key"))


# --- endpoints that are not Dask schedulers --------------------------------------------------------

@contextlib.contextmanager
def _loopback_server(behaviour: str) -> Iterator[int]:
    """A loopback TCP server: 'banner' greets like an SSH server; 'silent' accepts and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)
            if behaviour == "banner":
                with contextlib.suppress(OSError):
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in conns:
            conn.close()
        listener.close()


@pytest.mark.parametrize("behaviour,message", [("banner", "sent b'SSH-2.0-OpenSSH"),
                                               ("silent", "said nothing within")])
def test_probe_names_what_it_found(behaviour: str, message: str) -> None:
    with _loopback_server(behaviour) as port:
        with pytest.raises(UserError, match=message):
            dask_security.probe(f"tcp://127.0.0.1:{port}", CampaignSecurity(security=None), timeout=1.0)


@pytest.mark.require_root
@pytest.mark.parametrize("behaviour", ["banner", "silent"])
def test_run_against_a_service_that_is_not_dask_exits_2(behaviour: str, tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    with _loopback_server(behaviour) as port:
        out = fecbench("run", SMOKE, "--db", str(db), "--dask", f"tcp://127.0.0.1:{port}", timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not a Dask scheduler" in out.stderr or "not one" in out.stderr
    assert "Traceback" not in out.stderr and not db.exists()


# --- nobody else gets a task run ----------------------------------------------------------------------

# Run as an unprivileged user against one port: an HTTP request for Dask's health route, then a Dask client
# over plain TCP and over TLS with credentials of its own; print what it got (a task's uid, an HTTP status).
ATTACK = textwrap.dedent("""
    import json, logging, os, sys, urllib.error, urllib.request
    logging.disable(logging.CRITICAL)
    from distributed import Client, Security
    port = int(sys.argv[1])
    try:
        print(json.dumps({"http": urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3).status}),
              flush=True)
        os._exit(0)
    except urllib.error.HTTPError:  # an HTTP server that serves nothing here (and is no Dask comm)
        os._exit(0)
    except Exception:
        pass
    for scheme, security in (("tcp", None), ("tls", Security.temporary())):
        try:
            with Client(f"{scheme}://127.0.0.1:{port}", timeout=3, security=security) as client:
                print(json.dumps({"task_uid": client.submit(os.geteuid, pure=False).result(timeout=10)}), flush=True)
        except Exception:
            pass
    os._exit(0)
""")
ATTACK_LIMIT_S = 40  # a Dask client reading a non-Dask answer (an HTTP port's) can hang: it got nothing


def _attack(ports: list[int]) -> dict[str, dict[str, int | None]]:
    """One attacker process per port, in parallel, as user nobody: what each port gave it."""
    procs = {port: subprocess.Popen([sys.executable, "-c", ATTACK, str(port)], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, user="nobody", group="nogroup",
                                    env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"}, cwd="/tmp")
             for port in ports}
    found: dict[str, dict[str, int | None]] = {}
    deadline = time.monotonic() + ATTACK_LIMIT_S
    for port, proc in procs.items():
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        found[str(port)] = {"task_uid": None, "http": None}
        for line in out.splitlines():
            found[str(port)].update(json.loads(line))
    return found


def _listening_ports(pids: set[int]) -> list[int]:
    """TCP ports listened on by these processes (from /proc: socket inodes of their fds)."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # state LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(set(ports))


def _tree(pid: int) -> set[int]:
    found, todo = {pid}, [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    found.add(int(child))
                    todo.append(int(child))
    return found


@pytest.mark.require_root
@pytest.mark.slow
def test_an_open_cluster_is_detected_by_the_attack() -> None:
    """The attack is able to fail the test: on an unauthenticated local cluster it gets a task run."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        port = int(cluster.scheduler_address.rsplit(":", 1)[1])
        found = _attack([port, cluster.scheduler.http_server.port])
        assert found[str(port)]["task_uid"] == 0  # user nobody had a task run as root
        assert found[str(cluster.scheduler.http_server.port)]["http"] == 200


@pytest.mark.require_root
@pytest.mark.slow
def test_local_campaign_lets_no_one_in(tmp_path: Path) -> None:
    design = _smoke_copy(tmp_path)  # long enough to try every port while it runs; stopped with Ctrl-C after
    design.write_text(design.read_text().replace("repetitions = 1", "repetitions = 30"))
    db = tmp_path / "smoke.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db),
                             "--dask", "local:2"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        ports: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(Exception):
                if rows(db, "SELECT COUNT(*) AS n FROM runs WHERE status = 'ok'")[0]["n"] >= 1:
                    ports = _listening_ports(_tree(proc.pid))
                    break
            time.sleep(0.1)
        assert len(ports) >= 5, f"scheduler + 2 workers + 2 nannies expected, listening: {ports}"
        results = _attack(ports)
        still_running = proc.poll() is None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert still_running, f"the campaign ended before every port was tried: {stderr[-2000:]}"
    assert results == {str(p): {"task_uid": None, "http": None} for p in ports}, f"let in: {results}"
    assert proc.returncode == 130, stderr
    host = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])
    assert host["dask_security"]["transport"] == "tls" and host["dask_security"]["authenticated"]


# --- a TLS cluster on loopback ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _cluster(certs: Path | None, worker_certs: Path | None = None, ca_file: Path | None = None) -> Iterator[str]:
    """A scheduler and a worker process with 2 workers on loopback, started as `fecbench dask certs` says
    (the workers' certificates from `worker_certs`, every node trusting `ca_file`, by default the
    campaign's); plain TCP without `certs`."""
    port = _free_port()

    def tls(name: str, folder: Path | None = certs) -> list[str]:
        if certs is None or folder is None:
            return []
        return ["--tls-ca-file", str(ca_file or certs / "ca.pem"), "--tls-cert", str(folder / f"{name}.pem"),
                "--tls-key", str(folder / f"{name}.key")]

    scheme = "tcp" if certs is None else "tls"
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard",
                               "--dashboard-address", "127.0.0.1:0", *tls("127.0.0.1")], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        procs.append(subprocess.Popen([DASK, "worker", f"{scheme}://127.0.0.1:{port}", "--host", "127.0.0.1",
                                       "--nworkers", "2", "--nthreads", "1", "--no-dashboard",
                                       "--dashboard-address", "127.0.0.1:0", *tls("localhost", worker_certs or certs)],
                                      cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.require_root
@pytest.mark.slow
def test_tls_cluster_runs_the_smoke_design_and_refuses_strangers(certs: Path, tmp_path: Path) -> None:
    db = tmp_path / "smoke.sqlite"
    coordinator = ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "coordinator.pem"),
                   "--tls-key", str(certs / "coordinator.key")]
    with _cluster(certs) as address:
        out = fecbench("run", SMOKE, "--db", str(db), "--dask", address, *coordinator, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        port = int(address.rsplit(":", 1)[1])
        assert _attack([port])[str(port)]["task_uid"] is None
        other = tmp_path / "other"
        dask_certs.make(other, "127.0.0.1", ["localhost"])
        stranger = fecbench("run", SMOKE, "--db", str(tmp_path / "s.sqlite"), "--dask", address,
                            "--tls-ca-file", str(other / "ca.pem"), "--tls-cert", str(other / "coordinator.pem"),
                            "--tls-key", str(other / "coordinator.key"), timeout=60)
    statuses = [r["status"] for r in rows(db, "SELECT status FROM runs")]
    assert statuses == ["ok"] * 16
    host = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])
    assert host["dask_security"]["authenticated"] and host["dask_security"]["transport"] == "tls"
    assert stranger.returncode == 2 and "TLS handshake failed" in stranger.stderr, stranger.stderr
    assert not (tmp_path / "s.sqlite").exists()
    status = fecbench("status", str(db))
    assert "over TLS" in status.stdout


@pytest.mark.require_root
@pytest.mark.slow
def test_a_worker_with_a_certificate_from_another_ca_is_refused(certs: Path, tmp_path: Path) -> None:
    """A scheduler that trusts more than the campaign's CA lets a foreign worker join: the campaign's own
    check refuses it (exit 2, nothing written)."""
    other = tmp_path / "other"
    dask_certs.make(other, "127.0.0.1", ["localhost"])
    bundle = tmp_path / "both.pem"
    bundle.write_text((certs / "ca.pem").read_text() + (other / "ca.pem").read_text())
    db = tmp_path / "x.sqlite"
    with _cluster(certs, worker_certs=other, ca_file=bundle) as address:
        out = fecbench("run", SMOKE, "--db", str(db), "--dask", address, "--tls-ca-file", str(certs / "ca.pem"),
                       "--tls-cert", str(certs / "coordinator.pem"), "--tls-key", str(certs / "coordinator.key"),
                       timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "was not issued by the campaign's CA" in out.stderr and "Traceback" not in out.stderr
    assert not db.exists()


@pytest.mark.require_root
@pytest.mark.slow
def test_an_unauthenticated_campaign_is_recorded_and_shown(tmp_path: Path) -> None:
    db = tmp_path / "smoke.sqlite"
    with _cluster(None) as address:
        out = fecbench("run", SMOKE, "--db", str(db), "--dask", address, "--insecure", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "unauthenticated" in out.stdout
    security = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])["dask_security"]
    assert security == {"transport": "tcp", "authenticated": False, "insecure": True, "why": "--insecure given"}
    status = fecbench("status", str(db))
    assert "UNAUTHENTICATED" in status.stdout and "--insecure given" in status.stdout
