"""A real Prometheus scrapes the control plane's /metrics (served by daphne) with the bearer
token and loads the shipped alert rules; the rules and the Grafana dashboard are checked."""

import http.client
import json
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from deployments.models import TritonCluster, TritonNode
from integrations.triton.local import free_ports
from observability.exposition import render
from tests.conftest import stop_process, wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "switchyard-dashboard.json"
TOKEN = "metrics-token-for-the-test"
PROMQL_NAMES = re.compile(r"\bswitchyard_[a-z0-9_]+")


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(f"/usr/bin/{name}")
    if not found:
        pytest.skip(f"Debian's prometheus package ({name}) is not installed")
    return found


def get_json(port: int, path: str) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def query(port: int, promql: str) -> list[dict]:
    path = "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    return get_json(port, path)["data"]["result"]


@pytest.fixture
def metrics_server(monkeypatch, request):
    """daphne serving the app with a metrics token and no network allowed without it."""
    monkeypatch.setenv("SWITCHYARD_METRICS_TOKEN", TOKEN)
    monkeypatch.setenv("SWITCHYARD_METRICS_ALLOWED_NETWORKS", "")
    return request.getfixturevalue("daphne_server")


def start_prometheus(tmp_path: Path, target: str) -> tuple[subprocess.Popen, int, Path]:
    (port,) = free_ports(1)
    (tmp_path / "token").write_text(TOKEN)
    shutil.copy(RULES, tmp_path / "alerts.yml")
    job = f"    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n"
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n"
        "  - job_name: switchyard\n    authorization: {credentials_file: token}\n" + job + ""
        "  - job_name: switchyard-without-token\n" + job
    )
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc, port, log


@pytest.mark.django_db(transaction=True)
def test_prometheus_scrapes_metrics_with_the_token_and_loads_the_alert_rules(
    metrics_server, tmp_path
):
    cluster = TritonCluster.objects.create(name="prod", environment="production")
    TritonNode.objects.create(
        cluster=cluster, name="n1", http_url="http://127.0.0.1:9", health="up"
    )
    proc, port, log = start_prometheus(tmp_path, metrics_server)
    try:

        def scraped() -> list[dict]:
            try:
                return query(port, 'switchyard_node_up{job="switchyard"}')
            except (OSError, ValueError, KeyError):
                return []

        try:
            (sample,) = wait_for(scraped, timeout_s=60, what="scrape", proc=proc, log=log)
        except RuntimeError:
            targets = get_json(port, "/api/v1/targets")["data"]["activeTargets"]
            raise AssertionError([(t["scrapePool"], t["lastError"]) for t in targets]) from None
        assert sample["metric"]["cluster"] == "prod" and sample["metric"]["node"] == "n1"
        assert sample["value"][1] == "1"

        def both_jobs_scraped() -> dict:
            ups = {r["metric"]["job"]: r["value"][1] for r in query(port, "up")}
            return ups if len(ups) == 2 else {}

        ups = wait_for(both_jobs_scraped, timeout_s=30, what="up", proc=proc, log=log)
        assert ups == {"switchyard": "1", "switchyard-without-token": "0"}  # 401 without it
        groups = get_json(port, "/api/v1/rules")["data"]["groups"]
        rules = {r["name"]: r["health"] for g in groups for r in g["rules"]}
        assert "SwitchyardNodeDown" in rules and set(rules.values()) <= {"ok", "unknown"}
    finally:
        stop_process(proc)


def test_alert_rules_pass_promtool_check_and_their_unit_tests():
    promtool = tool("promtool")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    tests = RULES.parent / "alerts_test.yml"
    unit = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout + unit.stderr


def exposed_names() -> set[str]:
    """Every sample name /metrics can expose (families are listed even without samples)."""
    names = set()
    for line in render().decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            # A counter's TYPE line already ends in _total; a histogram's names its base.
            suffixes = {"histogram": ["_bucket", "_sum", "_count"]}
            names.update(name + s for s in suffixes.get(kind, [""]))
    return names


@pytest.mark.django_db
def test_every_dashboard_and_alert_query_names_a_metric_that_metrics_exposes():
    exposed = exposed_names()
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs + re.findall(r"expr: (.+)", RULES.read_text()):
        used = set(PROMQL_NAMES.findall(expr))
        assert used, f"no Switchyard metric in {expr!r}"
        assert used <= exposed, f"{expr!r} names {used - exposed}, not exposed by /metrics"
