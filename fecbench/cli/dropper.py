"""`fecbench dropper attach|set|stats|log|detach|verify|bench|model`."""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console

from fecbench.dropper.models import MODELS
from fecbench.inputs.errors import UserError

app = typer.Typer(help="Seeded eBPF packet dropper: attach, configure, verify and benchmark.",
                  no_args_is_help=True)
console = Console()


ModelKind = Enum("ModelKind", {kind.replace("-", "_"): kind for kind in MODELS}, type=str)  # type: ignore[misc]


MODEL = typer.Option(ModelKind("uniform"), "--model", help=f"Loss model: {', '.join(MODELS)}.")
P = typer.Option(None, "--p", help="uniform: loss rate; gilbert-elliott: P(Good -> Bad).")
R = typer.Option(None, "--r", help="gilbert-elliott: P(Bad -> Good).")
K = typer.Option(None, "--k", help="gilbert-elliott: P(deliver | Good) (default 1).")
H = typer.Option(None, "--h", help="gilbert-elliott: P(deliver | Bad) (default 0).")
PARAM = typer.Option(None, "--param", help="Any model parameter as NAME=VALUE (repeatable); --p etc. are short forms.")
FILE = typer.Option(None, "--file", help="trace: file of packet indices to drop (one per line, or .npy).")
ABSORB = typer.Option(False, "--allow-absorbing", help="Accept r = 0 with p > 0 (Bad is absorbing).")
SEED = typer.Option(0, "--seed", help="64-bit loss seed.")
STREAM = typer.Option(0, "--stream", help="Stream number (one per instance and direction).")
NAME = typer.Option(..., "--name", help="Instance name, as `attach` printed it.")


def build_model(model: str, p: float | None, r: float | None, k: float | None, h: float | None,
                file: Path | None, allow_absorbing: bool, param: list[str] | None = None):
    """The model the options name, from the parameters given (the model refuses what it does not take)."""
    from fecbench.dropper.models import model_class

    params: dict[str, object] = {name: value for name, value in (("p", p), ("r", r), ("k", k), ("h", h))
                                 if value is not None}
    for item in param or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--param {item!r}: write NAME=VALUE (e.g. --param p=0.01)")
        params[name.strip()] = value.strip()
    return model_class(getattr(model, "value", model)).from_params(params, file=file, allow_absorbing=allow_absorbing)


def _netns(value: str | None) -> str | int | None:
    return int(value) if value is not None and value.isdigit() else value


@app.command()
def attach(dev: str = typer.Option(..., "--dev", help="Interface."),
           netns: str = typer.Option(None, "--netns", help="`ip netns` name, or PID of a process in it."),
           direction: str = typer.Option("egress", "--direction", help="egress or ingress."),
           model: ModelKind = MODEL, p: float = P, r: float = R, k: float = K, h: float = H,
           param: list[str] = PARAM, file: Path = FILE, allow_absorbing: bool = ABSORB,
           seed: int = SEED, stream: int = STREAM,
           proto: str = typer.Option(None, "--proto", help="Filter: udp or tcp."),
           port: int = typer.Option(None, "--port", help="Filter: source or destination port."),
           src: str = typer.Option(None, "--src", help="Filter: source address."),
           dst: str = typer.Option(None, "--dst", help="Filter: destination address."),
           name: str = typer.Option(None, "--name", help="Instance name (default DEV-DIRECTION)."),
           log: bool = typer.Option(False, "--log", help="Keep a verdict log (ring buffer)."),
           hook: str = typer.Option(None, "--hook", help="auto (tcx if the kernel has it, else clsact), tcx or "
                                    "clsact; default $FECBENCH_DROPPER_HOOK or auto.")) -> None:
    """Attach a dropper; it stays attached until `fecbench dropper detach --name NAME`."""
    from fecbench.dropper import Dropper, Filter

    loss = build_model(model, p, r, k, h, file, allow_absorbing, param)
    name = name or f"{dev}-{direction}" + (f"-{netns}" if netns else "")
    d = Dropper.attach(dev, netns=_netns(netns), direction=direction, model=loss, seed=seed, stream=stream,
                       filter=Filter(proto, port, src, dst), name=name, log=log, persistent=True, hook=hook)
    console.print(f"attached {d.name} ({d.hook}): {loss.describe()}, seed {seed}, stream {stream}")


@app.command("set")
def set_(name: str = NAME, model: ModelKind = MODEL, p: float = P, r: float = R, k: float = K, h: float = H,
         param: list[str] = PARAM, file: Path = FILE, allow_absorbing: bool = ABSORB,
         seed: int = SEED, stream: int = STREAM) -> None:
    """Change an instance's model, seed and stream (resets its stream and counters)."""
    from fecbench.dropper import Dropper

    loss = build_model(model, p, r, k, h, file, allow_absorbing, param)
    Dropper.open(name).set(model=loss, seed=seed, stream=stream)
    console.print(f"{name}: {loss.describe()}, seed {seed}, stream {stream}")


