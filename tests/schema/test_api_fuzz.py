"""The API contract under a fuzzer: schemathesis against the live ASGI app.

Every operation of `/api/schema/`, writes included, is called with generated requests
(schema-valid and schema-violating ones) as a release manager and as an algorithm user,
each signed in with a token from `POST /api/v1/auth/token/`. Each response must not be a
server error, must use a documented status code and content type, and its body must match
the documented schema. Deterministic (derandomized) and bounded (no shrinking; each
operation gets one example more than it has inputs, up to SWITCHYARD_FUZZ_EXAMPLES) so that
it runs in CI on busy cores.

Network safety (no request of the run may leave 127.0.0.1):

* Synchronous contacts in the web process, found by reading the code: the cluster status
  (`deployments.node_status.cluster_status_read`, at most once per refresh interval: Triton
  HTTP and gRPC to every node's `http_url` / `grpc_url`) and the router panel
  (`releases.selectors.router_view`: the router's `listen`, which `parse_listen` holds to
  127.0.0.1). Everything else that
  contacts a node (pushes, smoke loads, reconcile, benchmarks, release ticks, the
  collector) runs in Celery tasks or management commands.
* No worker consumes the run's tasks: the server queues them on a fresh queue of its own
  (SWITCHYARD_CELERY_QUEUE) that no worker reads and that is purged at the end; tasks never run
  eagerly (no CELERY_TASK_ALWAYS_EAGER in any settings).
* Before each request, every string under a key ending in `url` (at any depth of the body
  or query: node URLs, router and metrics URLs, ...) is replaced by a loopback variant on
  port 9 (some malformed on purpose; gRPC targets as host:port, since gRPC would resolve
  the "host" of `http://...` by DNS): the fuzzer never names another host.
* The server runs under `tests.schema.loopback_guard`, which refuses (and records) any
  socket or gRPC channel to a host that is not loopback; the test asserts that its log
  stays empty, i.e. that nothing even tried.
"""

import os
import re
from dataclasses import dataclass, field

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.models import ApiToken
from accounts.services import PREFIX_LENGTH
from core.sealed import seal
from tests.schema.conftest import api_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

MAX_EXAMPLES = int(os.environ.get("SWITCHYARD_FUZZ_EXAMPLES", "5"))
WAIT_CUT_S = 0.2
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Port 9 (discard): nothing listens there, so no test's or demo's Triton is ever reached.
LOOPBACK_URLS = (
    "http://127.0.0.1:9",
    "http://127.0.0.1:9/",
    "https://127.0.0.1:9",
    "127.0.0.1:9",
    "http://localhost:9/x",
    "",
)
LOOPBACK_GRPC_TARGETS = ("127.0.0.1:9", "127.0.0.1:10", "")
_URL_KEY = re.compile(r"url$", re.IGNORECASE)


