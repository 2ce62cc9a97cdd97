"""Environment variable names (controlplane/env.py): Switchyard's own are SWITCHYARD_*, and a
renamed one is still read under its old name, with a warning that names the new one."""

import logging

import pytest

from controlplane.env import RENAMED, SwitchyardEnv, name_to_read
from tests.unit.test_architecture_doc import SETTINGS_FILES, env_names_read

# Names set by convention for the tools that read them keep their own prefix.
CONVENTIONAL = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}


def _env(**variables: str) -> SwitchyardEnv:
    env = SwitchyardEnv()
    env.ENVIRON = variables
    return env


def test_the_new_name_is_read_without_a_warning(recwarn):
    env = _env(SWITCHYARD_TELEMETRY_INTERVAL_S="0.5")
    assert env.float("SWITCHYARD_TELEMETRY_INTERVAL_S", default=2.0) == 0.5
    assert not [w for w in recwarn if w.category is DeprecationWarning]


def test_an_old_name_alone_is_read_with_a_warning_naming_the_new_one(caplog):
    env = _env(TELEMETRY_INTERVAL_S="1", BENCHMARK_MAX_CONCURRENCY="64")
    message = "TELEMETRY_INTERVAL_S is deprecated: set SWITCHYARD_TELEMETRY_INTERVAL_S instead"
    with caplog.at_level(logging.WARNING, "controlplane.env"):
        with pytest.warns(DeprecationWarning, match=message):
            assert env.float("SWITCHYARD_TELEMETRY_INTERVAL_S", default=2.0) == 1.0
        with pytest.warns(DeprecationWarning, match="set SWITCHYARD_BENCHMARK_MAX_CONCURRENCY"):
            assert env.int("SWITCHYARD_BENCHMARK_MAX_CONCURRENCY", default=256) == 64
    assert message in caplog.text


def test_the_new_name_wins_over_the_old_one_and_the_default_stays(recwarn):
    env = _env(SWITCHYARD_CELERY_QUEUE="new", CELERY_QUEUE="old")
    assert env.str("SWITCHYARD_CELERY_QUEUE", default="switchyard") == "new"
    assert _env().str("SWITCHYARD_CELERY_QUEUE", default="switchyard") == "switchyard"
    assert _env().list("SWITCHYARD_LOG_LEVEL", default=["INFO"]) == ["INFO"]
    assert not [w for w in recwarn if w.category is DeprecationWarning]
    assert name_to_read("DATABASE_URL", {"DATABASE_URL": "x"}) == "DATABASE_URL"


def test_settings_read_only_switchyard_names_and_conventional_ones():
    read = env_names_read(SETTINGS_FILES)
    others = sorted(
        n for n in read if not n.startswith(("SWITCHYARD_", "DJANGO_")) and n not in CONVENTIONAL
    )
    assert others == [], "name these SWITCHYARD_* (old name in controlplane/env.py RENAMED)"
    assert set(RENAMED) <= read, "every new name is read by the settings"
    assert not set(RENAMED.values()) & read, "old names are read only through RENAMED"
    assert all(new.startswith("SWITCHYARD_") for new in RENAMED)
