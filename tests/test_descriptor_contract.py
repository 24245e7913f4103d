"""Descriptor contract extensions, without root: `[server] setup` commands, several metrics sources
merged in order, and `[metrics] scale` for numbers printed in other units (µs → ms)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from fecbench.inputs.errors import SpecError
from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.descriptor import load_descriptor
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics, from_patterns

ROOT = Path(__file__).resolve().parent.parent

BASE = """
[impl]
binary = "true"

[capabilities]
workloads = ["download"]

[server]
argv = ["{binary}", "--root", "{www_dir}"]
ready_delay_s = 0.1
{setup}

[client.download]
argv = ["{binary}", "https://{server_address}:{port}/{size}", "--dump", "{run_dir}/dl"]

[metrics]
{metrics}
"""


def descriptor(tmp_path: Path, *, setup: str = "", metrics: str = 'source = "measured"'):
    folder = tmp_path / "impl"
    folder.mkdir(exist_ok=True)
    path = folder / "impl.toml"
    path.write_text(textwrap.dedent(BASE).replace("{setup}", setup).replace("{metrics}", metrics))
    return load_descriptor(path)


def test_setup_commands_are_templated_argvs(tmp_path: Path) -> None:
    d = descriptor(tmp_path, setup='setup = [["openssl", "req", "-keyout", "{run_dir}/k.pem"], ["true"]]')
    assert d.server_setup == [["openssl", "req", "-keyout", "{run_dir}/k.pem"], ["true"]]
    assert render(d.server_setup[0], {"run_dir": "/r"}, {}) == ["openssl", "req", "-keyout", "/r/k.pem"]
    assert descriptor(tmp_path).server_setup == []


@pytest.mark.parametrize("setup, match", [
    ('setup = "openssl req -x509"', "must be a list"),
    ('setup = ["openssl", "req"]', "never a shell string"),
    ('setup = [["openssl", "{nowhere}"]]', r"unknown placeholder \{nowhere\}"),
])
def test_bad_setup_rejected_naming_the_key(tmp_path: Path, setup: str, match: str) -> None:
    with pytest.raises(SpecError, match=match) as err:
        descriptor(tmp_path, setup=setup)
    assert "server.setup" in str(err.value)


def test_sources_list_and_scale(tmp_path: Path) -> None:
    d = descriptor(tmp_path, metrics=textwrap.dedent("""
        source = ["measured", "regex"]
        patterns = ['median: (?P<dct_ms>[0-9.]+)', 'lost pkts: (?P<lost>[0-9]+)']
        scale = { dct_ms = 0.001 }
        """))
    assert d.metrics_sources == ["measured", "regex"] and d.metric_scale == {"dct_ms": 0.001}
    assert descriptor(tmp_path).metrics_sources == ["measured"]


@pytest.mark.parametrize("metrics, match", [
    ('source = ["measured", "psychic"]', "unknown metrics source 'psychic'"),
    ('source = ["measured", "measured"]', "distinct sources"),
    ('source = []', "distinct sources"),
    ('source = ["regex"]', "needs at least one pattern"),
    ("source = \"regex\"\npatterns = ['t (?P<dct_ms>[0-9]+)']\nscale = { rtt_ms = 2 }", "not a named group"),
    ("source = \"regex\"\npatterns = ['t (?P<dct_ms>[0-9]+)']\nscale = { dct_ms = 0 }", "number > 0"),
])
def test_bad_metrics_rejected(tmp_path: Path, metrics: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        descriptor(tmp_path, metrics=metrics)


def test_scale_applies_to_its_group_only() -> None:
    text = "median: 123456.00\nlost pkts: 3\n"
    got = from_patterns([r"median: (?P<dct_ms>[0-9.]+)", r"lost pkts: (?P<lost>[0-9]+)"], text,
                        {"dct_ms": 0.001})
    assert got == {"dct_ms": pytest.approx(123.456), "lost": 3}


def _client(tmp_path: Path, stdout: str, wall_ms: float) -> SimpleNamespace:
    out, err = tmp_path / "client.out", tmp_path / "client.err"
    out.write_text(stdout)
    err.write_text("")
    return SimpleNamespace(stdout_path=out, stderr_path=err, wall_ms=wall_ms)


def test_measured_then_regex_merge(tmp_path: Path) -> None:
    """The measured source checks the downloaded file; the later regex source's dct_ms replaces the
    client's wall time, and its other groups are added."""
    d = descriptor(tmp_path, metrics=textwrap.dedent("""
        source = ["measured", "regex"]
        download_file = "{run_dir}/dl/{size}"
        patterns = ['median: (?P<dct_ms>[0-9.]+)', 'lost pkts: (?P<lost>[0-9]+)']
        scale = { dct_ms = 0.001 }
        required = ["dct_ms", "bytes_app"]
        """))
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl" / "5000").write_bytes(b"x" * 5000)
    run = SimpleNamespace(size=5000, workload="download")
    values = {"run_dir": str(tmp_path), "size": 5000}
    client = _client(tmp_path, "median: 40500.00, p80: 1\nlost pkts: 2\n", wall_ms=90.0)
    assert collect_metrics(d, run, values, client) == {"dct_ms": pytest.approx(40.5), "bytes_app": 5000,
                                                       "lost": 2}
    # A short file fails the run even though the client's output looks fine.
    (tmp_path / "dl" / "5000").write_bytes(b"x" * 4999)
    with pytest.raises(MetricsError, match="downloaded 4999 bytes, expected 5000"):
        collect_metrics(d, run, values, client)
    (tmp_path / "dl" / "5000").write_bytes(b"x" * 5000)
    with pytest.raises(MetricsError, match="no metric pattern matched"):
        collect_metrics(d, run, values, _client(tmp_path, "connection refused\n", wall_ms=3.0))