def loopback_only(value, key: str = ""):
    """`value` with every string under a *url key replaced by a loopback variant."""
    if isinstance(value, dict):
        return {k: loopback_only(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [loopback_only(v, key) for v in value]
    if isinstance(value, str) and _URL_KEY.search(key):
        choices = LOOPBACK_GRPC_TARGETS if "grpc" in key.lower() else LOOPBACK_URLS
        return choices[len(value) % len(choices)]
    return value


@dataclass
class Seeded:
    """Objects the fuzzer's path parameters and body fields name half of the time."""

    path_values: dict[str, list] = field(default_factory=dict)
    body_values: dict[str, list] = field(default_factory=dict)
    # Path parameters always replaced by one of these values (set per run).
    forced_path_values: dict[str, list] = field(default_factory=dict)

    def values_for(self, path: str) -> dict[str, list]:
        """`name` is a cluster's under /clusters/, a model's elsewhere."""
        cluster = path.startswith("/api/v1/clusters/")
        return {**self.path_values, "name": ["fuzz-cluster" if cluster else "fuzz-model"]}


@pytest.fixture
def seeded(make_user):
    """A team, a model with two versions and an alias, a production cluster with one
    loopback node (nothing listens on port 9: the node is down), a pending release, a
    pending deployment and a pending benchmark (no worker ever runs them)."""
    from django.db import transaction

    from benchmarks.models import BenchmarkRun
    from deployments.models import Deployment, TritonCluster, TritonNode
    from deployments.services import serving_state_set
    from models_registry.services import alias_set, model_create, team_create
    from notifications.models import Webhook
    from releases.models import Release
    from tests.registry.archives import register_risk_score_as

    admin = make_user("fuzz-admin", superuser=True)
    team_create(name="fuzz-team", actor=admin)
    model = model_create(name="fuzz-model", team="fuzz-team", actor=admin)
    baseline = register_risk_score_as(model, admin, 1)
    candidate = register_risk_score_as(model, admin, 2)
    alias_set(model=model, name="staging", version=baseline, actor=admin)
    cluster = TritonCluster.objects.create(name="fuzz-cluster", environment="production")
    TritonNode.objects.create(
        cluster=cluster, name="n1", http_url="http://127.0.0.1:9", grpc_url="127.0.0.1:10"
    )
    with transaction.atomic():  # v1 serves: a new release gets past its checks to the 409
        serving_state_set(cluster=cluster, model=model, versions=[baseline])
    steps = [{"weight": 10.0, "manual_gate": False}, {"weight": 100.0, "manual_gate": True}]
    release = Release.objects.create(
        cluster=cluster, model=model, baseline=baseline, candidate=candidate, steps=steps
    )
    deployment = Deployment.objects.create(cluster=cluster, model=model, version=baseline)
    run = BenchmarkRun.objects.create(version=baseline, concurrency=[1])
    hook = Webhook.objects.create(
        url="http://127.0.0.1:9/hook",
        secret_sealed=seal("fuzz-secret-0123456789"),
        events=["alert.fired"],
    )
    return Seeded(
        path_values={
            "model": ["fuzz-model"],
            "node": ["n1"],
            "version": [1, 2],
            "alias": ["staging", "production"],
            "run_id": [run.pk],
            "deployment_id": [deployment.pk],
            "release_id": [release.pk],
            "webhook_id": [hook.pk],
        },
        body_values={
            "cluster": ["fuzz-cluster"],
            "model": ["fuzz-model"],
            "team": ["fuzz-team"],
            "version": [1, 2],
            "candidate_version": [2],
        },
    )


def _aim(case, data, seeded: Seeded) -> None:
    """Point some path parameters and body fields at seeded objects, add an unknown query
    parameter to some reads, and keep every URL on loopback."""
    values = seeded.values_for(case.operation.path)
    for name in list(case.path_parameters or {}):
        if name in seeded.forced_path_values:  # e.g. never revoke the token the run uses
            case.path_parameters[name] = data.draw(
                st.sampled_from(seeded.forced_path_values[name]), label=f"forced {name}"
            )
        elif name in values and data.draw(st.booleans(), label=f"seeded {name}"):
            case.path_parameters[name] = data.draw(st.sampled_from(values[name]))
    if isinstance(case.body, dict):
        for name in set(case.body) & set(seeded.body_values):
            if data.draw(st.booleans(), label=f"seeded body {name}"):
                case.body[name] = data.draw(st.sampled_from(seeded.body_values[name]))
    if case.method.upper() == "GET" and data.draw(st.booleans(), label="unknown query"):
        case.query = {**(case.query or {}), "unknown": data.draw(st.text(max_size=8))}
    if isinstance(case.body, dict | list):
        case.body = loopback_only(case.body)
    if case.query:
        case.query = loopback_only(case.query)
        case.query = _short_wait(case.query)


def _short_wait(query: dict) -> dict:
    """A valid ?wait= is cut to at most WAIT_CUT_S: on an unfinished resource (no worker
    runs the seeded rows) the server would hold the request for the whole wait, up to a
    minute per example. An invalid one is left for the contract's 400; waiting itself is
    tested in tests/test_api_wait.py against a real worker."""
    raw = query.get("wait")
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        return query
    if 0 <= seconds < float("inf"):
        return {**query, "wait": str(min(seconds, WAIT_CUT_S))}
    return query


def fuzzed_inputs(operation) -> int:
    """What the fuzzer can vary in a request: the parameters, less the security ones (every
    request carries the run's token, which replaces a generated Authorization header), plus
    the fields of the largest request body (1 for a body without named fields)."""
    schemes = operation.schema.raw_schema.get("components", {}).get("securitySchemes", {})
    security = {(scheme.get("in"), scheme.get("name")) for scheme in schemes.values()}
    parameters = [
        p for p in operation.iter_parameters() if (p.location.value, p.name) not in security
    ]
    fields = max(
        (len(b.resolved_schema.get("properties", {})) or 1 for b in operation.body), default=0
    )
    return len(parameters) + fields


def examples_for(operation) -> int:
    """Examples per generation mode, sized by the operation: one more than its inputs (an
    operation without inputs has one request to make), at most MAX_EXAMPLES."""
    return min(MAX_EXAMPLES, 1 + fuzzed_inputs(operation))


# (method, path, generation mode) that generated nothing in this session: a property of the
# schema, whoever signs the requests.
_UNSATISFIABLE: set[tuple[str, str, object]] = set()


def _fuzz_operation(operation, mode, *, base_url, headers, seeded) -> str | None:
    """Run one operation in one generation mode; the first failure as text, or None."""
    if (operation.method, operation.path, mode) in _UNSATISFIABLE:
        return None
    session = requests.Session()

    @settings(
        max_examples=examples_for(operation),
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def run(case, data):
        _aim(case, data, seeded)
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=60)
        case.validate_response(response, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:
        # Nothing of this operation can be made schema-violating (no inputs, or only plain
        # strings in the path and headers). Finding that out costs hypothesis a second or
        # two of CPU per operation; it holds for every role, so the next one skips it.
        _UNSATISFIABLE.add((operation.method, operation.path, mode))
        return None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - FailureGroup is a BaseExceptionGroup
        return f"{mode.value} {operation.method.upper()} {operation.path}: {exc}"[:3000]
    finally:
        session.close()
    return None


def _fuzz_all(server, token: str, seeded: Seeded) -> list[str]:
    schema = schemathesis.openapi.from_url(f"{server.base_url}/api/schema/", timeout=60)
    headers = {"Authorization": f"Token {token}"}
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            failure = _fuzz_operation(
                operation, mode, base_url=server.base_url, headers=headers, seeded=seeded
            )
            if failure:
                failures.append(failure)
    return failures


@pytest.mark.parametrize("role", ["release-managers", "algorithm"])
def test_every_operation_holds_its_contract_under_the_fuzzer(fuzz_server, make_user, seeded, role):
    username = f"fuzz-{role}"
    make_user(username, role=role)
    token = api_token(fuzz_server.base_url, username, f"pw-{username}")
    spare = api_token(fuzz_server.base_url, username, f"pw-{username}")
    # The revoke operation is fuzzed on a spare token of the same user (or one that does not
    # exist), never on the token the run signs its requests with.
    spare_id = ApiToken.objects.get(user__username=username, prefix=spare[:PREFIX_LENGTH]).pk
    seeded.forced_path_values["token_id"] = [spare_id, 10**9]

    failures = _fuzz_all(fuzz_server, token, seeded)

    assert fuzz_server.guard_log.read_text() == "", "a request tried to leave 127.0.0.1"
    assert not failures, f"{len(failures)} operation(s) broke the contract:\n\n" + "\n\n".join(
        failures
    )
