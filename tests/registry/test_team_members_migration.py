"""The migration that gives teams members starts each team with its models' authors."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("models_registry", "0001_initial")]
AFTER = [("models_registry", "0002_team_members")]


@pytest.mark.django_db(transaction=True)
def test_existing_teams_get_the_authors_of_their_models_as_members():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
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

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Team = new.get_model("models_registry", "Team")
    members = {
        t.name: sorted(t.members.values_list("username", flat=True)) for t in Team.objects.all()
    }
    assert members == {"fraud": ["ada"], "search": ["bob"]}
    assert eve.username not in str(members)


@pytest.fixture(autouse=True)
def _back_to_the_latest_migrations():
    """Going back to models_registry 0001 also unapplied every migration that depends on its
    0002 (other apps' among them): later tests need all of them, whatever this test did."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
