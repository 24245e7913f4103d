"""A run's packet captures (the `pcap` kind of runners.experiment.capture): started on the testbed before its endpoints
when the campaign may keep them, stopped after them, and made decryptable.

Where and how the testbed captures: fecbench.emulation.pcap (tcpdump in immediate mode at the client's
interfaces, every path, and at each bottleneck, both directions; pcapng in `<run folder>/pcap/<where>.pcapng`).
Size: the run's captures together stay within what the campaign's `max_mb` has left (each capture an equal
share, as a packet count: tcpdump stops a capture at its share and the run goes on), and the `Keeper` keeps a
run's files only within the bound.
Snap length: the policy's `snaplen`, by default 65535 bytes, i.e. whole packets: QUIC protects every packet's
payload with an AEAD, and decrypting a packet needs all of it, so a capture cut shorter than the packets
shows their headers only (Wireshark: "Decryption failed").

Decryptable: after the run, the TLS key logs the endpoints wrote (the runner asks for them whenever the run's
capture may be kept: runners.experiment.capture `keylog`, or a descriptor's `files`) are embedded into every capture
(`editcap --inject-secrets tls,<key log>`: a pcapng Decryption Secrets Block), so `tshark -r X.pcapng.gz -Y quic`
and Wireshark decode the QUIC frames from the file alone. Where that fails (no key log, editcap's error), the
key log is kept beside the capture and the artifact row says why.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.inputs.errors import UserError

if TYPE_CHECKING:
    from fecbench.runners.experiment.capture import CapturePolicy, Keeper
    from fecbench.runners.run.testbed import Testbed

FOLDER = "pcap"
#: Below this much left of the campaign's max_mb, a run starts no capture (nothing it wrote could be kept).
MIN_BUDGET_KB = 64
SECRETS = "tls-secrets.keylog"


def require_tools(policy: CapturePolicy) -> None:
    """A campaign whose runs may keep captures needs tcpdump and editcap (Debian packages tcpdump, tshark)."""
    if policy.pcap.off:
        return
    missing = [tool for tool in ("tcpdump", "editcap") if shutil.which(tool) is None]
    if missing:
        raise UserError(f"capture pcap = {policy.pcap.text()!r} needs {' and '.join(missing)}: install Debian's "
                        "tcpdump and tshark (make apt), or run with --capture pcap=off")


def budget_kb(max_mb: float, used_bytes: int) -> int:
    """What the run's captures may write: what is left of the campaign's max_mb, in kB."""
    return max(0, int((max_mb * 1e6 - used_bytes) // 1000))


def start(testbed: Testbed, keeper: Keeper, key: str, run_dir: Path) -> list[str]:
    """Start the run's captures when the campaign may keep them (before its endpoints); notes on what did not."""
    if not keeper.wants("pcap", key):
        return []
    budget = budget_kb(keeper.policy.max_mb, keeper.used)
    if budget < MIN_BUDGET_KB:
        return [f"no capture: the campaign's artifacts reached max_mb = {keeper.policy.max_mb:g}"]
    return list(testbed.start_captures(run_dir / FOLDER, keeper.policy.snaplen, budget,
                                       comment=f"fecbench run {key}: "))


def merged_key_log(keylogs: list[Path], target: Path) -> Path | None:
    """Every TLS secret of the run's key logs (client, server, competing flows) in one file, each line once."""
    lines: dict[str, None] = {}
    for path in keylogs:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        lines.update(dict.fromkeys(line.strip() for line in text.splitlines()
                                   if line.strip() and not line.startswith("#")))
    if not lines:
        return None
    target.write_text("\n".join(lines) + "\n")
    return target


def editcap_argv(capture: Path, keylog: Path, out: Path) -> list[str]:
    return ["editcap", "--inject-secrets", f"tls,{keylog}", str(capture), str(out)]


def embed_secrets(run_dir: Path, keylogs: list[Path]) -> list[str]:
    """Embed the run's TLS secrets into each of its captures; problems ([]: every capture decrypts alone)."""
    captures = sorted((run_dir / FOLDER).glob("*.pcapng"))
    if not captures:
        return []
    keylog = merged_key_log(keylogs, run_dir / FOLDER / SECRETS)
    if keylog is None:
        return ["no TLS key log from the endpoints: the capture's QUIC payload stays encrypted"]
    problems = []
    for capture in captures:
        out = capture.with_name(capture.stem + ".with-secrets")
        done = subprocess.run(editcap_argv(capture, keylog, out), capture_output=True, text=True, check=False)
        if done.returncode == 0 and out.is_file():
            out.replace(capture)
        else:
            out.unlink(missing_ok=True)
            problems.append(f"capture {capture.stem} not decryptable alone: editcap --inject-secrets failed "
                            f"({done.returncode}): "
                            f"{(done.stderr or done.stdout).strip()[:300]}; the key log is kept beside it")
    keylog.unlink()
    return problems


def annotate(rows: list[dict[str, Any]], notes: list[str]) -> None:
    """Each kept capture's artifact row says what happened to it (stopped at its size bound, not decryptable)."""
    for row in rows:
        if row.get("kind") != "pcap":
            continue
        where = Path(row["path"]).name.split(".pcapng")[0]
        mine = [n for n in notes if n.startswith(f"capture {where} ") or not n.startswith("capture ")]
        if mine:
            row["why"] = "; ".join([row.get("why") or "policy", *mine])
