"""The warning for a model without an SLA, pure: answered when the model is made or changed,
when a version is uploaded and when a release starts (releases/warnings.py)."""


def sla_warning(sla: dict, *, model: str) -> str | None:
    """The warning for a model none of whose SLA values is set; None when one is."""
    if any(value is not None for value in (sla or {}).values()):
        return None
    return (
        f"Model {model} has no SLA: releases judge it against its baseline alone, the fast "
        "guard allows up to its error floor (analysis.fast_guard_error_floor, 5% by default) "
        "and benchmarks have no latency or throughput goal. Set one: PATCH "
        f'/api/v1/models/{model}/ {{"sla": {{...}}}} or `switchyard model sla set {model}`.'
    )
