"""The unrouted share as pure functions: the share itself, its words, the refusal rule, the
access-log counts it is made of, and the router's gRPC pass-through as rendered and parsed."""

import json

import pytest

from integrations.routers import RouterError, RouterState
from integrations.routers.access_log import LOG_FIELDS, last_lines, router_counts
from integrations.routers.base import grpc_address
from integrations.routers.nginx import config_state, render_config
from integrations.routers.settings import RouterSettingsError, parse_router
from releases.unrouted import UNPROTECTED, UnroutedMeasure, exceeds, percent, unrouted_share

# ---------------------------------------------------------------- the share


@pytest.mark.parametrize(
    ("triton", "split", "share"),
    [
        (100, 100, 0.0),
        (100, 75, 0.25),
        (100, 0, 1.0),
        (200, 190, 0.05),
        (100, 120, 0.0),  # the router counted a few more at the window's edge: never negative
        (10, -3, 1.0),
    ],
)
def test_share_is_the_part_of_tritons_requests_the_split_did_not_count(triton, split, share):
    assert unrouted_share(triton, split) == pytest.approx(share)


@pytest.mark.parametrize("triton", [0, -1, 0.0])
def test_no_request_counted_by_triton_is_not_a_share(triton):
    assert unrouted_share(triton, 0) is None


def test_measure_names_the_share_and_the_unprotected_clients():
    measure = UnroutedMeasure.of(400, 350)
    assert measure.share == pytest.approx(0.125)
    assert measure.unrouted_requests == 50
    text = measure.text()
    assert "12.5% of 400 requests (50)" in text
    assert "gRPC clients" in text and "calling a node directly" in text
    assert UNPROTECTED in text
    stored = measure.to_json()
    assert stored["share"] == pytest.approx(0.125) and stored["share_percent"] == "12.5%"
    assert stored["text"] == text and stored["unrouted_requests"] == 50
    json.dumps(stored)  # stored on the release as it is


def test_measure_says_when_everything_went_through_the_split_or_nothing_was_measured():
    assert "All 80 requests" in UnroutedMeasure.of(80, 80).text()
    assert UnroutedMeasure.of(0, 0).text().startswith("Not measured")
    why = "Not measured: no log."
    assert UnroutedMeasure(0, 0, None, why=why).text() == why
    assert UnroutedMeasure.of(0, 0).share_percent == ""


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        (UnroutedMeasure.of(100, 90), True),  # 10% > 5%
        (UnroutedMeasure.of(100, 95), False),  # exactly at the limit
        (UnroutedMeasure.of(20, 0), False),  # 100% but on too little traffic to refuse on
        (UnroutedMeasure.of(0, 0), False),  # not measured
        (None, False),  # no router
    ],
)
def test_a_start_is_refused_only_above_the_limit_on_enough_traffic(measure, expected):
    assert exceeds(measure, max_share=0.05, min_requests=50) is expected


def test_percent_keeps_one_decimal_at_most():
    assert percent(0.125) == "12.5%"
    assert percent(0.05) == "5%"
    assert percent(1.0) == "100%"


# ---------------------------------------------------------------- access-log counts


def line(ts: float, uri: str, *, method: str = "POST", model: str = "", version: str = "") -> str:
    """A log line as the rendered nginx config writes it (fields in LOG_FIELDS' order)."""
    values = dict.fromkeys(LOG_FIELDS, "")
    values.update(
        ts=f"{ts:.3f}", method=method, request_uri=uri, uri=uri, status="200", model=model
    )
    values["version"] = version
    return json.dumps(values, separators=(",", ":"))


def test_router_counts_sort_inference_by_what_a_release_can_do_with_it():
    lines = [
        line(100.0, "/v2/models/risk/infer"),  # before a release: passes, but would be split
        line(101.0, "/v2/models/risk/infer", model="risk", version="2"),  # split by a release
        line(102.0, "/v2/models/risk/infer?x=1"),
        line(103.0, "/v2/models/risk/versions/1/infer"),  # names a version: unsplit
        line(104.0, "/inference.GRPCInferenceService/ModelInfer"),
        line(105.0, "/inference.GRPCInferenceService/ModelStreamInfer"),
        line(106.0, "/inference.GRPCInferenceService/ServerLive"),  # not inference
        line(107.0, "/v2/models/risk/infer", method="GET"),
        line(108.0, "/v2/models/risk/ready", method="GET"),
        line(109.0, "/v2/models/other/infer"),
        "not json at all, infer",
        "",
    ]
    counts = router_counts(lines)
    assert counts.split == {"risk": 3, "other": 1}
    assert counts.versioned == {"risk": 1}
    assert counts.grpc == 2


