"""XQUIC plugged in by its descriptor alone (quic-impls/xquic/impl.toml), without root: the argv it
renders for each workload and argument, and the metrics its patterns read from the test programs'
output (lines as the patched programs print them; the real programs run in tests/test_xquic_campaign.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fecbench.inputs.errors import SpecError
from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.descriptor import load_descriptor
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics

ROOT = Path(__file__).resolve().parent.parent
XQUIC = load_descriptor(ROOT / "quic-impls" / "xquic" / "impl.toml")
VALUES = {"binary": "/s", "client_binary": "/c", "dir": "/d", "server_address": "10.0.9.2",
          "client_address": "10.0.1.1", "client_addresses": "10.0.1.1,10.0.2.1", "server_addresses": "10.0.9.2",
          "port": 4433, "size": 50000, "run_dir": "/r", "www_dir": "/r/www", "timeout_s": "30"}

# What the patched programs print for a 50 kB download (client: receiver; server: sender) and a 30 kB upload.
DOWNLOAD_CLIENT = """option url :https://fecbench/50000
[rr_benchmark]|request_time:61234|request_size:0|response_size:50000|
[fecbench]|role:receiver|packets_sent:9|packets_received:52|lost:0|retransmitted:0|probes:0|srtt_us:\
20451|repair_sent:0|repair_received:11|recovered:3|app_sent:0|app_received:50000|handshake_us:21007|\
dct_us:40117|path1_sent:9|path1_received:52|path1_app_sent:129|path1_app_received:53404|path1_standb\
y:0|
"""
DOWNLOAD_SERVER = """[fecbench]|listening|10.0.9.2:4433|
[fecbench]|role:sender|packets_sent:57|packets_received:10|lost:4|retransmitted:1|probes:1|srtt_us:2\
0873|repair_sent:12|repair_received:0|recovered:0|app_sent:50000|app_received:0|path1_sent:40|path1_\
received:10|path1_app_sent:41000|path1_app_received:129|path1_standby:0|path2_sent:17|path2_received\
:0|path2_app_sent:13000|path2_app_received:0|path2_standby:1|
"""
UPLOAD_CLIENT = """\
[fecbench]|role:sender|packets_sent:40|packets_received:12|lost:2|retransmitted:2|probes:0|srtt_us:1\
9000|repair_sent:7|repair_received:0|recovered:0|app_sent:30000|app_received:0|handshake_us:20100|dc\
t_us:55000|path1_sent:40|path1_received:12|path1_app_sent:31000|path1_app_received:90|path1_standby:\
0|
"""
UPLOAD_SERVER = """[fecbench]|listening|10.0.9.2:4433|
[fecbench]|role:receiver|packets_sent:12|packets_received:38|lost:0|retransmitted:0|probes:0|srtt_us\
:18000|repair_sent:0|repair_received:6|recovered:2|app_sent:0|app_received:30000|path1_sent:12|path1\
_received:38|path1_app_sent:90|path1_app_received:31000|path1_standby:0|
"""
NO_SERVER_CLIENT = """[fecbench]|error:connection closed before the last response completed \
(handshake not completed, xquic error 256)|
"""


def argv(workload: str, **args: str) -> tuple[list[str], list[str]]:
    lists = XQUIC.arg_lists(XQUIC.validate_args(args, "design.toml", "impl"), VALUES)
    return render(XQUIC.server_argv, VALUES, lists), render(XQUIC.client_argv[workload], VALUES, lists)


def test_capabilities() -> None:
    assert XQUIC.workloads == ["download", "upload"] and XQUIC.multipath
    assert XQUIC.codes == ["none", "xor", "rs", "pm"]


def test_download_argv_fec_both_ends() -> None:
    server, client = argv("download", fec="rs", fec_rate="0.5", fec_block="10", initial_window="32")
    for side in (server, client):
        assert side[side.index("--fec") + 1] == "rs" and side[side.index("--fec_rate") + 1] == "0.5"
        assert side[side.index("--fec_block") + 1] == "10" and side[side.index("--init_cwnd") + 1] == "32"
        assert side[side.index("-c") + 1] == "c"  # cubic unless the design says otherwise
    assert client[client.index("-u") + 1] == "https://fecbench/50000" and "-G" in client
    assert "--size_from_path" in server and server[server.index("-a") + 1] == "10.0.9.2"
    assert "-1" in client and "--exit_when_done" in client and "-M" not in client


def test_defaults_no_fec_single_path() -> None:
    server, client = argv("download")
    assert server[server.index("--fec") + 1] == "none" and client[client.index("--fec") + 1] == "none"
    assert "-i" not in client and "-y" not in client and "-C" not in client


def test_upload_posts_size_to_zero() -> None:
    _, client = argv("upload", fec="xor", fec_block="4")
    assert client[client.index("-s") + 1] == "50000" and client[client.index("-u") + 1] == "https://fecbench/0"
    assert "-G" not in client


def test_multipath_binds_each_address() -> None:
    server, client = argv("download", multipath="on", scheduler="backup")
    assert client[client.index("-M"):client.index("-M") + 3] == ["-M", "-i", "10.0.1.1,10.0.2.1"]
    assert "-y" in client and "-y" in server and "-M" in server


@pytest.mark.parametrize("args, match", [
    ({"fec": "rlc"}, "unknown value 'rlc'"),
    ({"fec_block": "49"}, "does not match"),
    ({"fec_rate": "0"}, "does not match"),
    ({"fec_rate": "1.5"}, "does not match"),
    ({"cc": "vegas"}, "unknown value 'vegas'"),
])
def test_bad_arguments_refused(args: dict[str, str], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        XQUIC.validate_args(args, "design.toml", "impl")


def test_multipath_needs_two_paths() -> None:
    with pytest.raises(SpecError, match="multipath"):
        XQUIC.check_paths({"multipath": "on"}, 1, "design.toml", "impl")


def collect(tmp_path: Path, workload: str, client_out: str, server_out: str, size: int) -> dict:
    (tmp_path / "client.out").write_text(client_out)
    (tmp_path / "client.err").write_text("")
    (tmp_path / "server.out").write_text(server_out)
    client = SimpleNamespace(stdout_path=tmp_path / "client.out", stderr_path=tmp_path / "client.err", wall_ms=900.0)
    run = SimpleNamespace(size=size, workload=workload)
    return collect_metrics(XQUIC, run, {**VALUES, "run_dir": str(tmp_path), "size": size}, client)


def test_download_metrics_sender_is_the_server(tmp_path: Path) -> None:
    m = collect(tmp_path, "download", DOWNLOAD_CLIENT, DOWNLOAD_SERVER, 50000)
    assert m["dct_ms"] == pytest.approx(40.117) and m["handshake_ms"] == pytest.approx(21.007)
    assert m["request_time_ms"] == pytest.approx(61.234) and m["bytes_app"] == 50000
    # The sender's counters come from the server's line, what FEC rebuilt from the client's.
    assert (m["packets_sent"], m["lost"], m["retransmitted_packets"], m["repair_sent"]) == (57, 4, 1, 12)
    assert (m["repair_received"], m["recovered"]) == (11, 3) and m["rtt_ms"] == pytest.approx(20.873)
    assert (m["sender_path1_sent"], m["sender_path2_sent"], m["receiver_path1_received"]) == (40, 17, 52)


def test_upload_metrics_sender_is_the_client(tmp_path: Path) -> None:
    m = collect(tmp_path, "upload", UPLOAD_CLIENT, UPLOAD_SERVER, 30000)
    assert m["bytes_app"] == 30000 and m["dct_ms"] == pytest.approx(55.0)  # what the server read
    assert (m["packets_sent"], m["repair_sent"], m["recovered"]) == (40, 7, 2)


def test_failure_reported_by_the_client_fails_the_run(tmp_path: Path) -> None:
    """The XQUIC client exits 0 without a server: its error line is the run's reason."""
    with pytest.raises(MetricsError, match="reported an error: connection closed before the last response "
                                           r"completed \(handshake not completed"):
        collect(tmp_path, "download", NO_SERVER_CLIENT, "", 50000)
    # A response cut short never prints dct_us: the run fails rather than passing with partial data.
    with pytest.raises(MetricsError, match="missing required metric"):
        collect(tmp_path, "download", "", DOWNLOAD_SERVER, 50000)
    with pytest.raises(MetricsError, match="bytes_app = 50000, expected the requested 60000"):
        collect(tmp_path, "download", DOWNLOAD_CLIENT, DOWNLOAD_SERVER, 60000)


