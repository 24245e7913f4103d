"""The reference model and the loss-model API (pure logic, no root)."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest

from fecbench.dropper import (
    Filter,
    GilbertElliott,
    LossModel,
    NoLoss,
    Trace,
    Uniform,
    burst_lengths,
    ge_from_loss_burst,
    reference_verdicts,
)
from fecbench.dropper.dropper import fecdrop_binary, model_args
from fecbench.dropper.models.base import random_bits, stream_key, threshold
from fecbench.inputs.errors import UserError


def sequential_ge(m: LossModel, seed: int, stream: int, n: int) -> np.ndarray:
    """The Gilbert-Elliott chain written the obvious way: verdict in the current state, then transition."""
    bits = random_bits(seed, stream, 0, n)
    state, out = 0, np.zeros(n, dtype=bool)
    for i in range(n):
        u_verdict, u_move = int(bits[i]) >> 32, int(bits[i]) & 0xFFFFFFFF
        out[i] = u_verdict >= (threshold(m.h) if state else threshold(m.k))
        state = (0 if u_move < threshold(m.r) else 1) if state else (1 if u_move < threshold(m.p) else 0)
    return out


def test_hash_known_answers_match_the_c_selftest():
    # printed by `dropper/build/fecdrop selftest` from shared.h
    assert int(random_bits(0, 0, 0, 1)[0]) == 0x65AE880813F6F3DB
    assert int(random_bits(7, 1, 5, 1)[0]) == 0x7BEFFA9B60D5F6B2


def test_seed_zero_and_streams_give_distinct_keys():
    keys = {stream_key(seed, stream) for seed in range(4) for stream in range(4)}
    assert len(keys) == 16 and 0 not in keys
    d = reference_verdicts(Uniform(0.5), 0, 0, 10_000)
    assert 0.45 < d.mean() < 0.55


def test_thresholds_cover_zero_and_one():
    assert threshold(0.0) == 0 and threshold(1.0) == 1 << 32 and threshold(2**-32) == 1
    assert not reference_verdicts(Uniform(0.0), 3, 0, 50_000).any()
    assert reference_verdicts(Uniform(1.0), 3, 0, 50_000).all()
    assert reference_verdicts(GilbertElliott(1.0, 0.0, 0.0, 0.0, allow_absorbing=True), 1, 0, 999).all()
    assert not reference_verdicts(GilbertElliott(0.3, 0.3, 1.0, 1.0), 1, 0, 999).any()


@pytest.mark.parametrize("params", [(0.05, 0.3, 0.99, 0.2), (0.5, 0.5, 0.9, 0.1), (0.9, 0.05, 1.0, 0.0),
                                    (1.0, 1.0, 0.5, 0.5), (0.0, 0.3, 0.97, 0.0), (0.01, 0.01, 1.0, 0.0)])
def test_vectorised_ge_equals_the_sequential_chain(params):
    m = GilbertElliott(*params)
    for seed, stream in ((0, 0), (7, 3)):
        assert np.array_equal(reference_verdicts(m, seed, stream, 30_000), sequential_ge(m, seed, stream, 30_000))


def test_streams_and_seeds_differ():
    m = GilbertElliott(0.05, 0.3)
    a, b, c = (reference_verdicts(m, s, t, 20_000) for s, t in ((1, 0), (2, 0), (1, 1)))
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(a, reference_verdicts(m, 1, 0, 20_000))


def test_trace_from_list_bitmap_and_file(tmp_path):
    m = Trace.load([2, 5, 5, 9])
    assert m.length == 10
    assert list(np.flatnonzero(reference_verdicts(m, 0, 0, 20))) == [2, 5, 9]
    bitmap = np.zeros(12, dtype=bool)
    bitmap[[0, 11]] = True
    assert list(np.flatnonzero(reference_verdicts(Trace.load(bitmap), 0, 0, 12))) == [0, 11]
    path = tmp_path / "t.txt"
    path.write_text("# measured\n3\n4 # burst\n\n8\n")
    assert list(np.flatnonzero(reference_verdicts(Trace.load(path), 9, 9, 100))) == [3, 4, 8]
    with pytest.raises(UserError):
        Trace.load(tmp_path / "missing.txt")
    with pytest.raises(UserError):
        Trace.load([-1])
    with pytest.raises(UserError):
        Trace.load([1 << 24])


def test_bad_parameters_are_user_errors():
    for bad in (lambda: Uniform(1.5), lambda: Uniform(-0.1),
                lambda: Uniform(float("nan")), lambda: GilbertElliott(0.1, 0.0),
                lambda: GilbertElliott(0.1, 0.2, k=2), lambda: Filter(proto="icmp"),
                lambda: Filter(port=70000), lambda: Filter(src="10.0.0.1", dst="::1"), lambda: Filter(src="x")):
        with pytest.raises(UserError):
            bad()
    assert GilbertElliott(0.1, 0.0, allow_absorbing=True).r == 0.0


def test_theory_and_conversions():
    p, r = ge_from_loss_burst(0.05, 3.0)
    m = GilbertElliott(p, r)
    assert math.isclose(m.loss_rate(), 0.05) and math.isclose(m.mean_burst(), 3.0)
    assert math.isclose(Uniform(0.2).mean_burst(), 1.25)
    with pytest.raises(UserError):
        ge_from_loss_burst(0.9, 1.0)
    # general GE: the closed-form burst length matches a long simulated sequence
    g = GilbertElliott(0.05, 0.3, 0.99, 0.2)
    d = reference_verdicts(g, 11, 0, 1_000_000)
    assert abs(burst_lengths(d).mean() - g.mean_burst()) < 0.02 * g.mean_burst()
    assert abs(d.mean() - g.loss_rate()) < 4 * g.loss_rate_sigma(len(d))


def test_burst_lengths():
    assert list(burst_lengths(np.array([1, 1, 0, 1, 0, 0, 1, 1, 1], dtype=bool))) == [2, 1, 3]
    assert len(burst_lengths(np.zeros(5, dtype=bool))) == 0


def loader_reference(model: LossModel, seed: int, stream: int, packets: int, tmp_path) -> np.ndarray:
    """The verdicts of the C loader's own sequential model (`fecdrop reference`: no kernel, any user)."""
    try:
        binary = fecdrop_binary()
    except UserError as e:
        pytest.skip(str(e))
    out = tmp_path / "verdicts.bin"
    run = subprocess.run([str(binary), "reference", "--packets", str(packets), "--out", str(out),
                          *model_args(model, seed, stream, str(tmp_path))], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return np.fromfile(out, dtype=np.uint8)


@pytest.mark.parametrize("model", [
    NoLoss(), Uniform(0.02), Uniform(0.0), Uniform(1.0),
    GilbertElliott(0.05, 0.3, 0.99, 0.2), GilbertElliott(0.5, 0.5, 0.9, 0.1),
    GilbertElliott(1.0, 0.0, 0.0, 0.0, allow_absorbing=True), Trace.load([0, 3, 4, 5, 99_999]),
], ids=lambda m: m.kind)
def test_loader_model_equals_the_numpy_reference(model, tmp_path):
    """The tables the loader hands to the kernel come from the same D[i] as model.py, bit for bit."""
    for seed, stream in ((0, 0), (7, 3)):
        want = reference_verdicts(model, seed, stream, 200_000).astype(np.uint8)
        assert np.array_equal(loader_reference(model, seed, stream, 200_000, tmp_path), want)


def test_loader_ge_chain_past_the_kernel_table_equals_the_reference(tmp_path):
    m = GilbertElliott(0.05, 0.3, 0.99, 0.2)
    n = (1 << 21) + 100_000  # past GE_TABLE_LEN, where the kernel continues the chain under its lock
    assert np.array_equal(loader_reference(m, 5, 1, n, tmp_path), reference_verdicts(m, 5, 1, n).astype(np.uint8))
