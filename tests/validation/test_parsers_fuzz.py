"""The edge parsers take any JSON a client can send and answer with their own error naming
the field, never another exception (a 500 at the API, a crashed loop in a consumer)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.metrics_source import MetricsSettingsError, parse_metrics
from integrations.paths import PathError, path_under_roots
from integrations.routers.settings import RouterSettingsError, parse_router
from integrations.targets import TargetError, host_port, http_base_url, http_url, parse_networks
from releases.inputs import ReleaseInputError, parse_analysis, parse_steps, parse_stored_steps

NETWORKS = parse_networks("127.0.0.0/8,::1/128")
KEYS = st.sampled_from(["driver", "url", "listen", "prefix_dir", "source", "interval_s", "x"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(["nginx", "none", "prometheus", "http://127.0.0.1:1", "127.0.0.1:80"])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(), inner),
    max_leaves=8,
)
URLISH = st.text(max_size=40) | st.builds(
    lambda scheme, host, port: f"{scheme}://{host}:{port}",
    st.sampled_from(["http", "https", "ftp", ""]),
    st.text(max_size=12),
    st.text(max_size=6),
)


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_router_and_metrics_settings_fail_only_with_their_error(value):
    for parse, error in (
        (parse_router, RouterSettingsError),
        (parse_metrics, MetricsSettingsError),
    ):
        try:
            parse(value, networks=NETWORKS)
        except error as exc:
            assert exc.field.split(".")[0] in ("router", "metrics")


@settings(max_examples=400, deadline=None)
@given(JSON, JSON, st.sampled_from(["canary", "blue_green"]))
def test_release_settings_fail_only_with_their_error(analysis, steps, strategy):
    for call in (
        lambda: parse_analysis(analysis),
        lambda: parse_steps(strategy, steps, analysis if isinstance(analysis, list) else []),
        lambda: parse_stored_steps(steps),
    ):
        try:
            call()
        except ReleaseInputError as exc:
            assert exc.field.split(".")[0] in ("analysis", "steps", "manual_gates")


@settings(max_examples=400, deadline=None)
@given(URLISH | JSON)
def test_addresses_and_folders_fail_only_with_their_error(value):
    for check in (http_base_url, http_url, host_port):
        try:
            check(value, NETWORKS)
        except TargetError:
            pass
    try:
        path_under_roots(value, ["/srv/switchyard"])
    except PathError:
        pass