def test_fec_on_two_paths_implies_the_backup_fec_scheduler_and_refuses_another() -> None:
    """Issue 72 items 5 and 7: XQUIC's test programs schedule multipath FEC with backup_fec whatever `scheduler`
    says; the descriptor states it ([[implies]]), the dry run and the record show it, a design writing another
    scheduler beside FEC is refused, and the argv (and so the keys) stay as written."""
    from fecbench.runners.experiment import implied

    fec_mp = XQUIC.validate_args({"fec": "rs", "multipath": "on"}, "design.toml", "impl")
    made = implied.implied(XQUIC.implies, fec_mp)
    assert fec_mp["scheduler"] == "minrtt"
    assert made["scheduler"]["value"] == "backup_fec" and "fec xor/rs/pm, multipath on" in made["scheduler"]["why"]
    assert "scheduler=backup_fec [implied: XQUIC's test programs" in implied.shown(XQUIC.implies, fec_mp)
    for args in ({"fec": "rs"}, {"fec": "none", "multipath": "on"}, {"multipath": "on", "scheduler": "backup"}):
        filled = XQUIC.validate_args(args, "design.toml", "impl")
        assert implied.implied(XQUIC.implies, filled) == {}, args   # one path, or no FEC: the scheduler as written
    with pytest.raises(SpecError, match=r"impl\.scheduler.*does not use scheduler = 'backup' with fec "
                                        r"xor/rs/pm, multipath on: it uses 'backup_fec'"):
        XQUIC.validate_args({"fec": "xor", "multipath": "on", "scheduler": "backup"}, "design.toml", "impl")
    server, client = argv("download", fec="rs", multipath="on")   # the programs choose it: no argument says so
    assert "-y" not in server + client and client[client.index("-M"):client.index("-M") + 3] == \
        ["-M", "-i", "10.0.1.1,10.0.2.1"]


def test_an_implication_names_declared_arguments_only(tmp_path: Path) -> None:
    text = (ROOT / "quic-impls" / "xquic" / "impl.toml").read_text()
    bad = tmp_path / "xquic" / "impl.toml"
    bad.parent.mkdir()
    bad.write_text(text.replace('set = { scheduler = "backup_fec" }', 'set = { schedular = "backup_fec" }'))
    with pytest.raises(SpecError, match=r"implies\[0\]\.set.*'schedular' is none"):
        load_descriptor(bad)
    bad.write_text(text.replace('when = { fec = ["xor", "rs", "pm"], multipath = ["on"] }', 'when = { fec = "rs" }'))
    with pytest.raises(SpecError, match=r"implies\[0\]\.when.*a list of the values"):
        load_descriptor(bad)
