"""Temporary model names (smoke tests, benchmarks) and what a served name is charged to."""

import pytest

from deployments import temporary
from deployments.temporary import BENCHMARK, SERVING, VALIDATION, Charged, charged_to


def test_a_smoke_name_is_charged_to_its_model_and_version_as_validation():
    name = temporary.smoke_name("fraud_score", 3)
    assert (
        name.startswith("fraud_score--smoke-3-") and len(name) == len("fraud_score--smoke-3-") + 6
    )
    assert charged_to(name, "3") == Charged("fraud_score", "3", VALIDATION)


def test_a_bench_name_carries_its_version_and_is_charged_as_benchmark():
    name = temporary.bench_name("fraud_score", 41, 7)
    assert name.startswith(temporary.bench_prefix("fraud_score", 41) + "v7-")
    # The version in the name wins over the one reported with it.
    assert charged_to(name, "1") == Charged("fraud_score", "7", BENCHMARK)


def test_an_old_bench_name_without_a_version_takes_the_reported_version():
    assert charged_to("fraud_score--bench-41-c1516e", "2") == Charged("fraud_score", "2", BENCHMARK)


def test_the_run_prefix_matches_old_and_new_names_of_its_run_only():
    prefix = temporary.bench_prefix("m", 4)
    assert temporary.bench_name("m", 4, 2).startswith(prefix)
    assert "m--bench-4-c1516e".startswith(prefix)
    assert not temporary.bench_name("m", 41, 2).startswith(prefix)


@pytest.mark.parametrize(
    "name",
    [
        "fraud_score",
        "fraud--smoke",  # no version nor suffix
        "fraud--smoke-1-C1516E",  # the suffix is lower-case hex
        "fraud--smoke-1-c1516e7",  # seven characters
        "fraud--smoke-x-c1516e",
        "fraud--bench--c1516e",
        "my-model-v2",
        "a--b",
    ],
)
def test_other_names_are_served_as_they_are(name):
    assert charged_to(name, "1") == Charged(name, "1", SERVING)
    assert not temporary.is_temporary(name)


def test_a_model_name_with_dashes_keeps_them():
    assert charged_to("risk-v2--smoke-10-abcdef", "10") == Charged("risk-v2", "10", VALIDATION)
    assert temporary.is_temporary("risk-v2--bench-3-v10-abcdef")


def test_every_cost_kind_is_listed_once():
    assert temporary.COST_KINDS == (SERVING, VALIDATION, BENCHMARK)


def test_a_config_canarys_sibling_serves_clients_of_its_model():
    name = temporary.sibling_name("risk-v2", 7)
    assert name == "risk-v2--c7"
    assert charged_to(name, "7") == Charged("risk-v2", "7", SERVING)
    assert not temporary.is_temporary(name)
    assert temporary.served_model(name, "7") == ("risk-v2", "7")
    assert temporary.served_model("risk-v2", "1") == ("risk-v2", "1")
    assert temporary.sibling_of("risk--cx") is None and temporary.sibling_of("a--b") is None


def test_the_names_the_control_plane_loads_are_reserved_shapes():
    from integrations.triton.names import reserved_shape

    assert reserved_shape(temporary.sibling_name("risk", 3)) == "a config canary's candidate"
    assert reserved_shape(temporary.smoke_name("risk", 3)) == "a smoke test's temporary model"
    assert reserved_shape(temporary.bench_name("risk", 4, 2)) == "a benchmark's temporary model"
    for name in ("risk", "risk--b", "risk--cx", "a--b--c", "my-model-v2"):
        assert reserved_shape(name) == "", name
