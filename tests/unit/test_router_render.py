"""Router drivers as pure functions: nginx.conf rendering, access-log parsing, `none` refusal."""

import json
import re

import pytest

from integrations.routers import ModelRoute, RouterError, RouterState, allowlist, get_driver
from integrations.routers.access_log import (
    LOG_FIELDS,
    AccessLogTail,
    log_format,
    parse_line,
    parse_lines,
    parse_routed,
    percentile,
    summarize,
)
from integrations.routers.nginx import (
    config_generation,
    config_state,
    percent,
    render_config,
)

PREFIX = "/srv/router-a"
UPSTREAMS = ["http://127.0.0.1:8000", "http://127.0.0.1:8010"]


def render(*routes: ModelRoute, upstreams: list[str] = UPSTREAMS) -> str:
    return render_config(
        RouterState(upstreams=upstreams, routes=list(routes)),
        listen="127.0.0.1:18080",
        prefix_dir=PREFIX,
    )


def block(config: str, opening: str) -> str:
    """The text from an opening line to its matching closing brace."""
    start = config.index(opening)
    depth = 0
    for at in range(start + len(opening) - 1, len(config)):
        depth += {"{": 1, "}": -1}.get(config[at], 0)
        if depth == 0:
            return config[start : at + 1]
    raise AssertionError(f"{opening!r} is not closed")


def split_entries(config: str, index: int) -> list[str]:
    body = block(config, f"$sy_version_{index} {{")
    return [line.strip() for line in body.splitlines()[1:-1]]


# ---------------------------------------------------------------- rendering


def test_split_lists_versions_by_weight_with_star_last():
    config = render(ModelRoute("risk", {3: 95.0, 4: 5.0}))
    assert 'split_clients "$request_id" $sy_version_0 {' in config
    assert split_entries(config, 0) == ["95% 3;", "* 4;"]


def test_zero_weight_versions_are_omitted():
    config = render(ModelRoute("risk", {1: 0.0, 2: 70.0, 3: 30.0}))
    assert split_entries(config, 0) == ["70% 2;", "* 3;"]


def test_fractional_weights_keep_two_decimals():
    config = render(ModelRoute("risk", {1: 12.5, 2: 33.33, 3: 54.17}))
    assert split_entries(config, 0) == ["12.5% 1;", "33.33% 2;", "* 3;"]
    assert percent(80.0) == "80%" and percent(0.25) == "0.25%"


def test_weights_must_add_up_to_100():
    with pytest.raises(RouterError, match="add up to 90%"):
        ModelRoute("risk", {1: 80.0, 2: 10.0})


def test_single_version_at_100_still_rewrites_to_that_version():
    config = render(ModelRoute("risk", {1: 100.0, 2: 0.0}))
    assert "split_clients" not in config
    location = block(config, "location = /v2/models/risk/infer {")
    assert "set $sy_version 1;" in location
    assert "rewrite ^ /v2/models/risk/versions/$sy_version/infer break;" in location


def test_routed_location_rewrites_unversioned_infer_and_proxies():
    config = render(ModelRoute("risk", {1: 50.0, 2: 50.0}))
    location = block(config, "location = /v2/models/risk/infer {")
    assert "set $sy_version $sy_version_0;" in location
    assert 'set $sy_model "risk";' in location
    assert "rewrite ^ /v2/models/risk/versions/$sy_version/infer break;" in location
    assert "proxy_pass http://triton;" in location


def test_sticky_route_keys_on_header_and_falls_back_to_request_id():
    config = render(ModelRoute("risk", {1: 90.0, 2: 10.0}, sticky_header="X-User-Id"))
    assert block(config, "map $http_x_user_id $sy_key_0 {").splitlines()[1:3] == [
        '        "" $request_id;',
        "        default $http_x_user_id;",
    ]
    assert 'split_clients "$sy_key_0" $sy_version_0 {' in config
    assert "set $sy_sticky $http_x_user_id;" in block(config, "location = /v2/models/risk/infer {")


