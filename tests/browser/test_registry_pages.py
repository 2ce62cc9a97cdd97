"""Registry pages in Chromium: upload through the form with progress, see the new version."""

import pytest

from models_registry.services import model_create, team_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sign_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_algorithm_user_uploads_through_the_form_and_sees_the_version(
    live_server, page, make_user, settings, tmp_path
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model_create(name="risk_score", team="fraud", actor=ada, sla={"p99_latency_ms": 50})
    archive = tmp_path / "risk_score-v2.tar.gz"
    archive.write_bytes(tar_gz(example_entries("risk_score", 2)))

    _sign_in(page, live_server.url, "ada")
    page.click("text=Models")
    page.click("text=risk_score")
    page.click("text=Upload a new version")
    page.set_input_files("#archive", str(archive))
    page.fill("#label", "v2024.05.02")
    page.fill("#source_commit", "9f1c2e7")
    page.click("#upload-button")
    ok = page.wait_for_selector("[data-testid=upload-ok]", timeout=20000)
    assert "Registered version 1" in ok.inner_text()
    assert page.inner_text("#upload-progress .progress-bar") == "done"

    page.click("[data-testid=upload-ok] a")
    page.wait_for_selector("[data-testid=config-text]")
    assert "risk_score v1" in page.inner_text("h1")
    assert "passed every check" in page.inner_text("[data-testid=validation-report]")
    io_table = page.inner_text("[data-testid=io-table]")
    assert "FEATURES" in io_table and "SCORE" in io_table and "FP32" in io_table
    assert "1/model.py" in page.inner_text("[data-testid=files-table]")
    assert page.locator("[data-testid=config-text] .pb-key").count() > 5  # highlighted

    page.click("text=risk_score >> nth=0")
    assert "v2024.05.02" in page.inner_text("[data-testid=versions-table]")


def test_refused_upload_shows_the_file_and_line(live_server, page, make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model_create(name="risk_score", team="fraud", actor=ada)
    entries = example_entries("risk_score", 1)
    broken = entries[0][1].replace(b"max_batch_size: 64", b"max_batch_size: 64\nmax_queue: 3")
    archive = tmp_path / "broken.tar.gz"
    archive.write_bytes(tar_gz([("config.pbtxt", broken), *entries[1:]]))

    _sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/models/risk_score/upload/")
    page.set_input_files("#archive", str(archive))
    page.click("#upload-button")
    errors = page.wait_for_selector("[data-testid=upload-errors]", timeout=20000)
    assert "config.pbtxt, line 5" in errors.inner_text()
    assert "max_queue" in errors.inner_text()


def test_the_config_editor_makes_a_derived_version_and_shows_refusals_by_line(
    live_server, page, make_user, settings, tmp_path
):
    import io

    from models_registry.models import ModelVersion
    from models_registry.services import model_version_register

    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    make_user("mia", role="managers")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    archive = io.BytesIO(tar_gz(example_entries("risk_score", 1)))
    model_version_register(model=model, archive=archive, actor=ada)

    _sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/models/risk_score/versions/1/")
    page.click("text=Edit config as a new version")
    editor = page.locator("#id_config_text")
    text = editor.input_value()
    assert 'name: "risk_score"' in text
    # A typo first: refused with its line, nothing registered, the edit kept.
    editor.fill(text.replace("max_batch_size: 64", "max_batch_size: 64\nmax_queue: 3"))
    page.click("text=Check and register")
    errors = page.wait_for_selector("[data-testid=derive-errors]")
    assert "line 5" in errors.inner_text() and "max_queue" in errors.inner_text()
    assert "max_queue: 3" in editor.input_value()
    assert ModelVersion.objects.count() == 1

    tuned = text.replace("max_queue_delay_microseconds: 500", "max_queue_delay_microseconds: 2500")
    editor.fill(tuned)
    page.fill("#id_label", "queue-2500")
    page.click("text=Check and register")
    page.wait_for_selector("[data-testid=derived-from]")
    assert "risk_score v2" in page.inner_text("h1")
    assert "v1" in page.inner_text("[data-testid=derived-from]")
    diff = page.inner_text("[data-testid=config-diff]")
    assert "-  max_queue_delay_microseconds: 500" in diff
    assert "+  max_queue_delay_microseconds: 2500" in diff
    derived = ModelVersion.objects.get(version=2)
    assert derived.label == "queue-2500" and derived.derived_from.version == 1
    assert derived.config_text == tuned  # the editor's text as written, comments kept

    # Someone outside the model's team never sees the editor.
    page.context.clear_cookies()
    _sign_in(page, live_server.url, "mia")
    page.goto(f"{live_server.url}/models/risk_score/versions/2/")
    assert page.locator("text=Edit config as a new version").count() == 0
    refused = page.goto(f"{live_server.url}/models/risk_score/versions/2/derive/")
    assert refused.status == 403
