"""What the CLI prints of a resource while it waits (switchyard_cli/waits.py), pure."""

from switchyard_cli.waits import describe


def test_a_pending_deployment_says_it_waits_for_what_it_calls():
    waiting = {"id": 9, "state": "pending", "waits_for": [7, 8]}
    assert describe("deployment", waiting) == "pending (after deployments #7, #8 of what it calls)"
    assert describe("deployment", {**waiting, "waits_for": [7]}) == (
        "pending (after deployment #7 of what it calls)"
    )
    assert describe("deployment", {**waiting, "state": "running"}) == "running"
    assert describe("deployment", {"state": "pending", "waits_for": []}) == "pending"
    assert describe("release", {"state": "progressing", "candidate_weight": 5}) == (
        "progressing (candidate 5%)"
    )