def test_model_names_with_dots_and_dashes_get_exact_locations():
    config = render(ModelRoute("fraud.v2-eu_x", {1: 60.0, 2: 40.0}))
    assert "location = /v2/models/fraud.v2-eu_x/infer {" in config
    assert "rewrite ^ /v2/models/fraud.v2-eu_x/versions/$sy_version/infer break;" in config


@pytest.mark.parametrize("name", ["a b", "a/b", "a;b", "a$b", "", "x{y}"])
def test_unsafe_model_names_are_refused(name):
    with pytest.raises(RouterError, match="Model name"):
        ModelRoute(name, {1: 100.0})


def test_allowed_paths_pass_to_the_upstream_and_every_other_path_is_refused():
    config = render(ModelRoute("risk", {1: 100.0}))
    refusing = block(config, "location / {")
    assert "proxy_pass" not in refusing and "set $sy_refused 1;" in refusing
    assert 'return 403 \'{"error": "the router carries inference only: ' in refusing
    for _, pattern in allowlist.HTTP_ALLOWED:
        assert "proxy_pass http://triton;" in block(config, f'location ~ "{pattern}" {{')
    upstream = block(config, "upstream triton {")
    assert "server 127.0.0.1:8000;" in upstream and "server 127.0.0.1:8010;" in upstream
    assert "keepalive 32;" in upstream
    assert "proxy_http_version 1.1;" in config and 'proxy_set_header Connection "";' in config


def test_every_path_nginx_writes_is_under_the_prefix():
    config = render()
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        assert f'{name}_temp_path "{PREFIX}/temp/{name}";' in config
    paths = re.findall(r'"(/[^"]*)"', config)
    assert paths and all(path.startswith(PREFIX + "/") for path in paths)
    assert f'pid "{PREFIX}/nginx.pid";' in config
    assert "daemon on;" in config and "worker_processes 1;" in config
    assert "worker_shutdown_timeout 10s;" in config


def test_status_location_reports_a_generation_that_follows_the_config():
    first = render(ModelRoute("risk", {1: 90.0, 2: 10.0}))
    second = render(ModelRoute("risk", {1: 80.0, 2: 20.0}))
    assert config_generation(first) and config_generation(first) != config_generation(second)
    assert render(ModelRoute("risk", {1: 90.0, 2: 10.0})) == first
    status = block(first, "location = /__switchyard/router {")
    assert f'return 200 "{config_generation(first)}\\n";' in status


def test_config_carries_the_state_it_was_rendered_from():
    state = RouterState(
        upstreams=UPSTREAMS, routes=[ModelRoute("risk", {1: 80, 2: 20}, sticky_header="x-uid")]
    )
    config = render_config(state, listen="127.0.0.1:18080", prefix_dir=PREFIX)
    assert config_state(config) == state


def test_access_log_format_names_every_field_the_parser_reads():
    config = render()
    fmt = config.split("log_format switchyard escape=json '", 1)[1].split("';", 1)[0]
    assert set(json.loads(fmt.replace("$", ""))) >= {"ts", "uri", "request_uri", "model"}


@pytest.mark.parametrize(
    ("listen", "upstreams"),
    [("0.0.0.0:80", UPSTREAMS), ("127.0.0.1:x", UPSTREAMS), ("127.0.0.1:80", ["https://h:1"])],
)
def test_non_loopback_listen_and_bad_upstreams_are_refused(listen, upstreams):
    with pytest.raises(RouterError):
        render_config(RouterState(upstreams=upstreams, routes=[]), listen=listen, prefix_dir=PREFIX)


def test_relative_prefix_is_refused():
    with pytest.raises(RouterError, match="absolute"):
        render_config(RouterState(UPSTREAMS, []), listen="127.0.0.1:1", prefix_dir="rel/dir")


# ---------------------------------------------------------------- access log


