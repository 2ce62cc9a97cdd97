"""Reads of the registry."""

from django.db.models import (
    Aggregate,
    Count,
    F,
    JSONField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import Coalesce, RowNumber

from integrations.triton.model_config.graph import (
    CALLS_PARAMETER,
    Step,
    model_calls,
    serves_step,
)
from models_registry.models import PRODUCTION_ALIAS, Alias, Model, ModelVersion, Team


def team_list() -> QuerySet[Team]:
    """All teams by name."""
    return Team.objects.all()


def team_get(*, name: str) -> Team | None:
    return Team.objects.filter(name=name).first()


def team_members(*, team: Team) -> QuerySet:
    """A team's members by username."""
    return team.members.order_by("username")


def user_in_team(*, user, team: Team) -> bool:
    """True for an active superuser or an active member of `team`: who may write its models."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or team.members.filter(pk=user.pk).exists()


def user_owns_model(*, user, model: Model) -> bool:
    """True when `user` may write `model` (its versions, aliases, SLA): see user_in_team."""
    return user_in_team(user=user, team=model.team)


def model_list(*, search: str = "", team: str = "", tag: str = "") -> QuerySet[Model]:
    """Models filtered by a search over name/description/tags, a team and a tag."""
    # The count per row as a subquery, not a GROUP BY over every version: a page of the
    # list counts its own rows' versions (by the model index) and its total needs no join.
    versions = (
        ModelVersion.objects.filter(model=OuterRef("pk"))
        .order_by()
        .values("model")
        .annotate(n=Count("pk"))
        .values("n")
    )
    qs = (
        Model.objects.select_related("team")
        .annotate(version_count=Coalesce(Subquery(versions), 0))
        .order_by("name")
    )
    if search:
        qs = qs.filter(
            Q(name__icontains=search)
            | Q(description__icontains=search)
            | Q(tags__contains=[search])
        )
    if team:
        qs = qs.filter(team__name=team)
    if tag:
        qs = qs.filter(tags__contains=[tag])
    return _with_aliases(qs)


class _JsonObjectAgg(Aggregate):
    """PostgreSQL's jsonb_object_agg(key, value): {key: value, ...} of the rows, NULL for none."""

    function = "jsonb_object_agg"
    output_field = JSONField()


def _with_aliases(qs: QuerySet[Model]) -> QuerySet[Model]:
    """Each model with `alias_versions`: {alias name: its version's number} ({} for none),
    read in the model's own row by a subquery; a prefetch of the aliases and their versions
    cost a page of 100 models about a fifth of its time in Python."""
    aliases = (
        Alias.objects.filter(model=OuterRef("pk"))
        .order_by()
        .values("model")
        .annotate(versions=_JsonObjectAgg("name", "version__version"))
        .values("versions")
    )
    return qs.annotate(alias_versions=Subquery(aliases, output_field=JSONField()))


def model_get(*, name: str) -> Model | None:
    """A model with its team and `alias_versions` (see _with_aliases)."""
    return _with_aliases(Model.objects.select_related("team")).filter(name=name).first()


def model_versions(*, model: Model) -> QuerySet[ModelVersion]:
    """A model's versions, newest first, with who made them and their aliases."""
    return (
        ModelVersion.objects.filter(model=model)
        .select_related("created_by", "model", "derived_from")
        .prefetch_related("aliases")
        .order_by("-version")
    )


def model_version_get(*, model: Model, version: int) -> ModelVersion | None:
    return (
        ModelVersion.objects.select_related("model", "created_by", "derived_from")
        .prefetch_related("aliases")
        .filter(model=model, version=version)
        .first()
    )


def model_version_find(*, model_name: str, version: int) -> ModelVersion | None:
    """A version by its model's name and number (None when either does not exist)."""
    return (
        ModelVersion.objects.filter(model__name=model_name, version=version)
        .select_related("model")
        .first()
    )


# What a console form lists to choose a version from: the newest of each model, bounded, so
# a registry of 10,000 versions renders the same page (older ones are typed: "model vN").
CHOICE_VERSIONS_PER_MODEL = 5
CHOICE_VERSIONS_MAX = 300


def version_choices(
    *, per_model: int = CHOICE_VERSIONS_PER_MODEL, limit: int = CHOICE_VERSIONS_MAX
) -> list[ModelVersion]:
    """The newest `per_model` versions of each model (by model name, newest first), at most
    `limit` in all: one query, whatever the registry's size. Only what an option shows is
    read (its id, number, label and model name): not 300 configs and manifests decoded for a
    form's list."""
    newest = Window(RowNumber(), partition_by=[F("model_id")], order_by=F("version").desc())
    return list(
        ModelVersion.objects.select_related("model")
        .only("id", "version", "label", "model__name")
        .annotate(newest=newest)
        .filter(newest__lte=per_model)
        .order_by("model__name", "-version")[:limit]
    )


def version_chosen(*, version_id: str = "", typed: str = "") -> ModelVersion | None:
    """The version a console form chose: typed as "model vN" (or "model:N"), else from its list
    by id; None when neither names one."""
    text = (typed or "").strip()
    if text:
        name, _, number = text.replace(":", " v").rpartition(" v")
        number = number.strip()
        if not name.strip() or not number.isdigit():
            return None
        return model_version_find(model_name=name.strip(), version=int(number))
    if not str(version_id or "").isdigit():
        return None
    return ModelVersion.objects.select_related("model").filter(pk=int(version_id)).first()


def model_version_or_404(*, model_name: str, version: int) -> ModelVersion:
    """model_version_find, or Http404 naming what is missing (for views and APIs)."""
    from django.http import Http404

    found = model_version_find(model_name=model_name, version=version)
    if found is None:
        raise Http404(f"Model '{model_name}' has no version {version}.")
    return found


def calls_among(*, among: QuerySet[ModelVersion] | None = None) -> list[tuple[ModelVersion, Step]]:
    """Every call of the registered versions (of `among` when given) that call other models
    (ensembles' steps, BLS models' declared calls): (caller, call), by caller name."""
    versions = ModelVersion.objects.all() if among is None else among
    callers = versions.filter(
        Q(config_json__platform="ensemble") | Q(config_json__parameters__has_key=CALLS_PARAMETER)
    ).select_related("model")
    return [
        (version, step)
        for version in callers.order_by("model__name", "version")
        for step in model_calls(version.config_json)
    ]


def model_callers(
    *, name: str, among: QuerySet[ModelVersion] | None = None
) -> list[tuple[ModelVersion, Step]]:
    """Every registered version (of `among` when given) that calls model `name` (an
    ensemble with a step on it, or a BLS model declaring it), with that call."""
    return [(caller, step) for caller, step in calls_among(among=among) if step.model == name]


def version_callers(*, version: ModelVersion) -> list[tuple[ModelVersion, Step]]:
    """The registered versions whose call reaches exactly this version (a step pinned to it,
    or one taking its model's newest), with that call."""
    return [
        (caller, step)
        for caller, step in model_callers(name=version.model.name)
        if serves_step(step, [version.version])
    ]


def models_called(*, model: Model) -> list[str]:
    """The names of the models any version of `model` calls (ensemble steps, declared BLS
    calls), sorted; [] for a model that calls none."""
    configs = model.versions.values_list("config_json", flat=True)
    return sorted({step.model for config in configs for step in model_calls(config)})


def step_version(*, step: Step) -> ModelVersion | None:
    """The registered version an ensemble's step runs when a cluster serves none of its
    model yet: its pinned version, else the version the model's `production` alias names,
    else its newest version that did not fail its smoke test; None when there is none."""
    versions = ModelVersion.objects.filter(model__name=step.model).select_related("model")
    if step.version:
        return versions.filter(version=step.version).first()
    aliased = versions.filter(aliases__name=PRODUCTION_ALIAS).first()
    if aliased is not None:
        return aliased
    healthy = versions.exclude(status=ModelVersion.Status.SMOKE_FAILED)
    return healthy.order_by("-version").first()


def model_version_previous(*, version: ModelVersion) -> ModelVersion | None:
    """The version registered just before this one, for config diffs."""
    return (
        ModelVersion.objects.filter(model_id=version.model_id, version__lt=version.version)
        .order_by("-version")
        .first()
    )


def model_tags() -> list[str]:
    """Every tag in use, sorted."""
    tags = set()
    for row in Model.objects.values_list("tags", flat=True):
        tags.update(row)
    return sorted(tags)


def alias_history(*, model: Model) -> QuerySet:
    from models_registry.models import AliasMove

    return AliasMove.objects.filter(alias__model=model).select_related(
        "alias", "from_version", "to_version", "moved_by"
    )


def models_with_versions(*, member=None) -> QuerySet[Model]:
    """Models (of the teams `member` belongs to, when given), each with its versions
    prefetched newest first (the algorithm team's home)."""
    versions = Prefetch("versions", ModelVersion.objects.order_by("-version"))
    qs = Model.objects.select_related("team")
    if member is not None:
        qs = qs.filter(team__members=member)
    return qs.prefetch_related(versions).order_by("name").distinct()
