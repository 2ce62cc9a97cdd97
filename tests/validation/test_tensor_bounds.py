"""Requests the control plane builds itself are bounded before anything is allocated:
benchmark dims_override and batch_size, and the dims of an uploaded config."""

import io

import pytest
from rest_framework.test import APIClient

from benchmarks.models import BenchmarkRun
from deployments.services import cluster_create, node_create
from integrations.triton.inputs import TensorLimits, generate_inputs
from integrations.triton.model_config import validate_model_config
from models_registry.services import (
    RegistryError,
    model_create,
    model_version_register,
    team_create,
)
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db

FLEXIBLE = {
    "name": "flex",
    "max_batch_size": 64,
    "input": [{"name": "FEATURES", "data_type": "TYPE_FP32", "dims": ["-1"]}],
}


@pytest.fixture
def api(settings, tmp_path, make_user):
    """A staging cluster (a node that is never contacted: the request is refused first) and a
    version whose input takes any length."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    entries = example_entries("risk_score", 1)
    config = entries[0][1].replace(b"dims: [ 128 ]", b"dims: [ -1 ]")
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    model_version_register(model=model, actor=ada, archive=archive)
    cluster = cluster_create(actor=rita, name="stage", environment="staging")
    node_create(cluster=cluster, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    client = APIClient()
    client.force_authenticate(ada)
    return client


def _start(api, **extra):
    body = {"model": "risk_score", "version": 1, "cluster": "stage", "duration_s": 1}
    return api.post("/api/v1/benchmarks/", {**body, **extra}, format="json")


@pytest.mark.parametrize(
    "extra",
    [
        {"dims_override": {"FEATURES": [10**12]}},  # 256 TB of floats: used to be allocated
        {"dims_override": {"FEATURES": [2**70]}},
        {"dims_override": {"FEATURES": [300_000]}, "batch_size": 64},  # 76 MB request
    ],
)
def test_oversize_benchmark_requests_are_refused_before_allocating(api, extra):
    response = _start(api, **extra)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] in ("dims_override", "dims_override.FEATURES")
    assert not BenchmarkRun.objects.exists()


def test_a_benchmark_within_the_limits_is_accepted(api):
    response = _start(api, dims_override={"FEATURES": [256]}, batch_size=4)
    assert response.status_code == 202, response.content
    BenchmarkRun.objects.all().delete()


def test_the_limits_are_checked_from_the_shapes():
    limits = TensorLimits(max_elements=1000, max_bytes=2000)
    assert generate_inputs(FLEXIBLE, dims_override={"FEATURES": [500]}, limits=limits)
    with pytest.raises(ValueError, match="elements"):
        generate_inputs(FLEXIBLE, dims_override={"FEATURES": [1001]}, limits=limits)
    with pytest.raises(ValueError, match="bytes"):
        generate_inputs(FLEXIBLE, dims_override={"FEATURES": [600]}, limits=limits)


def test_a_config_with_huge_fixed_dims_is_refused_at_upload():
    text = (
        'name: "big"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "X" data_type: TYPE_FP32 dims: [ 100000, 100000 ] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }]\n'
    )
    report = validate_model_config(text, model_name="big", version_files=["model.py"])
    assert not report.is_valid
    assert "elements" in report.issues[0].message


@pytest.mark.django_db
def test_an_upload_is_checked_against_the_operators_tensor_limit(settings, tmp_path, make_user):
    """risk_score's input is 128 elements: within the default, refused under a limit of 100."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_MAX_TENSOR_ELEMENTS = 100
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    archive = io.BytesIO(tar_gz(example_entries("risk_score", 1)))

    with pytest.raises(RegistryError) as refused:
        model_version_register(model=model, actor=ada, archive=archive)

    assert "more than 100 elements" in str(refused.value.errors)