def log_line(status=200, version="2", model="risk", rt="0.012", ts=1000.0, upstream="200"):
    return json.dumps(
        {
            "ts": f"{ts:.3f}",
            "time": "2026-11-30T10:00:00+00:00",
            "method": "POST",
            "request_uri": f"/v2/models/{model}/infer",
            "uri": f"/v2/models/{model}/versions/{version}/infer",
            "status": str(status),
            "upstream_status": upstream,
            "request_time": rt,
            "upstream_response_time": rt,
            "upstream_addr": "127.0.0.1:8000",
            "model": model,
            "version": version,
            "sticky_key": "",
            "request_id": "abc",
        },
        separators=(",", ":"),  # as nginx writes it (log_format has no spaces)
    )


def test_parse_line_reads_a_logged_request():
    entry = parse_line(log_line(status=503, upstream="503", rt="0.250"))
    assert entry is not None
    assert (entry.model, entry.version, entry.status) == ("risk", 2, 503)
    assert entry.request_time_s == 0.25 and entry.is_error and not entry.is_client_error
    assert entry.request_uri == "/v2/models/risk/infer"


def test_parse_line_skips_garbage_and_reads_pass_through_requests():
    assert parse_line("") is None and parse_line("not json") is None and parse_line("{}") is None
    entry = parse_line(log_line(model="", version="", upstream=""))
    assert entry is not None and entry.model == "" and entry.version is None


def test_summarize_counts_requests_errors_and_latency_per_version():
    lines = [log_line(version="1", rt="0.010") for _ in range(99)]
    lines += [log_line(version="1", rt="0.500")]
    lines += [log_line(version="2", status=500, upstream="500"), log_line(version="2", status=400)]
    lines += [log_line(version="2", status=502, upstream="")]  # nginx could not reach a node
    lines += [log_line(model="", version="")]  # pass-through traffic is not a release's
    summary = summarize(lines)
    assert set(summary) == {("risk", 1), ("risk", 2)}
    v1, v2 = summary[("risk", 1)], summary[("risk", 2)]
    assert (v1["requests"], v1["errors"], v1["client_errors"]) == (100, 0, 0)
    assert v1["latency_ms_avg"] == pytest.approx((99 * 10 + 500) / 100)
    assert v1["latency_ms_p99"] == pytest.approx(10.0)
    assert (v2["requests"], v2["errors"], v2["client_errors"]) == (3, 2, 1)


def test_summarize_since_drops_older_lines():
    lines = [log_line(ts=100.0), log_line(ts=200.0), log_line(ts=300.0)]
    assert summarize(lines, since=200.0)[("risk", 2)]["requests"] == 2


def test_percentile_is_nearest_rank():
    assert percentile([5.0], 99) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0


def test_tail_reads_only_new_complete_lines(tmp_path):
    path = tmp_path / "access.log"
    path.write_text(log_line(ts=1.0) + "\n")
    tail = AccessLogTail.from_end(path)
    assert tail.read_lines() == []
    with open(path, "a") as f:
        f.write(log_line(ts=2.0) + "\n" + log_line(ts=3.0)[:20])
    assert [e.ts for e in parse_lines(tail.read_lines())] == [2.0]
    with open(path, "a") as f:
        f.write(log_line(ts=3.0)[20:] + "\n")
    assert [e.ts for e in parse_lines(tail.read_lines())] == [3.0]


# ---------------------------------------------------------------- none driver


def test_none_driver_accepts_blue_green_pins():
    driver = get_driver("none")
    state = RouterState(UPSTREAMS, [ModelRoute("risk", {1: 0.0, 2: 100.0})])
    assert driver.apply(state).changed and driver.current() == state
    assert not driver.apply(state).changed


def test_none_driver_refuses_a_weighted_split():
    driver = get_driver("none")
    with pytest.raises(RouterError, match="weighted split needs a router"):
        driver.apply(RouterState(UPSTREAMS, [ModelRoute("risk", {1: 95.0, 2: 5.0})]))
    assert driver.current() is None


