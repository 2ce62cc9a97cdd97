"""A streaming model's live page in Chromium: the example decoupled model streams through a
real Triton node, counts its tokens, and the real collector's points draw its output
tokens a second on a chart of their own (static/console/live.js `chart-tokens`)."""

import threading
import uuid

import pytest

from models_registry.models import Model, ModelVersion, Team
from tests.telemetry.live import (
    db_cluster,
    load_example,
    running_collector,
    streaming,
    unload,
)

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]

POINTS = "Number(document.getElementById('chart-tokens').dataset.points || 0)"


def _registered(name: str, config: dict) -> None:
    """The model in the registry with one version of the config the node serves (the page
    charts tokens for a decoupled model)."""
    model = Model.objects.create(name=name, team=Team.objects.create(name=f"t-{name}"))
    ModelVersion.objects.create(
        model=model, version=1, label="v1", config_text="", config_json=config,
        manifest={}, digest="0" * 64, size_bytes=0,
    )  # fmt: skip


def test_a_streaming_models_live_page_charts_its_output_tokens(
    triton_cluster, daphne_server, page, make_user
):
    nodes = triton_cluster.nodes
    name = f"tok_{uuid.uuid4().hex[:8]}"
    db_cluster(name.replace("_", "-"), nodes)
    make_user("olga", role="release-managers")
    config = load_example(nodes, example="token_stream", name=name, versions=[1])
    assert config["model_transaction_policy"]["decoupled"] is True
    _registered(name, config)
    base, stop = f"http://{daphne_server}", threading.Event()
    client = threading.Thread(target=streaming, args=(nodes[0], name, stop))
    try:
        client.start()
        with running_collector(1.0):
            page.goto(f"{base}/login/")
            page.fill("#id_username", "olga")
            page.fill("#id_password", "pw-olga")
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            page.goto(f"{base}/models/{name}/live/")
            page.wait_for_selector("[data-testid=ws-badge]:has-text('live')", timeout=15000)
            page.wait_for_function(f"{POINTS} >= 2", timeout=20000)
            trace = page.evaluate("document.getElementById('chart-tokens').data[0]")
            # One stream at a time of 11 tokens, each ~140 ms: tens of tokens a second.
            assert trace["name"].endswith(" v1") and 10 < max(trace["y"]) < 200, trace["y"]
    finally:
        stop.set()
        client.join(30)
        unload(nodes, name)


def test_a_model_that_does_not_stream_has_no_tokens_chart(client, make_user):
    _registered("plain_tok", {"name": "plain_tok", "backend": "python"})
    client.force_login(make_user("olga", role="release-managers"))
    page = client.get("/models/plain_tok/live/").content.decode()
    assert 'id="chart-rate"' in page and 'id="chart-tokens"' not in page
