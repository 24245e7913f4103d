"""The capture policy (fecbench.runners.experiment.capture), without root: rules, the --capture option, which runs
keep what, compression into <db stem>.artifacts/<key>/, and the campaign's size bound."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from fecbench.inputs.errors import SpecError, UserError
from fecbench.inputs.specs import Section
from fecbench.records.status import Status
from fecbench.runners.experiment.capture import CapturePolicy, Keeper, Rule, parse_capture, parse_option


def test_rules_parse_combine_and_refuse_unknown_words() -> None:
    rule = Rule.parse("failed+outliers+sample:4", "capture.qlog", "d.toml")
    assert rule.words == {"failed", "outliers"} and rule.sample == 4 and rule.text() == "failed+outliers+sample:4"
    assert Rule.parse("off", "k", None).off
    with pytest.raises(SpecError, match="unknown capture rule 'sometimes'"):
        Rule.parse("failed+sometimes", "capture.qlog", "d.toml")
    with pytest.raises(SpecError, match="'off' combines with nothing"):
        Rule.parse("off+all", "capture.qlog", "d.toml")


def test_design_section_defaults_and_unknown_keys() -> None:
    policy = parse_capture(Section({}, "d.toml", "capture"))
    assert policy.settings() == {"qlog": "failed+outliers+sample:4", "pcap": "off", "max_mb": 500.0,
                                 "snaplen": 65535}
    with pytest.raises(SpecError, match="unknown key 'qlgo'.*did you mean 'qlog'"):
        parse_capture(Section({"qlgo": "all"}, "d.toml", "capture"))


def test_option_overrides_the_design() -> None:
    policy = CapturePolicy()
    assert parse_option("all", policy).settings()["pcap"] == "all"
    both = parse_option("qlog=off,pcap=sample:3", policy)
    assert both.qlog.off and both.pcap.sample == 3
    with pytest.raises(UserError, match="unknown kind 'pcapng'"):
        parse_option("pcapng=all", policy)


def _files(folder: Path, key: str) -> dict[str, list[Path]]:
    run = folder / key
    run.mkdir(parents=True)
    (run / "c.sqlog").write_text('{"qlog_version": "0.3"}\n' * 200)
    (run / "c.keys").write_text("CLIENT_HANDSHAKE_TRAFFIC_SECRET a b\n")
    return {"qlog": [run / "c.sqlog"], "keylog": [run / "c.keys"]}


def test_keeper_keeps_failed_outliers_and_samples_compressed(tmp_path: Path) -> None:
    root = tmp_path / "camp.artifacts"
    keys = [f"k{i:02d}" for i in range(20)]
    policy = CapturePolicy(qlog=Rule.parse("failed+outliers+sample:2", "q", None))
    keeper = Keeper(policy, root, {"k00", "k01"})
    assert all(keeper.wants("qlog", k) for k in keys) and not keeper.wants("pcap", "k00")
    kept = {}
    for i, key in enumerate(keys):
        status = Status.FIDELITY if key == "k07" else Status.OK
        dct = 1000.0 + i % 3 if key != "k15" else 9000.0
        rows, note = keeper.keep(key, "quic", 1000, status, dct, _files(tmp_path / "runs", key))
        kept[key] = rows
        assert note is None
    assert {k for k, rows in kept.items() if rows} == {"k00", "k01", "k07", "k15"}
    assert {r["why"] for r in kept["k15"]} == {"outlier"} and {r["why"] for r in kept["k07"]} == {"failed"}
    saved = root / kept["k15"][0]["path"]
    assert saved.name == "c.sqlog.gz" and gzip.decompress(saved.read_bytes()).startswith(b'{"qlog_version"')
    assert sorted(r["kind"] for r in kept["k00"]) == ["keylog", "qlog"]


def test_a_stack_whose_qlog_costs_writes_it_only_where_known_in_advance(tmp_path: Path) -> None:
    """Issue 48: a stack whose qlog writer costs more than the 2 % budget (its descriptor's measured qlog_cost)
    writes qlog in the sampled runs and under `all`, not in every run a `failed` or `outliers` rule might keep."""
    from fecbench.runners.experiment.capture import QLOG_BUDGET, CaptureArgs

    assert CaptureArgs(qlog_cost=0.056).qlog_in_advance_only and not CaptureArgs(qlog_cost=0.01).qlog_in_advance_only
    assert QLOG_BUDGET == 0.02
    policy = CapturePolicy(qlog=Rule.parse("failed+outliers+sample:2", "q", None))
    keeper = Keeper(policy, tmp_path / "a", {"k00", "k01"})
    assert keeper.wants("qlog", "k05") and not keeper.wants("qlog", "k05", in_advance_only=True)
    assert keeper.wants("qlog", "k00", in_advance_only=True)
    every = Keeper(CapturePolicy(qlog=Rule.parse("all", "q", None)), tmp_path / "b", set())
    assert every.wants("qlog", "k05", in_advance_only=True)


def test_a_descriptor_says_what_it_cannot_report(tmp_path: Path) -> None:
    from fecbench.inputs.errors import SpecError
    from fecbench.runners.experiment.descriptor import find_descriptor, load_descriptor

    tquic = find_descriptor("tquic")
    assert "lost" in tquic.unavailable_metrics and "handshake_ms" in tquic.unavailable_metrics
    text = (Path(tquic.path)).read_text().replace('unavailable = ["handshake_ms"', 'unavailable = ["handshake"')
    bad = tmp_path / "tquic" / "impl.toml"
    bad.parent.mkdir()
    bad.write_text(text)
    with pytest.raises(SpecError, match="not a typed metric: 'handshake'"):
        load_descriptor(bad)


def test_keeper_stops_at_the_campaign_bound(tmp_path: Path) -> None:
    policy = CapturePolicy(qlog=Rule.parse("all", "q", None), max_mb=1)
    keeper = Keeper(policy, tmp_path / "a", set())
    keeper.used = 999_990   # nearly full
    rows, note = keeper.keep("k", "quic", None, Status.OK, None, _files(tmp_path / "runs", "k"))
    assert rows == [] and "max_mb = 1" in note and not (tmp_path / "a" / "k").exists()