def test_unknown_driver_kind_is_refused():
    with pytest.raises(RouterError, match="Unknown router kind"):
        get_driver("envoy")


def test_parse_routed_reads_lines_in_the_format_nginx_is_given():
    values = {
        "$msec": "1000.250",
        "$status": "502",
        "$upstream_status": "502",
        "$request_time": "0.031",
        "$sy_model": "risk",
        "$sy_version": "2",
    }
    line = log_format()
    for variable in sorted(LOG_FIELDS.values(), key=len, reverse=True):  # $uri after $request_uri
        line = line.replace(variable, values.get(variable, "-"))
    assert parse_routed(line, "risk") == (2, 1000.25, 0.031, True)
    assert parse_routed(line, "ris") is None and parse_routed(line, "other") is None
    assert parse_routed(log_line(upstream="502, 200"), "risk") == (2, 1000.0, 0.012, False)
    assert parse_routed(log_line(status=404, upstream="404"), "risk")[3] is False
    assert parse_routed(log_line(version=""), "risk") is None  # not routed: no version
    assert parse_routed('{"model":"risk", truncated', "risk") is None


def test_release_ticks_read_each_log_line_once_from_the_interval_start(tmp_path):
    from releases import observe

    log = tmp_path / "access.log"
    log.write_text(log_line(ts=1.0) + "\n")
    start = {"at": 2.0, "log_offset": log.stat().st_size}
    with open(log, "a") as out:
        out.write(log_line(ts=3.0, version="1") + "\n" + log_line(ts=3.5)[:20])  # half a line
    seen = observe._router_interval(log, start, "risk", 0.0)
    assert seen.requests == {1: 1} and seen.errors == {1: 0}
    with open(log, "a") as out:  # nginx finishes the line and writes more
        out.write(log_line(ts=3.5, rt="0.020")[20:] + "\n")
        out.write(log_line(ts=4.0, status=502, upstream="502", rt="0.500") + "\n")
        out.write(log_line(ts=4.1, model="other") + "\n")  # another model's route
        out.write(log_line(ts=1.5) + "\n")  # logged late, finished before the interval
    seen = observe._router_interval(log, start, "risk", 0.0)
    assert seen.requests == {1: 1, 2: 2} and seen.errors == {1: 0, 2: 1}
    assert seen.ok_latencies_ms(2) == pytest.approx([20.0])  # the failed request left out
    assert seen.p99_ms(2) == pytest.approx(500.0)  # ... but not from the latency gate
    again = observe._router_interval(log, start, "risk", 0.0)
    assert again is seen and again.requests == {1: 1, 2: 2}  # nothing read twice
    log.write_text(log_line(ts=5.0) + "\n")  # rotated: shorter than what was read
    assert observe._router_interval(log, start, "risk", 0.0).requests == {2: 1}
    assert observe._router_interval(log, {"at": 2.0, "log_offset": 0}, "other", 0.0).requests == {}


def test_a_state_without_nodes_renders_a_503_instead_of_an_empty_upstream():
    state = RouterState([], [ModelRoute("risk", {1: 100.0})])
    config = render_config(state, listen="127.0.0.1:8080", prefix_dir=PREFIX)
    assert "upstream triton" not in config and "proxy_pass" not in config
    infer = block(config, f'location ~ "{allowlist.HTTP_ALLOWED[0][1]}" {{')
    assert """return 503 '{"error": "this cluster has no Triton node registered"}\\n';""" in infer
    assert "return 403" in block(config, "location / {")  # refused with or without nodes
    assert config_generation(config)  # the status location still answers


# ---------------------------------------------------------------- versions under another name


