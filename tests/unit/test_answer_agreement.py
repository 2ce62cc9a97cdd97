"""A shadow's answer agreement as pure code: comparing two JSON answers output by output,
the comparer's settings, and the gate on what it counted."""

from types import SimpleNamespace

import pytest

from integrations.triton.agreement import Tolerance, compare_answers
from releases.agreement import agreement_verdict, parse_sample
from releases.inputs import ReleaseInputError, agreement_stored, parse_agreement


def answer(**outputs) -> dict:
    return {
        "model_name": "m",
        "outputs": [
            {"name": name, "datatype": kind, "shape": [len(data)], "data": data}
            for name, (kind, data) in outputs.items()
        ],
    }


DEFAULT = Tolerance(rtol=1e-5, atol=1e-6)


def test_floats_agree_within_their_tolerance_and_integers_and_strings_exactly():
    base = answer(SCORE=("FP32", [0.5, 0.25]), LABEL=("BYTES", ["ok"]), N=("INT64", [3]))
    near = answer(SCORE=("FP32", [0.500001, 0.25]), LABEL=("BYTES", ["ok"]), N=("INT64", [3]))
    assert all(o.agrees for o in compare_answers(base, near, {}, DEFAULT))
    off = answer(SCORE=("FP32", [0.75, 0.25]), LABEL=("BYTES", ["no"]), N=("INT64", [4]))
    found = {o.name: o for o in compare_answers(base, off, {}, DEFAULT)}
    assert not any(o.agrees for o in found.values())
    assert found["SCORE"].why == "[0] 0.5 vs 0.75" and found["LABEL"].why == "[0] 'ok' vs 'no'"
    loose = {"SCORE": Tolerance(rtol=0.0, atol=0.3)}
    assert {o.name: o.agrees for o in compare_answers(base, off, loose, DEFAULT)}["SCORE"]


def test_missing_outputs_other_shapes_and_nan_are_judged_as_they_should():
    base = answer(SCORE=("FP32", [float("nan")]))
    assert compare_answers(base, answer(SCORE=("FP32", [float("nan")])), {}, DEFAULT)[0].agrees
    missing = compare_answers(base, answer(OTHER=("FP32", [1.0])), {}, DEFAULT)
    assert [(o.name, o.agrees, o.why) for o in missing] == [
        ("OTHER", False, "missing from the baseline's answer"),
        ("SCORE", False, "missing from the candidate's answer"),
    ]
    reshaped = answer(SCORE=("FP32", [1.0, 2.0]))
    assert "vs FP32[2]" in compare_answers(base, reshaped, {}, DEFAULT)[0].why
    nested = {"outputs": [{"name": "S", "datatype": "FP32", "shape": [1, 2], "data": [[1, 2]]}]}
    flat = {"outputs": [{"name": "S", "datatype": "FP32", "shape": [1, 2], "data": [1, 2.0]}]}
    assert compare_answers(nested, flat, {}, DEFAULT)[0].agrees
    assert compare_answers({"error": "x"}, {"outputs": "junk"}, {}, DEFAULT) == []


def test_settings_are_checked_and_stored_with_every_knob():
    assert parse_agreement({}) is None and agreement_stored(None) == {}
    stored = agreement_stored({"min_agreement": 0.99, "outputs": {"SCORE": {"atol": 0.01}}})
    assert stored["min_agreement"] == 0.99 and stored["sample_share"] == 10.0
    assert stored["outputs"] == {"SCORE": {"rtol": 1e-5, "atol": 0.01}}
    for bad, field in (
        ({"sample_share": 0}, "agreement.sample_share"),
        ({"min_agreement": 1.5}, "agreement.min_agreement"),
        ({"surprise": 1}, "agreement.surprise"),
        ({"outputs": {"S": {"rtol": -1}}}, "agreement.outputs.S.rtol"),
        ({"outputs": {"S": {"big": 1}}}, "agreement.outputs.S"),
        ({"outputs": []}, "agreement.outputs"),
    ):
        with pytest.raises(ReleaseInputError) as caught:
            parse_agreement(bad)
        assert caught.value.field == field, bad


def _release(state: dict, phase="SHADOWING", **knobs) -> SimpleNamespace:
    settings = agreement_stored({"min_agreement": 0.99, "min_compared": 100, **knobs})
    return SimpleNamespace(agreement=settings, agreement_state=state, phase=phase)


def test_the_gate_fails_below_its_share_and_cannot_pass_before_enough_inputs():
    assert agreement_verdict(_release({"compared": 99, "agreed": 90})) == (
        "inconclusive",
        "answers compared on 99 of 100 inputs",
    )
    failed = agreement_verdict(_release({"compared": 200, "agreed": 187}))
    assert failed == ("fail", "answers agree on 93.5% of 200 compared inputs < 99.0%")
    assert agreement_verdict(_release({"compared": 200, "agreed": 199})) is None
    no_gate = SimpleNamespace(agreement=agreement_stored({"sample_share": 5}), agreement_state={})
    assert agreement_verdict(no_gate) is None


def test_a_samples_log_line_is_read_or_left_out():
    line = '{"ts":"1.0","request_id":"ab","model":"m","version":"2","body":"{\\"inputs\\":[]}"}'
    sample = parse_sample(line)
    assert (sample.model, sample.version, sample.body) == ("m", 2, '{"inputs":[]}')
    assert parse_sample('{"model":"m","version":"-"}') is None and parse_sample("{") is None
