"""A catalogue of plausible mistakes, as a new user makes them: each one is refused before anything runs
(`fecbench run X --dry-run`: exit 2, a message naming the problem, its file:line where it is in a file,
the nearest valid name where there is one, no traceback, nothing written), and the positive twins run
the experiment as written (a factor in seconds is applied in ms)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.campaign import FAKE_DIR, ROOT, fecbench
from tests.helpers.designs import UNIFORM_P, design_text

SINGLE = ROOT / "topologies" / "single.toml"
MULTIPATH = ROOT / "topologies" / "multipath.toml"
SCHEDULE = ROOT / "topologies" / "schedules" / "starlink-handover.toml"

BASE = design_text("mistakes", seed=3, timeout_s=30, settings={"impl_dirs": [FAKE_DIR]}, points=2,
                   factors={"bw": {"low": 5, "high": 20, "unit": "Mbit/s"}, "owd": {"low": 2, "high": 5, "unit": "ms"},
                            "p": (0.01, 0.05)},
                   loss=UNIFORM_P, impls=[("fake", "a", {"behave": "ok"})])

#: (id, (old, new) replacements of BASE or text appended, what the message must say)
MISTAKES: list[tuple[str, list[tuple[str, str]], list[str]]] = [
    ("factor typo delay for owd",
     [('owd = { low = 2, high = 5, unit = "ms" }', 'delay = { levels = [300.0], unit = "ms" }')],
     [":14: space.factors.delay", "unknown factor 'delay'", "nothing reads it", "did you mean 'owd'"]),
    ("factor typo bww", [("bw = {", "bww = {")], ["unknown factor 'bww'", "did you mean 'bw'"]),
    ("owd in Mbit/s", [('unit = "ms"', 'unit = "Mbit/s"')], ["space.factors.owd", "unit 'Mbit/s' is a rate",
                                                                  "time (ms)"]),
    ("bw in ms", [('unit = "Mbit/s"', 'unit = "ms"')], ["space.factors.bw", "unit 'ms' is a time"]),
    ("p in ms", [("p = { low = 0.01, high = 0.05 }", 'p = { low = 0.01, high = 0.05, unit = "ms" }')],
     ["space.factors.p", "unit 'ms' is a time", "probability"]),
    ("unknown unit", [('unit = "ms"', 'unit = "msec"')], ["unknown unit 'msec'", "s, ms"]),
    ("unit on a choice factor", [("p = { low = 0.01, high = 0.05 }",
                                  'p = { low = 0.01, high = 0.05 }\nmode = { levels = ["a", "b"], unit = "ms" }')],
     ["space.factors.mode"]),
    ("probability above 1", [("p = { low = 0.01, high = 0.05 }", "p = { low = 0.5, high = 1.5 }")],
     ["space.factors.p", "outside [0, 1]"]),
    ("negative delay", [("owd = { low = 2, high = 5", "owd = { low = -5, high = 5")],
     ["space.factors.owd", "outside ≥ 0 ms"]),
    ("zero bandwidth", [("bw = { low = 5, high = 20", "bw = { low = 0, high = 20")],
     ["space.factors.bw", "outside > 0 Mbit/s"]),
    ("design key typo", [("timeout_s = 30", "timout_s = 30")], [":6: design.timout_s", "unknown key 'timout_s'",
                                                                  "did you mean 'timeout_s'"]),
    ("repetitions 0", [("repetitions = 1", "repetitions = 0")], ["design.repetitions", "≥ 1"]),
    ("timeout 0", [("timeout_s = 30", "timeout_s = 0")], ["design.timeout_s", "≥ 0.1"]),
    ("timeout too short", [('sizes = ["1kB"]', 'sizes = ["50MB"]')], ["below 1.5× the minimum duration",
                                                                   "--accept-short-timeout"]),
    ("space key typo", [("points = 2", "point = 2")], ["space.point", "did you mean 'points'"]),
    ("factor key typo", [("p = { low = 0.01, high = 0.05 }", "p = { low = 0.01, hihg = 0.05 }")],
     ["space.factors.p.hihg", "did you mean 'high'"]),
    ("method typo", [('method = "wsp"', 'method = "wps"')], ["space.method", "unknown value 'wps'",
                                                            "did you mean 'wsp'"]),
    ("loss model typo", [('model = "uniform"', 'model = "unifrom"')], ["loss.model", "did you mean 'uniform'"]),
    ("loss key typo", [('p = "p"\n', 'p = "p"\nr = 0.3\n')], ["loss.r", "unknown key 'r'"]),
    ("loss factor typo", [('p = "p"\n', 'p = "pp"\n')], ["loss.p", "unknown factor 'pp'", "did you mean 'p'"]),
    ("workload kind typo", [('kind = "download"', 'kind = "downlaod"')], ["workload.kind", "did you mean 'download'"]),
    ("workload key typo", [('sizes = ["1kB"]', 'sizes = ["1kB"]\nsize = "2kB"')], ["workload.size",
                                                                                  "did you mean 'sizes'"]),
    ("bad size", [('sizes = ["1kB"]', 'sizes = ["1 kilobyte"]')], ["workload.sizes[0]", "bad size"]),
    ("impl name typo", [('name = "fake"', 'name = "faek"')], ["impl[0].name", "unknown implementation 'faek'"]),
    ("impl key typo", [('label = "a"', 'lable = "a"')], ["impl[0].lable", "did you mean 'label'"]),
    ("impl argument typo", [('args = { behave = "ok" }', 'args = { behav = "ok" }')],
     ["impl[0].args.behav", "has no argument 'behav'", "did you mean 'behave'"]),
    ("impl argument value", [('args = { behave = "ok" }', 'args = { behave = "okay" }')],
     ["impl[0].args.behave", "unknown value 'okay'", "did you mean 'ok'"]),
    ("baseline naming no label", [('args = { behave = "ok" }', 'args = { behave = "ok" }\nbaseline = "quic"')],
     ["impl[0].baseline", "not another label"]),
    ("flow on path 2 of a single path", [("", '\n[[flow]]\nname = "bg"\ntool = "iperf3"\npath = 2\n')],
     ["flow[0].path", "the topology has 1 path"]),
    ("flow key typo", [("", '\n[[flow]]\nname = "bg"\ntool = "iperf3"\nprotocl = "udp"\n')],
     ["flow[0].protocl", "did you mean 'protocol'"]),
    ("flows section typo", [("", '\n[flows]\nstart = 1.0\n\n[[flow]]\nname = "bg"\ntool = "iperf3"\n')],
     ["flows.start", "did you mean 'start_s'"]),
    ("capture typo", [("", '\n[capture]\nqlgo = "all"\n')], ["capture.qlgo", "did you mean 'qlog'"]),
    ("capture rule typo", [("", '\n[capture]\nqlog = "failures"\n')], ["capture.qlog", "unknown capture rule"]),
    ("schedule file missing", [("timeout_s = 30", 'timeout_s = 30\nschedule = "no/such/schedule.toml"')],
     ["design.schedule", "not found"]),
    ("topology missing", [(str(SINGLE), str(ROOT / "topologies" / "singel.toml"))], ["design.topology", "not found"]),
    ("per-path factor on one path", [("p = { low = 0.01, high = 0.05 }", "p = { low = 0.01, high = 0.05 }\n"
                                      "bw_2 = { low = 1, high = 2 }")], ["unknown factor 'bw_2'"]),
    # issue 62 item 5: was "unknown factor 'owd_2' … did you mean 'owd_2'?"
    ("per_path on a factor of one path", [(str(SINGLE), str(MULTIPATH)),
                                          ('owd = { low = 2, high = 5, unit = "ms" }',
                                           'owd_1 = { low = 2, high = 5, unit = "ms" }\n'
                                           'owd_2 = { low = 2, high = 5, unit = "ms", per_path = true }')],
     ["space.factors.owd_2", "'owd_2' is already one path's factor", "makes one factor per path of it (owd_2_1, "
      "owd_2_2), which nothing reads", "write 'owd_2' without per_path", "or name it 'owd' with per_path = true"]),
]


def _design(tmp_path: Path, changes: list[tuple[str, str]]) -> Path:
    text = BASE
    for old, new in changes:
        if old == "":
            text += new
        else:
            assert old in text, old
            text = text.replace(old, new, 1)
    path = tmp_path / "d.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name,changes,said", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_mistake_is_refused_naming_it(tmp_path: Path, name: str, changes: list[tuple[str, str]],
                                        said: list[str]) -> None:
    design = _design(tmp_path, changes)
    out = fecbench("run", str(design), "--dry-run", "--db", str(tmp_path / "x.sqlite"))
    message = " ".join((out.stderr + out.stdout).split())
    assert out.returncode == 2, (name, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and message.startswith("fecbench: error:"), message
    for fragment in said:
        assert fragment in message, (fragment, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.toml"]   # nothing written


def test_the_catalogue_is_long_enough() -> None:
    assert len(MISTAKES) >= 25


def test_what_is_written_is_what_runs(tmp_path: Path) -> None:
    """The positive twins: owd in s runs at ms, p in %, bw in kbit/s; an all-fixed design is one point."""
    design = _design(tmp_path, [("method = \"wsp\"\npoints = 2\n", ""),
                                ('bw = { low = 5, high = 20, unit = "Mbit/s" }',
                                 'bw = { value = 5000, unit = "kbit/s" }'),
                                ('owd = { low = 2, high = 5, unit = "ms" }', 'owd = { levels = [0.3], unit = "s" }'),
                                ("p = { low = 0.01, high = 0.05 }", 'p = { value = 2, unit = "%" }'),
                                ("timeout_s = 30", "timeout_s = 60")])
    out = fecbench("run", str(design), "--dry-run", "--db", str(tmp_path / "x.sqlite"))
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "point 0: bw = 5, owd = 300, p = 0.02" in text
    assert "link bottleneck forward: rate 5 Mbit/s (burst 1,671 bytes), one-way delay 300 ms" in text
    assert "uniform p 0.02; long-run loss 0.02" in text and "workload: download (sizes 1000 B)" in text
    assert re.search(r"1 of 1 run\(s\) to do", text) and not (tmp_path / "x.sqlite").exists()


def test_an_unbuilt_implementation_is_a_warning_on_a_dry_run(tmp_path: Path) -> None:
    impls = tmp_path / "impls" / "ghost"
    impls.mkdir(parents=True)
    descriptor = (FAKE_DIR / "fake" / "impl.toml").read_text().replace('binary = "fake.py"', 'binary = "build/ghost"')
    build = '[impl]\nbuild = [["make", "-C", "{dir}/..", "ghost"]]'
    (impls / "impl.toml").write_text(descriptor.replace("[impl]", build))
    design = _design(tmp_path, [(f'impl_dirs = ["{FAKE_DIR}"]', f'impl_dirs = ["{tmp_path / "impls"}"]'),
                                ('name = "fake"', 'name = "ghost"')])
    dry = fecbench("run", str(design), "--dry-run", "--db", str(tmp_path / "x.sqlite"))
    assert dry.returncode == 0, dry.stderr
    said = " ".join(dry.stdout.split())
    hint = re.search(r"build it with: (.*?)(?: warning:|$| mistakes:)", said)
    assert "binary 'build/ghost' not found" in said and hint, said
    assert "{dir}" not in hint.group(1) and f"cd {impls}" in hint.group(1)
    assert f"make -C {tmp_path / 'impls'} ghost" in hint.group(1)   # the folder resolved, as it runs
    real = fecbench("run", str(design), "--db", str(tmp_path / "x.sqlite"))
    assert real.returncode == 2 and "not found" in real.stderr