def test_a_version_served_under_a_sibling_name_is_rewritten_to_that_name():
    route = ModelRoute("risk", {1: 90.0, 2: 10.0}, targets={2: "risk--c2"})
    config = render(route)
    names = block(config, "map $sy_version_0 $sy_target_0 {").splitlines()[1:-1]
    assert [n.strip() for n in names] == ["default risk;", "2 risk--c2;"]
    location = block(config, "location = /v2/models/risk/infer {")
    assert 'set $sy_model "risk";' in location  # the log keeps the model's name
    assert "rewrite ^ /v2/models/$sy_target_0/versions/$sy_version/infer break;" in location


def test_a_pinned_sibling_is_rewritten_literally_and_the_baseline_to_the_model():
    to_sibling = render(ModelRoute("risk", {1: 0.0, 2: 100.0}, targets={2: "risk--c2"}))
    assert "map $sy_version_0" not in to_sibling
    assert "rewrite ^ /v2/models/risk--c2/versions/$sy_version/infer break;" in to_sibling
    to_baseline = render(ModelRoute("risk", {1: 100.0, 2: 0.0}, targets={2: "risk--c2"}))
    assert "rewrite ^ /v2/models/risk/versions/$sy_version/infer break;" in to_baseline


def test_targets_survive_the_state_mark_and_bad_targets_are_refused():
    route = ModelRoute("risk", {1: 50.0, 2: 50.0}, targets={2: "risk--c2"})
    state = RouterState(upstreams=UPSTREAMS, routes=[route])
    assert RouterState.from_json(json.loads(json.dumps(state.to_json()))) == state
    assert (
        "targets"
        not in RouterState(UPSTREAMS, [ModelRoute("r", {1: 100.0})]).to_json()["routes"][0]
    )
    for targets in ({3: "risk--c3"}, {2: "a b"}, {2: "x;y"}, {2: ""}):
        with pytest.raises(RouterError, match="target"):
            ModelRoute("risk", {1: 50.0, 2: 50.0}, targets=targets)


def test_a_callers_route_splits_by_arm_and_serves_its_own_version_under_each_target():
    """A graph release: the pipeline's version 4 serves both arms; arm 2 (the step's
    candidate) goes to the pipeline's sibling, and the log names the arm picked."""
    route = ModelRoute("pipe", {1: 70.0, 2: 30.0}, targets={2: "pipe--c4"}, served_version=4)
    config = render(route)
    assert split_entries(config, 0) == ["70% 1;", "* 2;"]
    location = block(config, "location = /v2/models/pipe/infer {")
    assert "set $sy_version 4;" in location and "set $sy_arm $sy_version_0;" in location
    assert "rewrite ^ /v2/models/$sy_target_0/versions/$sy_version/infer break;" in location
    pinned = render(
        ModelRoute("pipe", {1: 0.0, 2: 100.0}, targets={2: "pipe--c4"}, served_version=4)
    )
    location = block(pinned, "location = /v2/models/pipe/infer {")
    assert "set $sy_arm 2;" in location
    assert "rewrite ^ /v2/models/pipe--c4/versions/$sy_version/infer break;" in location
    # Every other request logs no arm.
    assert render(ModelRoute("risk", {1: 100.0})).count('set $sy_arm "";') >= 1
    state = RouterState(upstreams=UPSTREAMS, routes=[route])
    assert RouterState.from_json(json.loads(json.dumps(state.to_json()))) == state
    for bad in (0, -1, True, "4"):
        with pytest.raises(RouterError, match="served_version"):
            ModelRoute("pipe", {1: 100.0}, served_version=bad)
    with pytest.raises(RouterError, match="cannot mirror"):
        ModelRoute("pipe", {1: 50.0, 2: 50.0}, served_version=4, mirror=10.0, mirror_version=2)


def test_parse_routed_by_arm_reads_a_callers_arm_and_skips_lines_without_one():
    line = log_line(version="4").replace('"request_id":', '"arm":"2","request_id":')
    assert '"arm":"2"' in line
    assert parse_routed(line, "risk", by="arm")[0] == 2
    assert parse_routed(line, "risk")[0] == 4  # the version the caller served it with
    assert parse_routed(log_line(version="4"), "risk", by="arm") is None


