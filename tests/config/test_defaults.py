"""The settings with nothing configured, and the public surface of the package."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import gencoach.config
from gencoach.config import Settings, load_settings

from .checks import Load, Write


def test_defaults_are_valid_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no file and no variables, load_settings returns the documented defaults."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, {})
    assert settings.source is None
    assert settings.redis.url == "embedded"
    assert settings.redis.key_prefix == "gencoach"
    assert settings.coaching.enabled is False
    assert settings.coaching.max_pending_per_stage == 5
    assert settings.coaching.max_unproven_per_stage == 5
    assert settings.coaching.max_alternatives_per_situation == 3
    assert settings.coaching.lease_s == 30.0
    assert all(dict(settings.coaching.routes).values())
    assert settings.coaching.examples.register_successful is False
    assert settings.coaching.examples.use_for_automatic is False
    assert settings.coaching.examples.cache_dir == Path("cache")
    assert settings.backends == {}
    assert settings.workers.queues == ["gencoach-repair", "gencoach-diagnosis"]
    assert (settings.workers.processes, settings.workers.concurrency) == (1, 32)
    assert (settings.workers.mode, settings.workers.shutdown_grace_s) == ("async", 30.0)
    assert settings.workers.job_timeout_s == 300.0
    assert settings.controller.consumer is None
    assert (settings.controller.batch_size, settings.controller.grace_s) == (500, 10.0)
    assert (settings.controller.lease_s, settings.controller.gap_timeout_s) == (10.0, 30.0)
    assert (settings.api.host, settings.api.port, settings.api.token_env) == (
        "127.0.0.1",
        8750,
        None,
    )
    assert settings.output_dir == Path("output")
    assert settings.agents == ["http://127.0.0.1", "http://localhost"]
    assert (settings.log.level, settings.log.format) == ("info", "auto")


def test_empty_file_gives_the_defaults(load: Load) -> None:
    """An empty config file is valid and equals the defaults."""
    assert load("").model_dump() == Settings().model_dump()


def test_default_file_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Write
) -> None:
    """With no path given, ./gencoach.yaml is read when it exists."""
    write("coaching: {max_pending_per_stage: 7}\n")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, {})
    assert settings.coaching.max_pending_per_stage == 7
    assert settings.source == Path("gencoach.yaml")


def test_settings_are_immutable() -> None:
    """Settings cannot be changed after validation; a reload builds new ones."""
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.coaching.max_pending_per_stage = 9  # type: ignore[misc]


def test_public_surface_is_pinned() -> None:
    """The package exports exactly these names, sorted."""
    assert gencoach.config.__all__ == [
        "CONFIG_ENV_VAR",
        "DEFAULT_CONFIG_FILE",
        "ENV_NESTED_DELIMITER",
        "ENV_PREFIX",
        "MASK",
        "ApiSettings",
        "BackendSettings",
        "CoachingSettings",
        "ControllerSettings",
        "ExamplesSettings",
        "Limits",
        "LogSettings",
        "RedisSettings",
        "RouteSwitches",
        "Settings",
        "WorkerSettings",
        "load_settings",
        "redacted",
    ]
    for name in gencoach.config.__all__:
        assert hasattr(gencoach.config, name)


def test_empty_sections_give_their_defaults(load: Load) -> None:
    """A section left null (its entries commented out) means that section's defaults."""
    settings = load("coaching:\n  routes:\nbackends:\nredis:\n")
    assert settings.model_dump() == Settings().model_dump()