@app.command()
def stats(name: str = typer.Option(None, "--name", help="Instance name (default: every instance)."),
          json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Counters of one instance, or of every instance under /sys/fs/bpf/fecbench."""
    from fecbench.dropper import Dropper
    from fecbench.dropper.dropper import PIN_ROOT

    names = [name] if name else sorted(p.name for p in PIN_ROOT.glob("*") if (p / "attach").exists())
    all_stats = [Dropper.open(n).stats() for n in names]
    if json_out:
        print(json.dumps(all_stats[0] if name else all_stats))
        return
    if not names:
        console.print("no dropper instances")
    for st in all_stats:
        console.print(f"[bold]{st['name']}[/bold]")
        for key, value in st.items():
            if key not in ("name", "dev", "direction"):
                console.print(f"{key:>14}: {value}")


@app.command()
def log(name: str = NAME, out: Path = typer.Option(..., "--out", help="Output .npy file.")) -> None:
    """Save an instance's verdict log (index, verdict, state, len) as a numpy .npy file."""
    import numpy as np

    from fecbench.dropper import Dropper

    d = Dropper.open(name)
    d.log = True
    records = d.verdict_log()
    np.save(out, records)
    console.print(f"{len(records)} verdict records -> {out}")


@app.command()
def detach(name: str = NAME) -> None:
    """Detach an instance and remove its pins."""
    from fecbench.dropper import Dropper

    Dropper.open(name).detach()
    console.print(f"detached {name}")


@app.command()
def verify(model: ModelKind = MODEL, p: float = P, r: float = R, k: float = K, h: float = H,
           param: list[str] = PARAM, file: Path = FILE, allow_absorbing: bool = ABSORB,
           seed: int = SEED, stream: int = STREAM,
           packets: int = typer.Option(200_000, "--packets"), threads: int = typer.Option(1, "--threads"),
           json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Kernel verdicts (BPF_PROG_TEST_RUN, several threads) == reference model? Exit 0 if so, 1 if not."""
    from fecbench.dropper.testrun import verify as run_verify

    if not 1 <= threads <= 64:
        raise UserError("--threads must be in 1..64")
    loss = build_model(model, p, r, k, h, file, allow_absorbing, param)
    with console.status(f"feeding {packets} packets to the kernel program ({threads} thread(s))"):
        result = run_verify(loss, seed, stream, packets, threads)
    if json_out:
        print(json.dumps({"ok": result.ok, "packets": packets, "threads": threads, "drops": result.drops,
                          "first_mismatch": result.first_mismatch, "problems": result.problems}))
    else:
        console.print(f"{loss.describe()}, seed {seed}, stream {stream}: {result.summary()}")
    raise typer.Exit(0 if result.ok else 1)


@app.command()
def bench(json_out: bool = typer.Option(False, "--json", help="Print JSON."),
          repeat: int = typer.Option(1_000_000, "--repeat", help="BPF_PROG_TEST_RUN repetitions.")) -> None:
    """ns per packet of the empty tc program and of each model, against each model's goal (its bench_goal)."""
    from fecbench.dropper.testrun import bench as run_bench

    with console.status("benchmarking"):
        result = run_bench(repeat)
    if json_out:
        print(json.dumps(result))
        return
    goals = {kind.replace("-", "_"): model.bench_goal for kind, model in MODELS.items()}
    console.print(f"empty tc program: {result['empty_ns']:.1f} ns/packet (repeat {result['repeat']})")
    console.print(f"({result['hook_note']})")
    for key in (k.removesuffix("_ratio") for k in result if k.endswith("_ratio")):
        ratio, goal = result[f"{key}_ratio"], goals.get(key)
        met = "met" if goal is not None and ratio <= goal else "missed"
        verdict = "" if goal is None else f" (goal ≤ {goal:.1f}×: {met})"
        console.print(f"{key:>24}: {result[f'{key}_ns']:.1f} ns/packet, {ratio:.2f}× empty{verdict}")


@app.command()
def model(loss: float = typer.Option(None, "--loss", help="Mean loss rate (with --burst)."),
          burst: float = typer.Option(None, "--burst", help="Mean burst length in packets (with --loss)."),
          p: float = P, r: float = R, k: float = K, h: float = H,
          json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """(mean loss, mean burst) -> (p, r) of the two-state model, or the expected loss rate and burst
    length of a Gilbert-Elliott (or uniform: --p alone) parameter set."""
    from fecbench.dropper.models import ge_from_loss_burst

    if loss is not None or burst is not None:
        if loss is None or burst is None:
            raise UserError("give both --loss and --burst")
        p, r = ge_from_loss_burst(loss, burst)
    if p is None:
        raise UserError("give --loss and --burst, or --p (and --r, --k, --h for gilbert-elliott)")
    m = build_model("uniform" if r is None else "gilbert-elliott", p, r, k, h, None, allow_absorbing=True)
    out = {**m.as_dict(), "loss_rate": m.loss_rate(), "mean_burst": m.mean_burst()}
    if json_out:
        print(json.dumps({key: (None if isinstance(v, float) and math.isinf(v) else v) for key, v in out.items()}))
        return
    console.print(f"{m.describe()}: expected loss rate {out['loss_rate']:.6g}, "
                  f"mean burst length {out['mean_burst']:.6g} packets")
