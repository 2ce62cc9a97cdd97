"""Team ownership: only a team's members (and superusers) write its models, in the API and
the console alike; superusers manage membership. Real PostgreSQL and storage, no Triton.

WRITES enumerates every write path to a model and its versions: a new one belongs there.
"""

import io
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditEvent
from benchmarks.models import BenchmarkRun
from benchmarks.services import benchmark_create
from deployments.services import cluster_create, node_create
from models_registry.models import Alias, Model, ModelVersion, Team
from models_registry.services import (
    RegistryError,
    alias_set,
    model_create,
    team_create,
    team_member_add,
)
from tests.registry.archives import example_entries, register_risk_score_as, tar_gz

pytestmark = pytest.mark.django_db
BENCH_CSV = Path(__file__).resolve().parent.parent / "fixtures" / "benchmarks"


@pytest.fixture
def world(settings, tmp_path, make_user):
    """Team fraud (ada) owns risk_score v1 (production) and v2; bob is in team search."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    bob = make_user("bob", role="algorithm")
    rita = make_user("rita", role="release-managers")
    root = make_user("root", superuser=True)
    team_create(name="fraud", actor=ada)
    team_create(name="search", actor=bob)
    team_create(name="ranking", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada, sla={"p99_latency_ms": 50})
    v1 = register_risk_score_as(model, ada, 1)
    register_risk_score_as(model, ada, 2)
    alias_set(model=model, name="production", version=v1, actor=ada)
    staging = cluster_create(actor=rita, name="own-staging", environment="staging")
    node_create(cluster=staging, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    # Queued on commit: a test transaction never commits, so no worker runs it.
    run = benchmark_create(version=v1, cluster=staging, concurrency=[1], duration_s=1, actor=ada)
    return {"ada": ada, "bob": bob, "rita": rita, "root": root, "model": model, "run": run}


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _archive() -> SimpleUploadedFile:
    return SimpleUploadedFile("m.tar.gz", tar_gz(example_entries("risk_score", 3)))


def _csv() -> SimpleUploadedFile:
    data = (BENCH_CSV / "perf_analyzer_risk_score.csv").read_bytes()
    return SimpleUploadedFile("pa.csv", data, content_type="text/csv")


@dataclass(frozen=True)
class Write:
    """One write to team fraud's model: how to send it and what a member gets."""

    name: str
    send: object  # (user, world) -> response
    ok: int  # a member's status
    console: bool = False

    def __call__(self, user, world):
        return self.send(user, world)


M = "/api/v1/models/risk_score"
WRITES = [
    Write(
        "api: create a model for the team",
        lambda u, w: _api(u).post(
            "/api/v1/models/", {"name": "fraud_two", "team": "fraud"}, format="json"
        ),
        201,
    ),
    Write(
        "api: edit the description",
        lambda u, w: _api(u).patch(f"{M}/", {"description": "x"}, format="json"),
        200,
    ),
    Write(
        "api: change the SLA",
        lambda u, w: _api(u).patch(f"{M}/", {"sla": {"p99_latency_ms": 500}}, format="json"),
        200,
    ),
    Write(
        "api: move the model to another team",
        lambda u, w: _api(u).patch(f"{M}/", {"team": "ranking"}, format="json"),
        200,
    ),
    Write(
        "api: upload a version",
        lambda u, w: _api(u).post(f"{M}/versions/", {"archive": _archive()}, format="multipart"),
        201,
    ),
    Write("api: delete a version", lambda u, w: _api(u).delete(f"{M}/versions/2/"), 204),
    Write(
        "api: move production",
        lambda u, w: _api(u).put(f"{M}/aliases/production/", {"version": 2}, format="json"),
        200,
    ),
    Write(
        "api: set another alias",
        lambda u, w: _api(u).put(f"{M}/aliases/candidate/", {"version": 2}, format="json"),
        200,
    ),
    Write(
        "api: start a benchmark",
        lambda u, w: _api(u).post(
            "/api/v1/benchmarks/",
            {"model": "risk_score", "version": 1, "cluster": "own-staging", "concurrency": [1]},
            format="json",
        ),
        202,
    ),
    Write(
        "api: cancel a benchmark",
        lambda u, w: _api(u).post(f"/api/v1/benchmarks/{w['run'].pk}/cancel/"),
        202,
    ),
    Write(
        "api: import benchmark results",
        lambda u, w: _api(u).post(
            f"{M}/versions/1/benchmarks/import/",
            {"file": _csv(), "format": "perf_analyzer"},
            format="multipart",
        ),
        201,
    ),
    Write(
        "console: register a model for the team",
        lambda u, w: _browser(u).post("/models/new/", {"name": "fraud_two", "team": "fraud"}),
        302,
        console=True,
    ),
    Write(
        "console: save the SLA",
        lambda u, w: _browser(u).post("/models/risk_score/", {"p99_latency_ms": "500"}),
        302,
        console=True,
    ),
    Write(
        "console: open the upload form",
        lambda u, w: _browser(u).get("/models/risk_score/upload/"),
        200,
        console=True,
    ),
    Write(
        "console: start a benchmark",
        lambda u, w: _browser(u).post(
            "/models/risk_score/versions/1/benchmarks/start/",
            {"cluster": "own-staging", "concurrency": "1", "duration_s": "1"},
        ),
        302,
        console=True,
    ),
    Write(
        "console: cancel a benchmark",
        lambda u, w: _browser(u).post(f"/benchmarks/{w['run'].pk}/cancel/"),
        302,
        console=True,
    ),
    Write(
        "console: import benchmark results",
        lambda u, w: _browser(u).post(
            "/models/risk_score/versions/1/benchmarks/import/",
            {"file": _csv(), "format": "perf_analyzer"},
        ),
        302,
        console=True,
    ),
]


