"""What a version calls, read from its stored config (integrations/triton/model_config/
graph.py): an ensemble's steps, a BLS model's declared calls."""

import pytest

from integrations.triton.model_config.graph import (
    Step,
    declared_calls,
    ensemble_steps,
    is_ensemble,
    model_calls,
    serves_step,
)


def _ensemble(*steps: dict) -> dict:
    return {"name": "pipe", "platform": "ensemble", "ensemble_scheduling": {"step": list(steps)}}


def test_steps_in_order_pinned_or_newest_and_each_once():
    config = _ensemble(
        {"model_name": "pre", "model_version": "-1"},  # int64 comes as a string
        {"model_name": "score", "model_version": "3"},
        {"model_name": "post"},  # unset: the newest
        {"model_name": "pre", "model_version": -1},  # the same step twice: listed once
    )
    assert ensemble_steps(config) == [Step("pre", None), Step("score", 3), Step("post", None)]
    assert [str(s) for s in ensemble_steps(config)] == ["pre (newest)", "score v3", "post (newest)"]


def test_a_model_that_is_not_an_ensemble_calls_nothing():
    assert ensemble_steps({"name": "m", "backend": "python"}) == []
    assert ensemble_steps({"platform": "ensemble"}) == []  # no steps (the registry refuses it)
    assert ensemble_steps(_ensemble({"model_name": "x", "model_version": "nan"})) == [
        Step("x", None)
    ]


def test_a_step_is_served_by_its_pinned_version_or_any_for_the_newest():
    assert serves_step(Step("m", 2), [1, 2]) and not serves_step(Step("m", 2), [3])
    assert serves_step(Step("m", None), [7]) and not serves_step(Step("m", None), [])


def _bls(calls: str) -> dict:
    return {
        "name": "gate",
        "backend": "python",
        "parameters": {"switchyard.calls": {"string_value": calls}},
    }


def test_a_bls_model_calls_what_its_config_declares():
    config = _bls(" risk_score , fraud_rules:2,risk_score,, ")
    assert declared_calls(config) == [Step("risk_score", None), Step("fraud_rules", 2)]
    assert model_calls(config) == declared_calls(config)
    assert declared_calls({"name": "m", "backend": "python"}) == []
    for junk in ("risk:0", "risk:x", ":2", "risk:-1"):
        with pytest.raises(ValueError, match="is not a model name"):
            declared_calls(_bls(junk))
        assert model_calls(_bls(junk)) == []  # never a caller (the upload refuses it)
    # An ensemble's steps are its calls, whatever it declares.
    ensemble = {**_ensemble({"model_name": "pre"}), "parameters": _bls("x")["parameters"]}
    assert model_calls(ensemble) == [Step("pre", None)] and is_ensemble(ensemble)
    assert not is_ensemble(config)
