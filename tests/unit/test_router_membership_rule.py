"""The router membership rule (releases.routing.routable), pure: when a node joins, stays and
leaves the router."""

from releases.routing import routable

DESIRED = {"risk": [1, 2], "ticket": [3]}
FULL = {"risk": {"1", "2"}, "ticket": {"3"}}


def rule(**kw):
    base = {"desired": DESIRED, "seen_ago_s": 1.0, "grace_s": 20.0, "served": frozenset(DESIRED)}
    return routable(**(base | kw))


def test_a_node_joins_only_with_every_serving_version_loaded():
    assert rule(routed=False, loaded=FULL)
    assert rule(routed=False, loaded=FULL | {"other": {"9"}})  # extra models do not matter
    assert not rule(routed=False, loaded={"risk": {"1"}, "ticket": {"3"}})  # v2 still loading
    assert not rule(routed=False, loaded={})  # restarted empty
    assert not rule(routed=False, loaded=None)  # does not answer


def test_a_routed_node_stays_while_it_serves_a_version_of_each_model():
    assert rule(routed=True, loaded={"risk": {"1"}, "ticket": {"3"}})  # the next one loads
    assert not rule(routed=True, loaded={"risk": {"1"}})  # lost a model
    assert not rule(routed=True, loaded={})  # restarted empty: out until reloaded


def test_a_model_no_routed_node_serves_yet_never_drops_a_node():
    # `ticket` became desired but is loaded nowhere yet: the nodes keep serving `risk`.
    assert rule(routed=True, loaded={"risk": {"1"}}, served=frozenset({"risk"}))
    assert not rule(routed=True, loaded={}, served=frozenset({"risk"}))
    assert not rule(routed=False, loaded={"risk": {"1", "2"}}, served=frozenset({"risk"}))


def test_a_routed_node_that_does_not_answer_stays_for_the_grace_only():
    assert rule(routed=True, loaded=None, seen_ago_s=19.0)
    assert not rule(routed=True, loaded=None, seen_ago_s=21.0)
    assert not rule(routed=True, loaded=None, seen_ago_s=None)  # never seen up


def test_nothing_desired_means_any_answering_node_serves():
    assert routable(routed=False, loaded={}, desired={}, seen_ago_s=None, grace_s=20.0)
