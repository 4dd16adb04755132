"""Every invalid setting is refused at start-up, naming its key path and its value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gencoach.config import load_settings
from gencoach.errors import ConfigError

from .checks import Refuse, assert_names, problem_at

BACKEND = {
    "type": "openai",
    "endpoint": "http://localhost:8000/v1/chat/completions",
    "default_model": "m",
}


def backend_yaml(**changes: object) -> str:
    """A config file with one backend, `local`, changed by `changes`."""
    return yaml.safe_dump({"backends": {"local": {**BACKEND, **changes}}})


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("coaching: {max_pending_per_stage: true}", "coaching.max_pending_per_stage", True),
        ("coaching: {max_unproven_per_stage: 0}", "coaching.max_unproven_per_stage", 0),
        ("workers: {processes: -2}", "workers.processes", -2),
        (
            "coaching: {max_alternatives_per_situation: 2.5}",
            "coaching.max_alternatives_per_situation",
            2.5,
        ),
        ("coaching: {lease_s: 0}", "coaching.lease_s", 0),
        ("coaching: {max_attempts: 0}", "coaching.max_attempts", 0),
        ("coaching: {max_pending_per_stage: null}", "coaching.max_pending_per_stage", None),
        ("workers: {job_timeout_s: .inf}", "workers.job_timeout_s", float("inf")),
        ("api: {port: 70000}", "api.port", 70000),
        ("colour: blue", "colour", "blue"),
        ("coaching: {examples: {cache: x}}", "coaching.examples.cache", "x"),
        ("coaching: {routes: {rewrite: false}}", "coaching.routes.rewrite", False),
        ("redis: {url: 'http://localhost:6379'}", "redis.url", "http://localhost:6379"),
        ("redis: {url: 'redis:///0'}", "redis.url", "redis:///0"),
        ("redis: {url: 'redis://h:port'}", "redis.url", "redis://h:port"),
        ("agents: ['ftp://files']", "agents[0]", "ftp://files"),
        ("log: {level: LOUD}", "log.level", "LOUD"),
        ("workers: {queues: [a, a]}", "workers.queues", ["a", "a"]),
        ("workers: {concurrency: 0}", "workers.concurrency", 0),
        ("workers: {mode: threads}", "workers.mode", "threads"),
        ("workers: {shutdown_grace_s: -1}", "workers.shutdown_grace_s", -1),
    ],
)
def test_invalid_value_is_refused(refuse: Refuse, text: str, path: str, value: object) -> None:
    """A bool, zero, negative or fractional limit, an unknown key or a bad URL is named."""
    assert_names(refuse(text), path, value)


@pytest.mark.parametrize(
    ("changes", "path", "value"),
    [
        ({"endpoint": "ftp://llm/v1"}, "backends.local.endpoint", "ftp://llm/v1"),
        ({"endpoint": "localhost:8000"}, "backends.local.endpoint", "localhost:8000"),
        ({"type": "vllm"}, "backends.local.type", "vllm"),
        ({"timeout_s": 30, "timeout": 30}, "backends.local.timeout", 30),
        ({"max_retry": 1, "max_retries": 1}, "backends.local.max_retry", 1),
        ({"max_retries": -1}, "backends.local.max_retries", -1),
        ({"max_concurrency": False}, "backends.local.max_concurrency", False),
        ({"structured_output": "grammar"}, "backends.local.structured_output", "grammar"),
        ({"default_model": ""}, "backends.local.default_model", ""),
        ({"api_key_env": "not a name"}, "backends.local.api_key_env", "not a name"),
    ],
)
def test_invalid_backend_is_refused(
    refuse: Refuse, changes: dict[str, object], path: str, value: object
) -> None:
    """A backend's bad endpoint, type, limit or both spellings of one key is named."""
    assert_names(refuse(backend_yaml(**changes)), path, value)


@pytest.mark.parametrize("endpoint", ["pkg.module.function", "pkg.module:", "pkg-x:run", ":f"])
def test_python_backend_needs_an_import_path(refuse: Refuse, endpoint: str) -> None:
    """A python backend's endpoint must look like package.module:function."""
    error = refuse(f"backends: {{rules: {{type: python, endpoint: '{endpoint}'}}}}")
    assert_names(error, "backends.rules.endpoint", endpoint)


def test_missing_backend_key_is_named(refuse: Refuse) -> None:
    """A backend without a type says the key is required."""
    problem = problem_at(refuse("backends: {b: {endpoint: 'http://x'}}"), "backends.b.type")
    assert problem.message == "is required"


def test_coaching_without_backend_is_refused(refuse: Refuse) -> None:
    """Enabling coaching with no backend is an error at coaching.enabled."""
    problem = assert_names(refuse("coaching: {enabled: true}"), "coaching.enabled", True)
    assert "no backend" in problem.message


def test_coaching_without_backend_is_reported_beside_other_coaching_errors(
    refuse: Refuse,
) -> None:
    """The missing backend is still reported when the coaching section has other errors."""
    error = refuse("coaching: {enabled: true, max_pending_per_stage: 0}")
    assert_names(error, "coaching.enabled", True)
    assert_names(error, "coaching.max_pending_per_stage", 0)
    assert len(error.problems) == 2


