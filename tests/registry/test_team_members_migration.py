"""The migration that gives teams members starts each team with its models' authors."""

import pytest

from tests.conftest import migrate_to

pytestmark = pytest.mark.usefixtures("latest_migrations_after")
BEFORE = [("models_registry", "0001_initial")]
AFTER = [("models_registry", "0002_team_members")]


@pytest.mark.django_db(transaction=True)
def test_existing_teams_get_the_authors_of_their_models_as_members():
    old = migrate_to(BEFORE)
    User = old.get_model("auth", "User")
    Team, Model = (
        old.get_model("models_registry", "Team"),
        old.get_model("models_registry", "Model"),
    )
    ada, bob, eve = (User.objects.create(username=n) for n in ("ada", "bob", "eve"))
    fraud, search = Team.objects.create(name="fraud"), Team.objects.create(name="search")
    Model.objects.create(name="risk_score", team=fraud, created_by=ada)
    Model.objects.create(name="ranker", team=search, created_by=bob)
    Model.objects.create(name="orphan", team=search, created_by=None)

    new = migrate_to(AFTER)
    Team = new.get_model("models_registry", "Team")
    members = {
        t.name: sorted(t.members.values_list("username", flat=True)) for t in Team.objects.all()
    }
    assert members == {"fraud": ["ada"], "search": ["bob"]}
    assert eve.username not in str(members)