# ---------------------------------------------------------------- shadow (mirror)


def test_a_shadow_mirrors_the_picked_share_through_its_own_server():
    route = ModelRoute(
        "risk", {1: 100.0, 2: 0.0}, targets={2: "risk--c2"}, mirror=25.0, mirror_version=2
    )
    config = render(route)
    assert 'split_clients "$http_x_request_id" $sy_mirror_pick_0 {' in config
    assert [x.strip() for x in block(config, "$sy_mirror_pick_0 {").splitlines()[1:-1]] == [
        "25% 1;",
        '* "";',
    ]
    location = block(config, "location = /v2/models/risk/infer {")
    assert "mirror /__switchyard/mirror/0;" in location and "mirror_request_body on;" in location
    assert "rewrite ^ /v2/models/risk/versions/$sy_version/infer break;" in location  # clients: v1
    main, shadow = config.split(f"listen unix:{PREFIX}/mirror.sock;")
    inner = block(main, "location = /__switchyard/mirror/0 {")
    assert "internal;" in inner and 'set $sy_model "risk";' in inner
    assert f"proxy_pass http://unix:{PREFIX}/mirror.sock;" in inner
    assert 'set $sy_mirror "1";' in shadow
    picked = block(shadow, "location = /__switchyard/mirror/0 {")
    assert 'if ($sy_mirror_pick_0 = "") {' in picked and "return 204;" in picked
    assert "mirror /__switchyard/copy/0;" in picked and "empty_gif;" in picked
    copy = block(shadow, "location = /__switchyard/copy/0 {")
    assert "rewrite ^ /v2/models/risk--c2/versions/$sy_version/infer break;" in copy
    assert "set $sy_version 2;" in copy and "proxy_ignore_client_abort on;" in copy
    assert "log_subrequest on;" in copy
    assert "limit_conn sy_mirror 64;" in shadow


def test_a_whole_shadow_mirrors_every_request_and_no_shadow_renders_no_mirror_server():
    every = render(ModelRoute("risk", {1: 100.0, 2: 0.0}, mirror=100.0, mirror_version=2))
    assert "$sy_mirror_pick_0" not in every and "mirror.sock" in every
    copy = block(every.split("listen unix:")[1], "location = /__switchyard/copy/0 {")
    assert "rewrite ^ /v2/models/risk/versions/$sy_version/infer break;" in copy
    none = render(ModelRoute("risk", {1: 100.0, 2: 0.0}))
    assert "mirror.sock" not in none and "mirror /" not in none and "unix:" not in none


def test_mirror_settings_are_checked_and_survive_the_state_mark():
    route = ModelRoute("risk", {1: 100.0, 2: 0.0}, mirror=12.5, mirror_version=2)
    state = RouterState(upstreams=UPSTREAMS, routes=[route])
    assert RouterState.from_json(json.loads(json.dumps(state.to_json()))) == state
    for bad in (
        {"mirror": 101.0, "mirror_version": 2},
        {"mirror": 5.0},
        {"mirror": 5.0, "mirror_version": 3},
    ):
        with pytest.raises(RouterError, match="mirror"):
            ModelRoute("risk", {1: 100.0, 2: 0.0}, **bad)


def test_a_mirror_line_is_the_models_and_counts_as_routed():
    line = json.dumps({"ts": "1.5", "model": "risk", "version": "2", "status": "200",
                       "upstream_status": "200", "request_time": "0.010", "mirror": "1",
                       "method": "POST", "request_uri": "/__switchyard/mirror/0",
                       "uri": "/v2/models/risk--c2/versions/2/infer"},
                      separators=(",", ":"))  # as nginx writes it  # fmt: skip
    assert parse_line(line).mirror and parse_routed(line, "risk") == (2, 1.5, 0.01, False)
    from integrations.routers.access_log import router_counts

    assert router_counts([line]).split == {"risk": 1}