def test_unknown_variable_is_refused(refuse: Refuse) -> None:
    """A misspelt GENCOACH_ variable is an unknown key naming the variable."""
    error = refuse("", {"GENCOACH_COACHNG__ENABLED": "true"})
    problem = assert_names(error, "coachng (GENCOACH_COACHNG__ENABLED)", {"enabled": "true"})
    assert problem.message == "unknown key"


def test_invalid_variable_value_names_the_variable(refuse: Refuse) -> None:
    """A variable's bad value is reported at its key path with the variable's name."""
    error = refuse(
        "",
        {
            "GENCOACH_COACHING__MAX_PENDING_PER_STAGE": "0",
            "GENCOACH_COACHING__MAX_UNPROVEN_PER_STAGE": "five",
            "GENCOACH_AGENTS": "[not json",
            "GENCOACH_": "x",
        },
    )
    path = "coaching.max_pending_per_stage (GENCOACH_COACHING__MAX_PENDING_PER_STAGE)"
    assert_names(error, path, "0")
    path = "coaching.max_unproven_per_stage (GENCOACH_COACHING__MAX_UNPROVEN_PER_STAGE)"
    assert_names(error, path, "five")
    assert_names(error, "agents (GENCOACH_AGENTS)", "[not json")
    problem_at(error, "GENCOACH_")


def test_a_variable_inside_a_value_another_variable_sets_is_refused(refuse: Refuse) -> None:
    """Two variables that both set coaching.routes, one whole and one a key inside it, are
    refused naming both, rather than one silently winning."""
    error = refuse(
        "",
        {"GENCOACH_COACHING__ROUTES": "off", "GENCOACH_COACHING__ROUTES__FORMAT": "false"},
    )
    problem = problem_at(error, "GENCOACH_COACHING__ROUTES__FORMAT")
    assert problem.message == (
        "sets a key inside coaching.routes, which GENCOACH_COACHING__ROUTES sets"
    )
    assert_names(error, "coaching.routes (GENCOACH_COACHING__ROUTES)", "off")
    assert len(error.problems) == 2


def test_missing_explicit_file_is_refused(tmp_path: Path) -> None:
    """An explicit config path that does not exist is an error naming it."""
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(ConfigError) as caught:
        load_settings(missing, {})
    problem = assert_names(caught.value, "config file", str(missing))
    assert problem.message == "does not exist"


def test_invalid_yaml_is_refused_with_its_line(refuse: Refuse) -> None:
    """Broken YAML is reported with its line, column and text."""
    error = refuse("coaching:\n  enabled: true\n  lease_s: 3: 4\n")
    problem = assert_names(error, "line 3, column 13", "lease_s: 3: 4")
    assert problem.message.startswith("invalid YAML")


def test_duplicate_yaml_key_is_refused(refuse: Refuse) -> None:
    """A key given twice in one mapping is an error, not a silent override."""
    error = refuse("coaching:\n  enabled: false\n  enabled: true\n")
    problem = assert_names(error, "line 3, column 3", "enabled: true")
    assert "found the key 'enabled' twice" in problem.message


def test_yaml_that_is_not_a_mapping_is_refused(refuse: Refuse) -> None:
    """A file holding a list instead of a mapping is refused, showing what it holds."""
    problem = assert_names(refuse("- a\n- b\n"), "(top level)", ["a", "b"])
    assert "not a list" in problem.message


def test_every_problem_is_reported_at_once(refuse: Refuse) -> None:
    """Problems in the file, in the variables and across sections all come in one error."""
    error = refuse(
        """
        redis: {url: "mysql://db"}
        coaching: {enabled: true, max_pending_per_stage: false, routes: {format: maybe}}
        workers: {processes: 0, queues: []}
        api: {port: 0, token_env: "not a name"}
        agents: ["x"]
        extra: 1
        """,
        {"GENCOACH_LOG__LEVEL": "verbose", "GENCOACH_BACKEND__X__TYPE": "openai"},
    )
    assert sorted(problem.path for problem in error.problems) == sorted(
        [
            "redis.url",
            "coaching.enabled",
            "coaching.max_pending_per_stage",
            "coaching.routes.format",
            "workers.processes",
            "workers.queues",
            "api.port",
            "api.token_env",
            "agents[0]",
            "extra",
            "log.level (GENCOACH_LOG__LEVEL)",
            "backend (GENCOACH_BACKEND__X__TYPE)",
        ]
    )
    assert all(problem.has_value for problem in error.problems)
    assert error.source is not None
    assert error.source.endswith("gencoach.yaml")


def test_a_gap_timeout_shorter_than_a_takeover_is_refused(refuse: Refuse) -> None:
    """Events waiting for a missing seq must outlast the takeover of a dead controller's
    entries: a gap timeout below twice the lease is refused, saying why."""
    problem = assert_names(
        refuse("controller: {lease_s: 10, gap_timeout_s: 15}"), "controller.gap_timeout_s", 15
    )
    assert problem.message.startswith("must be at least twice controller.lease_s (10.0 s)")
