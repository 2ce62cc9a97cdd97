"""What each API operation does, in a sentence or two, added to the OpenAPI document.

The schema knows fields and answers; these notes say what an operation is for. They become
the operations' descriptions (Swagger UI at `/api/docs/`, docs/API.md). A note for an
operation the schema does not have fails tests/schema/test_api_reference.py; an operation
without a note keeps its view's docstring.
"""

from pathlib import Path

DESCRIPTION_FILE = Path(__file__).with_name("api_description.md")

OPERATION_NOTES = {
    # Auth
    "POST /api/v1/auth/token/": "A new API token for `{username, password, name?}`: answers "
    "`{token, name, expires_at}` (the secret is shown only here). Send it as "
    "`Authorization: Token <token>`. Wrong credentials answer 401; throttled (429).",
    "GET /api/v1/auth/tokens/": "The caller's tokens, newest first (never the secret).",
    "DELETE /api/v1/auth/tokens/{token_id}/": "Revoke one of the caller's tokens at once (204); "
    "its open websockets are closed.",
    "POST /api/v1/auth/ws-ticket/": "A single-use ticket for one websocket connect "
    "(`?ticket=`), valid about 60 s.",
    "GET /api/v1/auth/me/": "The signed-in user and their roles.",
    # Registry
    "GET /api/v1/teams/": "Teams; everyone signed in reads.",
    "POST /api/v1/teams/": "A new team; the creator becomes a member. 409 when the name exists.",
    "GET /api/v1/teams/{name}/members/": "A team's members.",
    "POST /api/v1/teams/{name}/members/": "Add a member (superusers).",
    "DELETE /api/v1/teams/{name}/members/{username}/": "Remove a member (superusers).",
    "GET /api/v1/models/": "Models with their SLA; filters `?search=&team=&tag=`.",
    "POST /api/v1/models/": "Register a model of a team the caller is a member of, with its SLA "
    "(`p99_latency_ms`, `min_success_rate`, `max_queue_ms`, `min_throughput_rps`; a streaming "
    "model's `p95_first_token_ms`, `p95_inter_token_ms`, `min_tokens_per_s`).",
    "GET /api/v1/models/{name}/": "One model: SLA, tags, aliases, versions.",
    "PATCH /api/v1/models/{name}/": "Change description, tags or SLA; SLA changes answer 409 "
    "while a release of the model runs.",
    "DELETE /api/v1/models/{name}/": "Remove a model that never served in production, with its "
    "versions, staging deployments, ended releases, benchmarks and aliases (204, audited "
    "`model.deleted`); 409 while a version serves or once it was deployed or released to a "
    "production cluster.",
    "GET /api/v1/models/{name}/versions/": "A model's versions, newest first.",
    "POST /api/v1/models/{name}/versions/": "Upload a version: multipart `archive` (.tar.gz or "
    ".zip of a Triton model directory), optional `label`, `notes`, `source_commit`, "
    "`training_run_url`. 400 naming file and line for an invalid config or a file that could "
    "load native code or crash a node (docs/SECURITY.md); 409 when the files "
    "equal an existing version's (`?return_existing=true` answers that version with 200).",
    "GET /api/v1/models/{name}/versions/{version}/": "Config, manifest, digest, provenance and "
    "validation of one version, and its checks' `state`/`finished`/`outcome`; `?wait=` (at most "
    "60 s).",
    "DELETE /api/v1/models/{name}/versions/{version}/": "Delete a version; 409 while it serves.",
    "GET /api/v1/models/{name}/versions/{version}/archive/": "The version's stored files as "
    ".tar.gz.",
    "POST /api/v1/models/{name}/versions/{version}/derive/": "The next version with this "
    "version's files and a changed config (`config_text`, or `config_patch` of top-level "
    "fields), checked as an upload; 409 when Triton reads it as the source's config.",
    "PUT /api/v1/models/{name}/aliases/{alias}/": "Point an alias at a version; moving "
    "`production` answers 409 while a release runs.",
    # Clusters and deployments
    "GET /api/v1/clusters/": "Clusters with their router and metrics settings.",
    "POST /api/v1/clusters/": "Register a cluster (release managers): environment, push mode, "
    "router (`nginx` or `none`), metrics source (`scrape` or `prometheus`), prices, and whether "
    "a release needs a passing benchmark, and the nodes' key (write-only `api_key` or "
    "`api_key_ref`; answered only as `has_api_key`).",
    "GET /api/v1/clusters/{name}/": "One cluster with its router and metrics settings, and "
    "`warnings` (nodes that answer model control without a key).",
    "PATCH /api/v1/clusters/{name}/": 'Change a cluster\'s settings; `api_key: ""` clears the '
    "node key; `custom_backends` (backends it may load beyond SWITCHYARD_ALLOWED_BACKENDS) is "
    "audited as `cluster.backends_changed`; a new `node_hourly_cost` applies from this moment "
    "on (the price history, audited as `cluster.price_changed`).",
    "GET /api/v1/clusters/{name}/nodes/": "A cluster's nodes.",
    "POST /api/v1/clusters/{name}/nodes/": "Add a node (URLs with scheme, host and port, unique "
    "per cluster; prices optional); the answer says whether it answers model control without a "
    "key (`control_access`, `warnings`).",
    "GET /api/v1/clusters/{name}/nodes/{node}/": "One node.",
    "DELETE /api/v1/clusters/{name}/nodes/{node}/": "Remove a node; its history stays. 409 "
    "while a deployment runs there.",
    "PATCH /api/v1/clusters/{name}/nodes/{node}/": "Change a node's price (`hourly_cost`, "
    "`gpu_hourly_cost`, `gpu_count`, `execution_slots`): in effect from this moment on, the "
    "minutes before keep the price they were charged at; recorded in the price history and "
    "audited as `node.price_changed`.",
    "GET /api/v1/clusters/{name}/prices/": "The price history of the cluster and its nodes "
    "(removed ones too), newest first: each change with the moment it took effect, the new "
    "and the replaced values and who made it; `?node=` one node's (`''` the cluster's own).",
    "GET /api/v1/clusters/{name}/status/": "Per node: health, server version, loaded models and "
    "versions, drift from what should serve, from a reading of every node at most "
    "`SWITCHYARD_CLUSTER_STATUS_REFRESH_S` old (`checked_at`, `is_stale`): beat's, or one taken "
    "for the request, shared by every client asking at once, so the nodes are asked at most "
    "about once per interval however many clients read.",
    "GET /api/v1/clusters/{name}/router/": "What the cluster's router does now: running, nodes, "
    "each release route's split.",
    "POST /api/v1/clusters/{name}/models/{model}/unload/": "Unload a model from every node of "
    "the cluster (202 with the deployment's id); 409 naming every model serving there that "
    "calls it, an ensemble or a BLS model declaring it (unload those first), unless "
    '`{"with_callers": true}`: then they are unloaded first, callers of callers before '
    "them, each an unload of its own that the next `waits_for`.",
    "GET /api/v1/deployments/": "Deployments, newest first; `?model=&cluster=&state=&since=`.",
    "POST /api/v1/deployments/": "Make this version the only serving one of its model on the "
    "cluster: 202 `{id, state, finished, outcome}`; follow it at `GET /api/v1/deployments/{id}/`. "
    "On a production cluster its success moves the `production` alias. 409 when it would "
    "leave a model serving on the cluster without one it calls (replacing the version an "
    "ensemble's step or a BLS model's declared call pins). A version whose calls (an "
    "ensemble's steps, a BLS model's `switchyard.calls`) serve nothing there yet is deployed "
    "with them: each gets a deployment of its own (its pinned version, else its "
    "`production` alias, else its newest that did not fail its smoke test), run first; "
    "the caller's `waits_for` "
    "lists them and it runs once they succeeded (fails unrun when one failed). 409 naming "
    "the path when a call cannot be: not registered, failed its smoke test, busy, or its "
    "model serving other versions there.",
    "GET /api/v1/deployments/{deployment_id}/": "State, per-node outcome and timings; `?wait=` "
    "holds the answer until it finishes (at most 60 s).",
    # Releases
    "GET /api/v1/releases/": "Releases, newest first; `?model=&cluster=&state=&since=`.",
    "POST /api/v1/releases/": "Start a gray release of a candidate version (canary steps or "
    "blue/green, analysis thresholds, manual gates, sticky header): 201 with the release. The "
    "release records the model's SLA it starts with; 409 naming the active release while one "
    'runs for the model on that cluster. `"dry_run": true` runs every check and starts '
    "nothing (200 with the plan, or the refusal a real start would get). 409 on "
    "`candidate_version` naming each node and its figures when the collector's last reading "
    "of a node's memory says the candidate would not fit beside the baseline "
    "(SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES kept free). "
    "Triton serves every version of one model name under one config, so a candidate whose "
    "parsed config differs from the baseline's (name, `version_policy` aside) is a config "
    "canary: it serves beside the baseline under its sibling name `<model>--c<version>` with "
    "its own config, and the router sends its share of the model's path there "
    "(`candidate_served_as`; the detail's `config_changes` lists the fields). Without a "
    "router that is a 400 on `candidate_version`: a summary, then one entry per field with "
    "both values. `shadow_s` > 0 starts with a shadow (state `shadowing`): the router "
    "mirrors `shadow_share` % of the model's requests to the candidate, answers thrown "
    "away, and the candidate is judged on them before the first step (needs the router); "
    "`agreement` compares a sample of their answers with the baseline's and can gate it. "
    "On a cluster without a router (`none`, "
    "blue/green only) no weight is honoured: the candidate takes the unversioned traffic "
    "once READY, the gates judge from then on, and a rollback unloads it. "
    "The start measures "
    "the model's unrouted share (the part of Triton's requests over the last minutes of "
    "telemetry that did not go through the router's HTTP split: gRPC clients, direct node "
    "calls, versioned URLs); above `analysis.max_unrouted_share` (default 0.05, on at least "
    "`analysis.min_requests` requests) it answers 409 on `confirm_unrouted`, naming the share "
    'and the unprotected clients, unless `"confirm_unrouted": true` (then recorded in '
    "`unrouted.at_start`, a release event and the audit row). Ensembles serving on the "
    "cluster that call the model at its newest version make it a graph release "
    "(`callers`): the candidate serves under its sibling name, each caller's sibling (the "
    "same version calling the candidate's sibling) takes the step's share of the caller's "
    "traffic through the router, and each interval also judges every caller's requests "
    "through the candidate against its own SLA and through the baseline "
    "(`last_analysis.callers`); a failing caller fails the interval. Their split requests "
    "count as the model's in its unrouted share. 409 on `candidate_version` naming each "
    "caller a release cannot split: a BLS model (its code calls the model by name), an "
    "ensemble pinning a version, any caller without a router, one under a release of its "
    "own; and on starting a release of a caller while its step's graph release runs. 409 on "
    "`candidate_version` naming each model the candidate calls that the cluster does not "
    "serve at the version it needs, except an ensemble's pinned step version (registered, "
    "behind a router): that is loaded for it (`step_loads`: under the step's sibling name "
    "while it is a candidate, beside the step's versions at promotion), unless it would "
    "become the step's newest while clients or other models call the step unversioned.",
    "GET /api/v1/releases/{release_id}/": "State, step, weights, analyses and the latest events; "
    "`?wait=` holds the answer until it finishes (at most 60 s).",
    "GET /api/v1/releases/{release_id}/events/": "The release's whole event log, oldest first, "
    "paged.",
    "POST /api/v1/releases/{release_id}/actions/": "approve, pause, resume, rollback or promote "
    "(with an optional reason): 200 with the new state; 409 when the action does not fit the "
    "release's phase.",
    # Release plans
    "GET /api/v1/release-plans/": "Release plans, newest first; `?model=&state=` "
    "(docs/RELEASE_PLANS.md).",
    "POST /api/v1/release-plans/": "Walk one candidate version through waves of clusters: "
    "`waves` is a list of `{clusters, release, bake_s, approval}` (`release`: the settings a "
    "release start takes). Wave N+1 starts once every release of wave N succeeded and baked; a "
    "wave with `approval` waits for a release manager other than the plan's author. "
    "`on_failure`: `halt` (default: no further release starts, the running ones pause) or "
    "`rollback` (every release of the plan rolls back). Every wave's release is checked on each "
    "of its clusters first, as a release's `dry_run`: 201 with the plan, or the refusal naming "
    "the wave and cluster; nothing is written then.",
    "GET /api/v1/release-plans/{plan_id}/": "A plan: its phase, current wave, each wave's "
    "clusters with their release (id, phase, weight) or why it could not start, the approvals "
    "and the events. `?wait=` answers as soon as the plan has ended or waits for a person.",
    "POST /api/v1/release-plans/{plan_id}/actions/": "approve or refuse the wave waiting for "
    "approval (403 for the plan's author: four-eyes, unless SWITCHYARD_PLAN_SELF_APPROVAL), "
    "halt (every running release of the plan pauses), resume, or rollback (every release of the "
    "plan rolls back), with an optional comment (audited): 200 with the plan; 409 when the "
    "plan's phase does not take it.",
    # Freeze windows
    "GET /api/v1/freezes/": "Freeze windows; `?cluster=` lists that cluster's and the "
    "fleet-wide ones.",
    "POST /api/v1/freezes/": "Declare a freeze: dated (`starts_at`, `ends_at`) or weekly "
    "(`weekdays` 0 = Monday, `start`, `end` local times in `timezone`; an end at or before the "
    "start runs into the next day), on a `cluster` or on every cluster, with a `reason`. While "
    "it holds, nothing starts on the cluster (a release start is a 409, a plan's wave waits) and "
    "a running release pauses at its next gate; rollbacks go on. Audited.",
    "DELETE /api/v1/freezes/{freeze_id}/": "Remove a freeze window (audited): 204.",
    "GET /api/v1/clusters/{name}/freeze/": "Whether the cluster is frozen now and why, the "
    "override in force, and the freezes holding now or coming next (two weeks ahead).",
    "POST /api/v1/clusters/{name}/freeze-overrides/": "Ask for an emergency override of the "
    "cluster's freezes, with a `reason`, for `hours` (at most 24): 201, not yet in force.",
    "POST /api/v1/freeze-overrides/{override_id}/approve/": "Put an override in force from now "
    "for its hours: a release manager other than who asked (403 otherwise); 409 once approved.",
    # Benchmarks and metrics
    "GET /api/v1/benchmarks/": "Benchmark runs, newest first; `?model=&cluster=&state=&since=`.",
    "POST /api/v1/benchmarks/": "Run a concurrency sweep of a version on a staging cluster: "
    "202 `{id, state, finished, outcome}`. A decoupled (streaming) model's clients read "
    "`generate_stream` back to back, each sending `stream_body` (its generate request: a "
    "prompt and an output of set lengths) or one made from generated inputs; 400 on "
    "`stream_body` for another model or an input it does not have.",
    "GET /api/v1/benchmarks/{run_id}/": "Per level: throughput, p50/p95/p99, server "
    "queue/compute (a streaming model's: time to first token p50/p95, p95 time between "
    "tokens, p5 tokens/s a stream, tokens per stream and per second); the verdict against "
    "the SLA (a generative SLA's first token, time between tokens and tokens per second at "
    "the top concurrency) and production; `?wait=` (at most 60 s).",
    "POST /api/v1/benchmarks/{run_id}/cancel/": "Cancel a run (202); 409 once it finished.",
    "GET /api/v1/models/{name}/versions/{version}/benchmarks/": "A version's benchmark runs.",
    "POST /api/v1/models/{name}/versions/{version}/benchmarks/import/": "Import perf_analyzer "
    "or Model Analyzer CSV results (multipart `file` and `format`). Shown, but they open a "
    "cluster's benchmark gate only with `SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS`.",
    "GET /api/v1/metrics/": "Points per cluster, model and version, from the collector's "
    "rollups, at the resolution the range calls for: per minute up to about 33 h, then "
    "5-minute, hourly or daily sums, so no series has more than about 2,000 points (the "
    "answer's `step_s` and `resolution`). `shape=series` answers one object per series "
    "with arrays (`t` in whole epoch seconds, one array per field) instead of `points`. "
    "`fields` (comma-separated, for example `request_rate,p99_ms`; `kind=node`: `cpu_util`, "
    "`gpu_util`) keeps only those figures; an unknown name answers 400. `max_points` "
    "(10-2000) caps the points a series for a narrow chart (the console sends its width in "
    "pixels), so a day on a 600 px chart comes as 5-minute sums.",
    # Reports
    "GET /api/v1/reports/cost/": "What every model, version, team, cluster or node cost over a "
    "range (docs/COSTS.md): totals, idle and unknown cost, per row cost, share, requests, cost "
    "per 1k and the change since the previous period. Each row's cost is split by what the "
    "node time was for: `serving_cost`, `validation_cost` (smoke tests) and `benchmark_cost` "
    "(they add up to `cost` to the cent; temporary models are charged to the version they "
    "test, never a row of their own); `&kind=serving|validation|benchmark` keeps one kind. "
    "`&format=csv` or `Accept: text/csv` answers the rows as CSV.",
    "GET /api/v1/reports/ghosts/": "Versions loaded with no client request on any node of their "
    "cluster for the last N days (fractions allowed; the control plane's own probes and "
    "warm-ups do not count): one row per cluster and version with the nodes it occupies, what "
    "they cost and will cost a month; `idle_on_nodes`: versions that served on some nodes "
    "but sat idle on others, with what unloading them there saves. Only serving versions: a "
    "smoke test's or a benchmark's temporary model is never a ghost.",
    "GET /api/v1/reports/budgets/": "Teams' monthly budgets with month-to-date use.",
    "PUT /api/v1/reports/budgets/{team}/": "Set (or, with null, remove) a team's monthly "
    "budget (managers).",
    # Webhooks (release managers; docs/WEBHOOKS.md)
    "GET /api/v1/webhooks/": "Webhooks with their events, minimum severity and format (never "
    "the secret).",
    "POST /api/v1/webhooks/": "A new webhook `{url, secret, events, min_severity, format}`; the "
    "URL must lie in the allowed networks. Events from now on are delivered, signed.",
    "GET /api/v1/webhooks/{webhook_id}/": "One webhook.",
    "PATCH /api/v1/webhooks/{webhook_id}/": "Change a webhook's URL, secret, events, severity, "
    "format or pause it (`is_active`).",
    "DELETE /api/v1/webhooks/{webhook_id}/": "Delete a webhook and its delivery log (204).",
    "GET /api/v1/webhooks/{webhook_id}/deliveries/": "The delivery log, newest first: status, "
    "attempts, last error and response code; `?status=`.",
    # Deep health (docs/HEALTH.md)
    "GET /api/v1/alerts/": "Alerts, newest first; `?state=firing|acknowledged|resolved|all` "
    "(default firing) and `kind`, `severity`, `cluster`, `node`, `model` filters; everyone "
    "signed in reads.",
    "GET /api/v1/alerts/{alert_id}/": "One alert with its lifecycle.",
    "POST /api/v1/alerts/{alert_id}/ack/": "Acknowledge a firing alert (release managers); 409 "
    "once it is resolved.",
    "GET /api/v1/clusters/{name}/health-settings/": "A cluster's health settings (remediation).",
    "PUT /api/v1/clusters/{name}/health-settings/": "Turn the optional reload of a version whose "
    "probe fails while READY on or off (at most once an hour per node, audited).",
}

HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def add_operation_notes(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: the project's description and the notes above."""
    result["info"]["description"] = DESCRIPTION_FILE.read_text(encoding="utf-8")
    for path, operations in result.get("paths", {}).items():
        for method in HTTP_METHODS:
            note = OPERATION_NOTES.get(f"{method.upper()} {path}")
            if note and method in operations:
                operations[method]["description"] = note
    return result
