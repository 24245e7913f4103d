"""The kernel program under BPF_PROG_TEST_RUN: verdicts equal the reference model, by index, from one
and two CPUs at once; statistics of 10^6 packets match the theory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fecbench.dropper import GilbertElliott, NoLoss, Trace, Uniform, burst_lengths, reference_verdicts
from fecbench.dropper.testrun import bench, kernel_verdicts, verify

pytestmark = pytest.mark.require_root

MODELS = {
    "uniform": Uniform(0.1),
    "uniform-tiny": Uniform(3e-5),
    "ge": GilbertElliott(0.05, 0.3, 0.99, 0.2),
    "ge-simple": GilbertElliott(0.02, 0.25),
    "trace": Trace.load(np.random.default_rng(5).choice(300_000, 4000, replace=False)),
    "none": NoLoss(),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_kernel_equals_reference(name, threads):
    for seed in (0, 7, 2**64 - 1):
        result = verify(MODELS[name], seed, 3, 200_000, threads=threads)
        assert result.ok, result.summary()
        assert result.info["index"] == 200_000
        assert len(result.info["fed_per_thread"]) == threads and min(result.info["fed_per_thread"]) > 0


@pytest.mark.parametrize("threads", [1, 2])
def test_ge_chain_beyond_the_table_runs_under_the_lock(threads):
    # only 50 000 packets pre-generated: the other 150 000 come from the in-kernel locked chain
    result = verify(MODELS["ge"], 42, 1, 200_000, threads=threads, ge_table_len=50_000)
    assert result.ok, result.summary()


@pytest.mark.parametrize("name", ["uniform", "ge", "trace"])
def test_kernel_counters_match_the_sequence(name):
    model = MODELS[name]
    got, info = kernel_verdicts(model, 9, 0, 150_000, threads=2, ge_table_len=100_000)
    want = reference_verdicts(model, 9, 0, 150_000)
    st = info["stats"]
    runs = burst_lengths(want)
    assert st["matched"] == st["seen"] == 150_000
    assert st["dropped"] == want.sum()
    assert st["bursts"] == len(runs) and st["longest_burst"] == runs.max()
    if model.kind == "gilbert-elliott":
        assert st["good"] + st["bad"] == 150_000 and st["bad"] > 0


def test_p0_never_drops_and_p1_always_drops():
    never, _ = kernel_verdicts(Uniform(0.0), 1, 0, 100_000, threads=2)
    always, _ = kernel_verdicts(Uniform(1.0), 1, 0, 100_000, threads=2)
    assert not never.any() and (always == 1).all()
    ge_always, _ = kernel_verdicts(GilbertElliott(1.0, 0.0, 0.0, 0.0, allow_absorbing=True), 2, 0,
                                   100_000, ge_table_len=1000)
    assert (ge_always == 1).all()


def test_statistics_over_a_million_packets():
    n = 1_000_000
    uni = Uniform(0.03)
    d, _ = kernel_verdicts(uni, 2019, 0, n, threads=2)
    assert abs(d.mean() - 0.03) < 4 * uni.loss_rate_sigma(n)

    # two-state model: loss rate and mean burst (bursts are geometric with mean 1/r)
    ge = GilbertElliott(0.02, 0.25)
    d, _ = kernel_verdicts(ge, 2019, 1, n, threads=2, ge_table_len=300_000)
    runs = burst_lengths(d.astype(bool))
    assert abs(d.mean() - ge.loss_rate()) < 4 * ge.loss_rate_sigma(n)
    burst_sigma = math.sqrt((1 - ge.r) / ge.r**2 / len(runs))
    assert abs(runs.mean() - ge.mean_burst()) < 4 * burst_sigma

    full = GilbertElliott(0.05, 0.3, 0.99, 0.2)
    d, _ = kernel_verdicts(full, 2019, 2, n, threads=2)
    assert abs(d.mean() - full.loss_rate()) < 4 * full.loss_rate_sigma(n)


def test_bench_reports_every_model():
    result = bench(repeat=20_000)
    for key in ("empty_ns", "uniform_ns", "gilbert_elliott_ns", "trace_ns", "uniform_ratio"):
        assert result[key] > 0