def test_tquic_descriptor_renders_multipath_arguments() -> None:
    d = load_descriptor(ROOT / "quic-impls" / "tquic" / "impl.toml")
    assert d.multipath and d.workloads == ["download"]
    args = d.validate_args({"multipath": "on", "scheduler": "redundant", "cc": "cubic"}, "design.toml", "impl")
    values = {"binary": "/s", "client_binary": "/c", "dir": "/d", "server_address": "10.0.9.2",
              "client_address": "10.0.1.1", "client_addresses": "10.0.1.1,10.0.2.1", "port": 4433,
              "size": 1000, "run_dir": "/r", "www_dir": "/r/www", "timeout_s": "30"}
    lists = d.arg_lists(args, values)
    client = render(d.client_argv["download"], values, lists)
    assert "https://10.0.9.2:4433/1000" in client
    assert client[client.index("--local-addresses") + 1] == "10.0.1.1,10.0.2.1"
    assert "--enable-multipath" in client and "--enable-multipath" in render(d.server_argv, values, lists)
    assert client[client.index("--multipath-algor") + 1] == "redundant"
    single = render(d.client_argv["download"], values, d.arg_lists(d.validate_args({}, "design.toml", "impl"), values))
    assert "--enable-multipath" not in single
    assert single[single.index("--local-addresses") + 1] == "10.0.1.1"
    with pytest.raises(SpecError, match="unknown value 'fastest'"):
        d.validate_args({"scheduler": "fastest"}, "design.toml", "impl")


def test_files_extend_the_patterns_text(tmp_path: Path) -> None:
    """`[metrics] files`: templates of files in the run folder whose text the patterns read after the
    client's output (here the server's output kept by the runner); a missing file adds nothing."""
    d = descriptor(tmp_path, metrics=textwrap.dedent("""
        source = "regex"
        files = ["{run_dir}/server.out", "{run_dir}/nowhere.log"]
        patterns = ['^client: (?P<dct_ms>[0-9]+)', '^server: sent (?P<packets_sent>[0-9]+)']
        required = ["dct_ms", "packets_sent"]
        """))
    assert d.metric_files == ["{run_dir}/server.out", "{run_dir}/nowhere.log"]
    (tmp_path / "server.out").write_text("server: sent 321\n")
    run = SimpleNamespace(size=None, workload="download")
    values = {"run_dir": str(tmp_path), "size": ""}
    assert collect_metrics(d, run, values, _client(tmp_path, "client: 42\n", 50.0)) == {"dct_ms": 42,
                                                                                      "packets_sent": 321}
    (tmp_path / "server.out").unlink()
    with pytest.raises(MetricsError, match="missing required metric.*packets_sent"):
        collect_metrics(d, run, values, _client(tmp_path, "client: 42\n", 50.0))
    with pytest.raises(MetricsError, match="matched the client's output or server.out or nowhere.log"):
        collect_metrics(d, run, values, _client(tmp_path, "nothing\n", 50.0))


@pytest.mark.parametrize("metrics, match", [
    ("source = \"measured\"\nfiles = [\"{run_dir}/server.out\"]", "only the regex source reads files"),
    ("source = \"regex\"\npatterns = ['t (?P<dct_ms>[0-9]+)']\nfiles = [3]", "must be a file template"),
    ("source = \"regex\"\npatterns = ['t (?P<dct_ms>[0-9]+)']\nfiles = [\"{log}\"]", r"unknown placeholder \{log\}"),
])
def test_bad_files_rejected(tmp_path: Path, metrics: str, match: str) -> None:
    with pytest.raises(SpecError, match=match) as err:
        descriptor(tmp_path, metrics=metrics)
    assert "metrics.files" in str(err.value)


def test_error_group_fails_the_run_with_its_text(tmp_path: Path) -> None:
    """A client that exits 0 whatever happened: its own account of a failure (group `error`, kept as
    text) fails the run, even when other metrics matched; without it the run is ok."""
    d = descriptor(tmp_path, metrics=textwrap.dedent("""
        source = "regex"
        patterns = ['^ERROR: (?P<error>.*)$', '^took (?P<dct_ms>[0-9]+) ms']
        """))
    run = SimpleNamespace(size=None, workload="download")
    values = {"run_dir": str(tmp_path), "size": ""}
    failed = _client(tmp_path, "took 12 ms\nERROR: handshake timed out \n", 50.0)
    with pytest.raises(MetricsError, match=r"^the implementation reported an error: handshake timed out$"):
        collect_metrics(d, run, values, failed)
    assert collect_metrics(d, run, values, _client(tmp_path, "took 12 ms\n", 50.0)) == {"dct_ms": 12}
    assert from_patterns([r"^ERROR: (?P<error>.*)$"], "ERROR: 3.5\n") == {"error": "3.5"}  # text, not a number