def _snapshot() -> tuple:
    model = Model.objects.values().get(name="risk_score")
    aliases = sorted(Alias.objects.values_list("name", "version__version"))
    versions = sorted(ModelVersion.objects.values_list("version", flat=True))
    return (
        model,
        aliases,
        versions,
        Model.objects.count(),
        list(BenchmarkRun.objects.values("status", "cancel_requested")),
        AuditEvent.objects.count(),
    )


@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.name)
def test_an_algorithm_user_of_another_team_gets_403_and_nothing_changes(world, write):
    before = _snapshot()
    answer = write(world["bob"], world)
    assert answer.status_code == 403, answer.content
    if not write.console:
        [error] = answer.json()["errors"]
        assert "team 'fraud'" in error["message"], error
    assert _snapshot() == before


@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.name)
@pytest.mark.parametrize("who", ["ada", "root"])
def test_a_member_of_the_team_and_a_superuser_may_write(world, write, who):
    answer = write(world[who], world)
    assert answer.status_code == write.ok, answer.content


def test_the_model_page_offers_writes_to_members_only(world):
    url = "/models/risk_score/"
    assert 'data-testid="sla-form"' in _browser(world["ada"]).get(url).content.decode()
    page = _browser(world["bob"]).get(url).content.decode()
    assert 'data-testid="sla-form"' not in page and "Upload a new version" not in page
    version_page = _browser(world["bob"]).get(f"{url}versions/1/").content.decode()
    assert "benchmarks/start/" not in version_page


def test_services_refuse_an_outsider_too(world):
    with pytest.raises(RegistryError) as refused:
        alias_set(
            model=world["model"],
            name="production",
            version=ModelVersion.objects.get(version=2),
            actor=world["bob"],
        )
    assert refused.value.status == 403


def test_a_team_creator_is_its_first_member_and_models_of_other_teams_need_membership(world):
    assert list(Team.objects.get(name="search").members.values_list("username", flat=True)) == [
        "bob"
    ]
    answer = _api(world["bob"]).post(
        "/api/v1/models/", {"name": "ranker", "team": "search"}, format="json"
    )
    assert answer.status_code == 201


# ---------------------------------------------------------------- membership


