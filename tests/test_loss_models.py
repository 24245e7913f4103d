"""Every registered loss model is complete on both sides: its Python module answers every question the
rest of fecbench asks (parameters, theory, words, records, loader arguments), its C file in
dropper/src/models/ is registered in models.h with both parts, and the C loader's verdicts equal the
Python ones bit for bit. A new model adds its example here; the test then checks it like the others."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fecbench.dropper.dropper import fecdrop_binary, model_args
from fecbench.dropper.models import MODELS, LossModel, model_class, reference_verdicts
from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.errors import UserError

MODELS_H = REPO_ROOT / "dropper/src/models.h"

# Parameters each model is exercised with (a file for a model read from one).
EXAMPLES: dict[str, dict[str, float]] = {
    "none": {},
    "uniform": {"p": 0.03},
    "gilbert-elliott": {"p": 0.05, "r": 0.3, "k": 0.99, "h": 0.2},
    "trace": {},
}


def example(kind: str, tmp_path: Path) -> LossModel:
    cls = MODELS[kind]
    file = None
    if cls.file_key:
        file = tmp_path / "indices.txt"
        file.write_text("\n".join(str(i) for i in range(3, 200_000, 29)) + "\n")
    return cls.from_params(EXAMPLES[kind], file=file)


def c_registry() -> dict[str, str]:
    """ID -> file of each model models.h registers (its FD_MODELS line)."""
    text = MODELS_H.read_text()
    line = re.search(r"#define FD_MODELS\(X\)(.*)", text).group(1)
    return dict(re.findall(r"X\((\w+), (\w+)\)", line))


def test_every_model_has_an_example():
    assert set(EXAMPLES) == set(MODELS), "add the new model's parameters to EXAMPLES"


@pytest.mark.parametrize("kind", list(MODELS))
def test_python_side_is_complete(kind, tmp_path):
    cls = MODELS[kind]
    assert cls.kind == kind and model_class(kind) is cls and cls.loader_name
    model = example(kind, tmp_path)
    loss, burst = model.loss_rate(), model.mean_burst()
    assert 0.0 <= loss <= 1.0 and burst >= 0.0 and (loss == 0) == (burst == 0)
    assert model.describe().startswith(kind) and model.as_dict()["model"] == kind
    for parameter in cls.parameters:
        assert parameter.meaning, f"{kind}.{parameter.name} says what it means"
        with pytest.raises(UserError, match=parameter.name):
            cls.from_params({**EXAMPLES[kind], parameter.name: 1.5})
    with pytest.raises(UserError, match="unknown parameter"):
        cls.from_params({**EXAMPLES[kind], "no_such_parameter": 0.1})
    recorded = cls.expected_loss(EXAMPLES[kind])
    assert math.isnan(recorded) if cls.file_key else recorded == pytest.approx(loss)
    # what it drops over a long sequence is what its theory says
    verdicts = reference_verdicts(model, 3, 1, 200_000)
    sigma = model.loss_rate_sigma(len(verdicts))
    assert abs(verdicts.mean() - loss) <= max(5 * sigma, 1e-3 if cls.file_key else 0)


def test_c_side_registers_every_model_once():
    files = c_registry()
    text = MODELS_H.read_text()
    assert len(files) == len(MODELS)
    for file in files.values():
        source = REPO_ROOT / "dropper/src/models" / f"{file}.h"
        assert f'#include "models/{file}.h"' in text, file
        body = source.read_text()
        assert re.search(rf"\b{file}_drop\(__u64 \*index, __u32 \*state\)", body), f"{file}: kernel part"
        assert re.search(rf"\b{file}_model\(void\)", body), f"{file}: loader part"


@pytest.mark.parametrize("kind", list(MODELS))
def test_c_loader_knows_the_model_and_draws_the_same_verdicts(kind, tmp_path):
    try:
        binary = fecdrop_binary()
    except UserError as e:
        pytest.skip(str(e))
    model = example(kind, tmp_path)
    out = tmp_path / "verdicts.bin"
    run = subprocess.run([str(binary), "reference", "--packets", "100000", "--out", str(out),
                          *model_args(model, 5, 2, str(tmp_path))], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["model"] == kind  # the name the kernel's stats give it
    want = reference_verdicts(model, 5, 2, 100_000).astype(np.uint8)
    assert np.array_equal(np.fromfile(out, dtype=np.uint8), want)


def test_live_changes_write_where_the_c_registry_puts_uniform():
    from fecbench.dropper import live

    assert list(c_registry()).index("UNIFORM") == live.MODEL_UNIFORM
