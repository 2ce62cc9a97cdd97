"""Registry pages: model list, model page (versions, SLA, aliases), version page, upload form."""

import difflib

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import Role, user_has_role
from console.benchmark_views import benchmark_context
from console.paging import paged
from console.pbtxt import highlight_pbtxt
from deployments.selectors import model_live_where
from integrations.triton.model_config.graph import ensemble_steps, is_ensemble, model_calls
from models_registry import selectors, services
from models_registry.services import RegistryError
from models_registry.sla import sla_warning


def _can_write(user, model=None) -> bool:
    """The algorithm role, and for one model membership of its team (superusers: always)."""
    if not user_has_role(user, Role.ALGORITHM.value):
        return False
    return model is None or selectors.user_owns_model(user=user, model=model)


def _require_writer(user, model=None) -> None:
    if not user_has_role(user, Role.ALGORITHM.value):
        raise PermissionDenied("Registering models needs the algorithm role.")
    if model is not None and not selectors.user_owns_model(user=user, model=model):
        raise PermissionDenied(
            f"Changing model '{model.name}' needs membership of team '{model.team.name}'."
        )


def _model_or_404(name: str):
    model = selectors.model_get(name=name)
    if model is None:
        raise Http404(f"No model named '{name}'.")
    return model


@login_required
def model_list(request):
    """The models, 50 a page, filtered like GET /api/v1/models/ (search, team, tag)."""
    filters = {name: request.GET.get(name, "").strip()[:200] for name in ("search", "team", "tag")}
    listed = paged(request, selectors.model_list(**filters), values=filters)
    context = {
        **listed,
        "models": listed["page"].object_list,
        "teams": selectors.team_list(),
        "tags": selectors.model_tags(),
        "filters": filters,
        "can_write": _can_write(request.user),
        "api_base": request.build_absolute_uri("/api/v1/"),
    }
    return render(request, "console/models/list.html", context)


class ModelCreateForm(forms.Form):
    name = forms.CharField(max_length=128, help_text="The Triton model name (a folder name).")
    team = forms.CharField(max_length=100, help_text="An existing team, or a new one.")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")