def test_superusers_add_and_remove_members_and_it_is_audited(world):
    root = _api(world["root"])
    added = root.post("/api/v1/teams/fraud/members/", {"username": "bob"}, format="json")
    assert added.status_code == 201, added.content
    assert [m["username"] for m in added.json()] == ["ada", "bob"]
    assert _api(world["bob"]).patch(f"{M}/", {"description": "x"}, format="json").status_code == 200
    event = AuditEvent.objects.get(action="team.member_added")
    assert event.actor_username == "root" and event.details == {"username": "bob"}

    assert root.delete("/api/v1/teams/fraud/members/bob/").status_code == 204
    assert AuditEvent.objects.filter(action="team.member_removed").count() == 1
    assert _api(world["bob"]).patch(f"{M}/", {"description": "y"}, format="json").status_code == 403
    listed = _api(world["rita"]).get("/api/v1/teams/fraud/members/")
    assert listed.status_code == 200 and listed.json() == [{"username": "ada"}]


def test_only_superusers_manage_members(world):
    ada = _api(world["ada"])
    answer = ada.post("/api/v1/teams/fraud/members/", {"username": "bob"}, format="json")
    assert answer.status_code == 403
    assert answer.json() == {"errors": [{"message": "Managing team members is for superusers."}]}
    assert ada.delete("/api/v1/teams/fraud/members/ada/").status_code == 403
    assert _browser(world["ada"]).post(
        "/models/risk_score/members/add/", {"username": "bob"}
    ).status_code == (403)
    assert list(Team.objects.get(name="fraud").members.values_list("username", flat=True)) == [
        "ada"
    ]


def test_membership_errors_name_the_field(world):
    root = _api(world["root"])
    unknown = root.post("/api/v1/teams/fraud/members/", {"username": "nobody"}, format="json")
    assert unknown.status_code == 400
    error = {"field": "username", "message": "No user named 'nobody'."}
    assert unknown.json() == {"errors": [error]}
    assert root.delete("/api/v1/teams/fraud/members/bob/").status_code == 404
    assert root.get("/api/v1/teams/nope/members/").status_code == 404


def test_superusers_manage_members_on_the_model_page(world):
    browser = _browser(world["root"])
    page = browser.get("/models/risk_score/").content.decode()
    assert 'data-testid="team-members"' in page and "/models/risk_score/members/add/" in page
    assert browser.post("/models/risk_score/members/add/", {"username": "bob"}).status_code == 302
    assert Team.objects.get(name="fraud").members.filter(username="bob").exists()
    assert browser.post("/models/risk_score/members/bob/remove/").status_code == 302
    assert not Team.objects.get(name="fraud").members.filter(username="bob").exists()
    assert AuditEvent.objects.filter(action__startswith="team.member_").count() == 2
    members = _browser(world["bob"]).get("/models/risk_score/").content.decode()
    assert "ada" in members and "/members/add/" not in members


def test_the_demo_puts_ada_in_the_demo_teams(settings, tmp_path, django_user_model):
    from demo.seed import DEMO_MODELS, demo_models_register
    from demo.users import demo_users_create

    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_VAR_DIR = tmp_path / "var"
    demo_users_create()
    demo_models_register(actor=django_user_model.objects.get(username="admin"))
    for team in {row[1] for row in DEMO_MODELS}:
        assert Team.objects.get(name=team).members.filter(username="ada").exists()
    ada = django_user_model.objects.get(username="ada")
    answer = _api(ada).patch("/api/v1/models/risk_score/", {"description": "x"}, format="json")
    assert answer.status_code == 200


def test_adding_a_member_twice_is_one_membership(world):
    team = Team.objects.get(name="fraud")
    team_member_add(team=team, username="bob", actor=world["root"])
    team_member_add(team=team, username="bob", actor=world["root"])
    assert team.members.filter(username="bob").count() == 1
    assert AuditEvent.objects.filter(action="team.member_added").count() == 1


def test_upload_of_an_outsider_is_refused_before_its_body_is_read(world):
    body = io.BytesIO(b"x" * 1024)
    body.name = "m.tar.gz"
    answer = _api(world["bob"]).post(f"{M}/versions/", {"archive": body}, format="multipart")
    assert answer.status_code == 403


def test_moving_a_model_needs_membership_of_the_new_team_too(world):
    answer = _api(world["ada"]).patch(f"{M}/", {"team": "search"}, format="json")
    assert answer.status_code == 403
    assert "team 'search'" in answer.json()["errors"][0]["message"]
    assert Model.objects.get(name="risk_score").team.name == "fraud"