def test_router_counts_keep_only_the_lines_whose_time_is_wanted():
    lines = [line(float(ts), "/v2/models/risk/infer") for ts in range(50, 70)]
    counts = router_counts(lines, keep=lambda ts: 60 <= ts < 65)
    assert counts.split == {"risk": 5}


def test_last_lines_reads_the_end_of_a_log_and_says_whether_it_reached_its_start(tmp_path):
    log = tmp_path / "access.log"
    log.write_text("".join(f"line {i:04d}\n" for i in range(100)) + "half a li")
    lines, whole = last_lines(log, 10_000)
    assert whole and len(lines) == 100 and lines[0] == "line 0000"
    lines, whole = last_lines(log, 55)  # 10 bytes a line: the first one read is cut
    assert not whole and lines[-1] == "line 0099" and all(len(x) == 9 for x in lines)
    assert last_lines(tmp_path / "missing.log", 100) == ([], True)


# ---------------------------------------------------------------- gRPC pass-through

UPSTREAMS = ["http://127.0.0.1:8000", "http://127.0.0.1:8010"]
GRPC = ["127.0.0.1:8001", "127.0.0.1:8011"]


def render(state: RouterState, grpc_listen: str = "127.0.0.1:18081") -> str:
    return render_config(
        state, listen="127.0.0.1:18080", prefix_dir="/srv/router-a", grpc_listen=grpc_listen
    )


def test_grpc_listener_passes_every_call_through_to_the_nodes_grpc_ports_unsplit():
    config = render(RouterState(UPSTREAMS, [], grpc_upstreams=GRPC))
    assert "upstream triton_grpc {\n        server 127.0.0.1:8001;\n" in config
    assert "listen 127.0.0.1:18081 http2;" in config
    assert "grpc_pass grpc://triton_grpc;" in config
    assert "split_clients" not in config.split("upstream triton_grpc", 1)[1]


def test_grpc_listener_without_a_node_answers_unavailable():
    config = render(RouterState(UPSTREAMS, [], grpc_upstreams=[]))
    grpc_server = config.split("listen 127.0.0.1:18081 http2;", 1)[1]
    assert "return 503;" in grpc_server and "triton_grpc" not in config


def test_no_grpc_listener_renders_no_grpc_server():
    config = render(RouterState(UPSTREAMS, [], grpc_upstreams=GRPC), grpc_listen="")
    assert "http2" not in config and "grpc_pass" not in config


def test_grpc_upstreams_survive_the_state_kept_in_the_config():
    state = RouterState(UPSTREAMS, [], grpc_upstreams=GRPC)
    assert config_state(render(state)) == state
    old = RouterState.from_json({"upstreams": UPSTREAMS, "routes": []})  # before gRPC
    assert old.grpc_upstreams == []


@pytest.mark.parametrize("bad", ["127.0.0.1", "http://127.0.0.1:8001", "a b:1", "h:0", "[::1]:1"])
def test_unusable_grpc_upstreams_are_refused(bad):
    with pytest.raises(RouterError):
        grpc_address(bad)
    with pytest.raises(RouterError):
        RouterState(UPSTREAMS, [], grpc_upstreams=[bad])


def test_grpc_address_accepts_host_port_and_the_grpc_scheme():
    assert grpc_address("triton-0.local:8001") == "triton-0.local:8001"
    assert grpc_address("grpc://127.0.0.1:8001") == "127.0.0.1:8001"


def test_grpc_listen_is_checked_like_listen_and_on_a_port_of_its_own():
    base = {"driver": "nginx", "listen": "127.0.0.1:18080"}
    assert parse_router({**base, "grpc_listen": "127.0.0.1:18081"}).grpc_listen == (
        "127.0.0.1:18081"
    )
    for bad in ("0.0.0.0:18081", "127.0.0.1:x", "127.0.0.1:18080"):
        with pytest.raises(RouterSettingsError) as refused:
            parse_router({**base, "grpc_listen": bad})
        assert refused.value.field == "router.grpc_listen"
    with pytest.raises(RouterSettingsError):
        parse_router({"driver": "none", "grpc_listen": "127.0.0.1:18081"})
