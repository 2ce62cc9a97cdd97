"""A release serves baseline and candidate side by side, and Triton gives every loaded version
of a model one config (the newest version's, deployments/push.py). A candidate whose config
differs from the baseline's in what they share is therefore served under a name of its own,
its sibling (`<model>--c<version>`, deployments/temporary.py), loaded with its own config on
the same nodes; the router sends the candidate's share of the model's path to that name, so
clients keep calling the model's name and the baseline keeps its config (a config canary).
That needs the cluster's router: without one, such a release is refused, naming each
differing field.

A model that ensembles call, or an ensemble pinning a step version not served, is released
as a graph: releases/graph.py.
"""

from accounts.errors import Refused
from deployments.temporary import sibling_name
from integrations.triton.model_config import ConfigDifference, config_differences


class ConfigsDiffer(Refused):
    """400: the candidate's config differs from the baseline's; `differences` lists where."""

    def __init__(self, *, baseline, candidate, differences: list[ConfigDifference]) -> None:
        b, c = f"v{baseline.version}", f"v{candidate.version}"
        older, newer = sorted([baseline, candidate], key=lambda v: v.version)
        paths = ", ".join(d.path for d in differences)
        message = (
            f"{c}'s config differs from {b}'s (serving now) in {len(differences)} "
            f"field{'s' if len(differences) != 1 else ''}: {paths}. Triton serves every "
            f"loaded version of a model under one config, so while both serve, "
            f"v{older.version} would run under v{newer.version}'s config; a config canary "
            f"serves {c} under a name of its own, which needs the cluster's router. Give "
            f"{c} the config of {b} in these fields, configure the router, or switch to it "
            "with a deployment (no canary)."
        )
        field = "candidate_version"
        rows = [
            {
                "field": field,
                "message": f"{d.path}: {b} (baseline) {d.baseline_text}, "
                f"{c} (candidate) {d.candidate_text}.",
            }
            for d in differences
        ]
        super().__init__(message, field=field, errors=[{"field": field, "message": message}, *rows])
        self.baseline, self.candidate, self.differences = baseline, candidate, differences


def config_changes(*, baseline, candidate) -> list[ConfigDifference]:
    """Where the two versions' stored configs serve differently (name, version policy and
    Switchyard's push id aside: integrations/triton/model_config/diff.py); Refused when they
    cannot be compared."""
    try:
        return config_differences(baseline.config_json, candidate.config_json)
    except ValueError as exc:
        raise Refused(
            f"The stored configs of v{baseline.version} and v{candidate.version} cannot be "
            f"compared ({exc}).",
            field="candidate_version",
        ) from None


def candidate_name_for(*, baseline, candidate, routed: bool) -> str:
    """The name the candidate serves under beside the baseline: "" (the model's own) when
    their configs serve alike, its sibling name when they differ and the cluster has a
    router (`routed`); ConfigsDiffer when they differ and it has none."""
    differences = config_changes(baseline=baseline, candidate=candidate)
    if not differences:
        return ""
    if not routed:
        raise ConfigsDiffer(baseline=baseline, candidate=candidate, differences=differences)
    return sibling_name(candidate.model.name, candidate.version)