# --- literal braces (quic-impls/README.md, "Literal braces") ---------------------------------------------------

BRACES = """
[impl]
binary = "true"
version = ["{binary}", "--format", "{{{{Version}}}}"]

[capabilities]
workloads = ["download"]

[server]
argv = ["{binary}", "--tag", "{{Version}}", "--json", '{{"port": {port}}}', "}}", "{{server_args}}", "{server_args}"]
env = { TEMPLATE = "{{run_dir}}={run_dir}" }

[client.download]
argv = ["{binary}", "{server_address}", "{client_args}"]

[args.fec]
argv = ["--fec={{{value}}}"]
to = "server"

[capture]
qlog = { server = ["--qlog={{host}}:{qlog_dir}"] }

[metrics]
source = "measured"
"""


def _braces(tmp_path: Path, text: str = BRACES):
    folder = tmp_path / "braces"
    folder.mkdir(exist_ok=True)
    (folder / "impl.toml").write_text(textwrap.dedent(text))
    return load_descriptor(folder / "impl.toml")


def test_doubled_braces_reach_the_argv_as_single_ones(tmp_path: Path) -> None:
    """`{{` and `}}` are one literal brace each wherever a template is formatted (argv, env, an argument's
    fragment, a capture fragment, the version command), beside real placeholders; a doubled `{{server_args}}`
    is the literal text, not the arguments' expansion."""
    d = _braces(tmp_path)
    lists = d.arg_lists({"fec": "rs"})
    assert lists["server_args"] == ["--fec={rs}"]
    assert render(d.server_argv, {"binary": "/b", "port": 4433}, lists) == [
        "/b", "--tag", "{Version}", "--json", '{"port": 4433}', "}", "{server_args}", "--fec={rs}"]
    assert {k: v.format_map({"run_dir": "/r"}) for k, v in d.server_env.items()} == {"TEMPLATE": "{run_dir}=/r"}
    assert d.capture.fragments(True, {"qlog_dir_server": "/q"})["server_args"] == ["--qlog={host}:/q"]
    assert render(d.version_argv, {"binary": "/b"}, {}) == ["/b", "--format", "{{Version}}"]


@pytest.mark.parametrize("bad, shown", [
    ('"${Version}"', r"unknown placeholder \{Version\} in '\$\{Version\}' \(if it is meant literally, double its "
                     r"braces: '\{\{Version\}\}' passes '\{Version\}'\)"),
    ('"{"', r"Single '\{' encountered .*\(a literal brace is written doubled: \{\{ for \{, \}\} for \}\)"),
    ('"}"', r"Single '\}' encountered .*\(a literal brace is written doubled: \{\{ for \{, \}\} for \}\)"),
    ('"--tag={Version"', r"expected '\}' before end of string .*a literal brace is written doubled"),
    ('"{{Version}"', r"Single '\}' encountered .*a literal brace is written doubled"),
])
def test_a_lone_brace_or_unknown_placeholder_is_refused_naming_the_escape(tmp_path: Path, bad: str,
                                                                          shown: str) -> None:
    text = BRACES.replace('"--tag", "{{Version}}"', f'"--tag", {bad}')
    with pytest.raises(SpecError, match=shown) as err:
        _braces(tmp_path, text)
    assert "server.argv" in str(err.value)


@pytest.mark.parametrize("where, old, new", [
    ("server.env.TEMPLATE", '"{{run_dir}}={run_dir}"', '"{run_dir}={run_dir"'),
    ("capture.qlog.server", '"--qlog={{host}}:{qlog_dir}"', '"--qlog={host}:{qlog_dir}"'),
    ("args.fec.argv", '"--fec={{{value}}}"', '"--fec={{value}"'),
])
def test_every_formatted_template_is_checked_before_the_campaign(tmp_path: Path, where: str, old: str,
                                                                  new: str) -> None:
    """The env, an argument's fragment and the capture fragments are formatted like the argvs, so a brace there
    is refused at load time too (the capture fragments were not checked before: a lone brace failed mid-run)."""
    with pytest.raises(SpecError, match="brace") as err:
        _braces(tmp_path, BRACES.replace(old, new))
    assert where in str(err.value)


def test_the_cli_says_it_in_one_message_without_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "impls" / "braces"
    folder.mkdir(parents=True)
    (folder / "impl.toml").write_text(BRACES.replace('"--tag", "{{Version}}"', '"--tag", "${Version}"'))
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "fecbench"), "impls", "check", "braces"], capture_output=True,
                         text=True, timeout=60, check=False,
                         env={**os.environ, "FECBENCH_IMPLS": str(tmp_path / "impls"), "COLUMNS": "300"})
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "Traceback" not in text, text
    assert "double its braces: '{{Version}}' passes '{Version}'" in text and "impl.toml" in text, text
