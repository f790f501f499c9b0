"""Warnings of the libraries under bayesgrpo that a user cannot act on do not reach them."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytensor

from bayesgrpo.errors import FitWarning
from bayesgrpo.model.sampling import BLAS_PACKAGES_DEBIAN, resolve_pytensor_blas


def _stderr_of(code: str, cache: str) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONWARNINGS": "default"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    return result.stderr


def test_arviz_refactor_notice_is_not_shown_through_bayesgrpo(tmp_path):
    # ArviZ shows its notice once a day per cache folder: fresh folders make it due in both runs
    assert "major refactor" in _stderr_of("import arviz", str(tmp_path / "plain"))
    assert "major refactor" not in _stderr_of("import bayesgrpo.model.reward_model", str(tmp_path / "ours"))


# PyTensor's own search, as it behaves on a machine without a system BLAS: it warns and finds none
_NO_BLAS_ON_THIS_MACHINE = """
import warnings
import pytensor

def search_that_finds_nothing():
    warnings.warn("PyTensor could not link to a BLAS installation. (simulated)", UserWarning)
    return ""

pytensor.config._config_var_dict["blas__ldflags"]._default = search_that_finds_nothing
"""


def test_a_missing_blas_is_not_a_warning_for_a_fit_compiled_to_jax(tmp_path):
    code = _NO_BLAS_ON_THIS_MACHINE + (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.INFO)\n"
        "from bayesgrpo.model.sampling import resolve_pytensor_blas\n"
        "print('flags', repr(resolve_pytensor_blas('numpyro')))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONWARNINGS": "default"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    assert "BLAS" not in result.stderr
    assert "flags ''" in result.stdout
    assert "found no BLAS" in result.stdout and "does not use it" in result.stdout  # logged, at INFO


def test_a_missing_blas_is_one_actionable_fit_warning_for_a_c_backend_sampler():
    parameter = pytensor.config._config_var_dict["blas__ldflags"]
    before = pytensor.config.blas__ldflags
    try:
        pytensor.config.blas__ldflags = ""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert resolve_pytensor_blas("numpyro") == ""
            assert not caught
            resolve_pytensor_blas("pymc")
        assert [w.category for w in caught] == [FitWarning]
        assert BLAS_PACKAGES_DEBIAN in str(caught[0].message) and "'pymc'" in str(caught[0].message)
    finally:
        parameter.__set__(pytensor.config, before)


def test_a_blas_that_is_found_is_used_as_pytensor_found_it():
    assert resolve_pytensor_blas("pymc") == pytensor.config.blas__ldflags