def _tags(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@login_required
def model_create(request):
    _require_writer(request.user)
    form = ModelCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if not selectors.team_list().filter(name=data["team"]).exists():
                services.team_create(name=data["team"], actor=request.user)
            model = services.model_create(
                name=data["name"],
                team=data["team"],
                description=data["description"],
                tags=_tags(data["tags"]),
                actor=request.user,
            )
        except RegistryError as exc:
            if exc.status == 403:
                raise PermissionDenied(exc.message) from None
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(request, f"Model {model.name} created. Upload its first version.")
            return redirect("console:model-upload", name=model.name)
    return render(request, "console/models/create.html", {"form": form})


class SlaForm(forms.Form):
    p99_latency_ms = forms.FloatField(required=False, min_value=0, label="p99 latency (ms)")
    min_success_rate = forms.FloatField(
        required=False, min_value=0, max_value=100, label="min success rate (%)"
    )
    max_queue_ms = forms.FloatField(required=False, min_value=0, label="max queue time (ms)")
    min_throughput_rps = forms.FloatField(
        required=False, min_value=0, label="min throughput (req/s)"
    )
    p95_first_token_ms = forms.FloatField(
        required=False, min_value=0, label="p95 time to first token (ms, streams)"
    )
    p95_inter_token_ms = forms.FloatField(
        required=False, min_value=0, label="p95 time between tokens (ms, streams)"
    )
    min_tokens_per_s = forms.FloatField(
        required=False, min_value=0, label="min tokens per second (95 % of streams)"
    )


@login_required
def model_detail(request, name):
    model = _model_or_404(name)
    sla_form = SlaForm(request.POST or None, initial=model.sla)
    if request.method == "POST":
        _require_writer(request.user, model)
        if sla_form.is_valid():
            try:
                services.model_update(model=model, actor=request.user, sla=sla_form.cleaned_data)
            except RegistryError as exc:
                sla_form.add_error(None, exc.message)  # a 409 (release running) shows here
            else:
                messages.success(request, "SLA saved.")
                return redirect("console:model-detail", name=name)
    live_where = model_live_where(model=model)
    serving_on: dict[int, list[str]] = {}
    for row in live_where:
        for number in row["versions"]:
            serving_on.setdefault(number, []).append(row["cluster"])
    listed = paged(request, selectors.model_versions(model=model), values={})  # as the API
    versions = list(listed["page"].object_list)
    for version in versions:
        version.serving_on = serving_on.get(version.version, [])
    context = {
        "model": model,
        "versions": versions,
        "pager": listed["pager"],
        "live_where": live_where,
        "alias_moves": selectors.alias_history(model=model)[:20],
        "sla_form": sla_form,
        "sla_warning": sla_warning(model.sla, model=model.name),
        "can_write": _can_write(request.user, model),
        "members": selectors.team_members(team=model.team),
        "can_manage_members": request.user.is_superuser,
    }
    return render(request, "console/models/detail.html", context)


@login_required
def model_upload(request, name):
    model = _model_or_404(name)
    _require_writer(request.user, model)
    context = {
        "model": model,
        "upload_url": reverse("api-model-versions", kwargs={"name": name}),
        "next_version": model.next_version,
    }
    return render(request, "console/models/upload.html", context)


def _io_rows(config: dict) -> list[dict]:
    rows = []
    for kind in ("input", "output"):
        for tensor in config.get(kind, []):
            rows.append(
                {
                    "kind": kind,
                    "name": tensor.get("name", ""),
                    "data_type": tensor.get("data_type", "TYPE_INVALID").removeprefix("TYPE_"),
                    "dims": [int(d) for d in tensor.get("dims", [])],
                }
            )
    return rows


def _config_diff(previous, current) -> list[tuple[str, str]]:
    if previous is None:
        return []
    lines = difflib.unified_diff(
        previous.config_text.splitlines(),
        current.config_text.splitlines(),
        fromfile=f"v{previous.version}/config.pbtxt",
        tofile=f"v{current.version}/config.pbtxt",
        lineterm="",
    )
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [(kinds.get(line[:1], "ctx"), line) for line in lines]


def _version_or_404(model, version: int):
    found = selectors.model_version_get(model=model, version=version)
    if found is None:
        raise Http404(f"Model '{model.name}' has no version {version}.")
    return found


@login_required
def version_detail(request, name, version):
    model = _model_or_404(name)
    found = _version_or_404(model, version)
    # A derived version is compared with its source, any other with the version before it.
    previous = found.derived_from or selectors.model_version_previous(version=found)
    context = {
        "model": model,
        "version": found,
        "config_html": highlight_pbtxt(found.config_text),
        "io_rows": _io_rows(found.config_json),
        "config_entry": found.config_entry(),
        "files": found.files(),
        "previous": previous,
        "diff": _config_diff(previous, found),
        "max_batch_size": int(found.config_json.get("max_batch_size", 0)),
        "steps": ensemble_steps(found.config_json),
        "calls": [] if is_ensemble(found.config_json) else model_calls(found.config_json),
        "smoke_calls": (found.validation.get("smoke") or {}).get("calls") or {},
        "called_by": [
            (caller, step, is_ensemble(caller.config_json))
            for caller, step in selectors.version_callers(version=found)
        ],
        "can_write": _can_write(request.user, model),
        **benchmark_context(request.user, found),
    }
    return render(request, "console/models/version.html", context)


class DeriveForm(forms.Form):
    config_text = forms.CharField(
        label="config.pbtxt", widget=forms.Textarea, strip=False, max_length=1024 * 1024
    )
    label = forms.CharField(required=False, max_length=100)
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


@login_required
def version_derive(request, name, version):
    """The config editor: a new version with this version's files and the edited config,
    checked by the registry as an upload is (errors shown with their lines)."""
    model = _model_or_404(name)
    _require_writer(request.user, model)
    source = _version_or_404(model, version)
    errors: list[dict] = []
    if request.method == "POST":
        form = DeriveForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                derived = services.model_version_derive(
                    source=source,
                    actor=request.user,
                    config_text=data["config_text"].replace("\r\n", "\n"),  # as browsers send
                    provenance=services.Provenance(label=data["label"], notes=data["notes"]),
                )
            except RegistryError as exc:
                errors = exc.errors or [{"message": exc.message}]
            else:
                messages.success(
                    request,
                    f"Version {derived.version} registered from v{source.version}'s files "
                    "with the edited config; its smoke test runs next.",
                )
                return redirect("console:model-version", name=name, version=derived.version)
    else:
        form = DeriveForm(initial={"config_text": source.config_text})
    context = {"model": model, "source": source, "form": form, "errors": errors}
    return render(request, "console/models/derive.html", context, status=400 if errors else 200)


@login_required
@require_POST
def team_member_add(request, name):
    """Superusers add a member to a model's team from the model page; audited by the service."""
    model = _model_or_404(name)
    if not request.user.is_superuser:
        raise PermissionDenied("Managing team members is for superusers.")
    username = request.POST.get("username", "").strip()
    try:
        services.team_member_add(team=model.team, username=username, actor=request.user)
    except RegistryError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{username} is a member of team {model.team.name}.")
    return redirect(f"{reverse('console:model-detail', args=[name])}#members")


@login_required
@require_POST
def team_member_remove(request, name, username):
    """Superusers remove a member of a model's team from the model page."""
    model = _model_or_404(name)
    if not request.user.is_superuser:
        raise PermissionDenied("Managing team members is for superusers.")
    try:
        services.team_member_remove(team=model.team, username=username, actor=request.user)
    except RegistryError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{username} left team {model.team.name}.")
    return redirect(f"{reverse('console:model-detail', args=[name])}#members")
