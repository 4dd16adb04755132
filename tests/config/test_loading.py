"""Loading a file, MAGMA's sections, and environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from gencoach.config import Limits, Settings, load_settings

from .checks import Load, Refuse, Write

FULL = """
redis: {url: "redis://cache.internal:6380/2", key_prefix: "gc"}
coaching:
  enabled: true
  max_pending_per_stage: 4
  max_unproven_per_stage: 6
  max_alternatives_per_situation: 2
  lease_s: 12.5
  max_attempts: 5
  routes: {format: true, failure: true, no_action: false, exceeded: false,
           suboptimal: true, text_rewrite: false}
  examples: {register_successful: true, use_for_automatic: true, cache_dir: "examples"}
backends:
  vllm:
    type: openai
    endpoint: "https://llm.internal/v1/chat/completions"
    default_model: "qwen"
    headers: {Content-type: "application/json"}
    api_key_env: LLM_KEY
    timeout_s: 45
    max_retries: 0
    max_concurrency: 8
    structured_output: json_object
  rules:
    type: python
    endpoint: "my_rules.diagnosis:diagnose"
workers: {queues: ["diag"], processes: 3, job_timeout_s: 60}
api: {host: "0.0.0.0", port: 9000, token_env: API_TOKEN}
output_dir: "/data/out"
agents: ["http://10.0.0.5:8888/agents"]
log: {level: DEBUG, format: json}
"""

MAGMA = """
backends:
  default_ollama:
    type: ollama
    endpoint: "http://172.16.21.1:21601/v1/chat/completions"
    default_model: "gpt-oss:20b"
    timeout: 30
    max_retry: 3
    headers:
      Authorization: null
      Content-type: "application/json"
coaching:
  enabled: true
  max_pending_per_stage: 5
  max_unproven_per_stage: 5
  examples:
    register_successful: false
    use_for_automatic: false
    cache_dir: "cache"
"""


def test_full_file_loads(load: Load) -> None:
    """Every section of a complete file lands in the settings as written."""
    settings = load(FULL, {"LLM_KEY": "k", "API_TOKEN": "api-token-value"})
    assert settings.redis.url == "redis://cache.internal:6380/2"
    assert settings.redis.key_prefix == "gc"
    coaching = settings.coaching
    assert coaching.limits == Limits(
        max_pending_per_stage=4, max_unproven_per_stage=6, max_alternatives_per_situation=2
    )
    assert coaching.lease_s == 12.5
    assert coaching.max_attempts == 5
    assert (coaching.routes.no_action, coaching.routes.format) == (False, True)
    assert coaching.examples.cache_dir == Path("examples")
    vllm = settings.backends["vllm"]
    assert (vllm.type, vllm.timeout_s, vllm.max_retries) == ("openai", 45.0, 0)
    assert (vllm.max_concurrency, vllm.structured_output) == (8, "json_object")
    assert vllm.header_values() == {"Content-type": "application/json"}
    rules = settings.backends["rules"]
    assert (rules.type, rules.endpoint, rules.default_model) == (
        "python",
        "my_rules.diagnosis:diagnose",
        None,
    )
    assert settings.workers.queues == ["diag"]
    assert (settings.workers.processes, settings.workers.job_timeout_s) == (3, 60.0)
    assert (settings.api.host, settings.api.port) == ("0.0.0.0", 9000)  # noqa: S104
    assert settings.output_dir == Path("/data/out")
    assert settings.agents == ["http://10.0.0.5:8888/agents"]
    assert (settings.log.level, settings.log.format) == ("debug", "json")


def test_magma_gen_sections_load_unchanged(load: Load) -> None:
    """MAGMA-GEN's coaching and backends sections load: aliases, ollama, a null header."""
    settings = load(MAGMA)
    assert settings.coaching.enabled is True
    assert settings.coaching.limits.max_pending_per_stage == 5
    assert settings.coaching.examples.cache_dir == Path("cache")
    backend = settings.backends["default_ollama"]
    assert backend.type == "openai"
    assert backend.declared_type == "ollama"
    assert backend.endpoint == "http://172.16.21.1:21601/v1/chat/completions"
    assert backend.default_model == "gpt-oss:20b"
    assert (backend.timeout_s, backend.max_retries) == (30.0, 3)
    assert list(backend.headers) == ["Content-type"]
    assert backend.header_values() == {"Content-type": "application/json"}


MAGMA_ONLY = """
magma_agent_address: "http://localhost:8888"
magma_agent_timeout: 360
magma_planner_address: "http://localhost:8000"
generate: {seed: null, nb_branch: 2, nb_env: 64}
benchmark: {backend_verifier: none, seed: 42}
"""


def test_magma_only_sections_of_a_magma_file_are_ignored_and_named(load: Load) -> None:
    """A whole MAGMA config file loads: its MAGMA-only top-level sections are set aside,
    named (for the one notice the CLI prints), and nothing else of them is read."""
    settings = load(MAGMA + MAGMA_ONLY)
    assert settings.ignored_sections == [
        "benchmark", "generate", "magma_agent_address", "magma_agent_timeout",
        "magma_planner_address",
    ]  # fmt: skip
    assert settings.backends["default_ollama"].default_model == "gpt-oss:20b"
    assert load(MAGMA).ignored_sections == []


def test_a_typo_inside_a_gencoach_section_of_a_magma_file_is_still_refused(
    refuse: Refuse,
) -> None:
    """Only whole MAGMA sections are ignored: a misspelt key in `coaching` names its path,
    and a misspelt top-level section is refused too."""
    error = refuse(MAGMA.replace("max_pending_per_stage", "max_pendng_per_stage") + MAGMA_ONLY)
    assert "coaching.max_pendng_per_stage: unknown key" in str(error)
    error = refuse(MAGMA + MAGMA_ONLY.replace("benchmark:", "benchmarks:"))
    assert "benchmarks: unknown key" in str(error)


def test_environment_overrides_the_file(load: Load) -> None:
    """GENCOACH_* variables win over the file: nested by __, numbers and JSON from strings."""
    settings = load(
        "coaching: {max_pending_per_stage: 7, lease_s: 10}\nworkers: {processes: 4}\n",
        {
            "GENCOACH_COACHING__MAX_PENDING_PER_STAGE": "3",
            "GENCOACH_COACHING__LEASE_S": "2.5",
            "GENCOACH_COACHING__ROUTES__SUBOPTIMAL": "false",
            "GENCOACH_AGENTS": '["http://agent.internal:9000"]',
            "GENCOACH_API__PORT": "8000",
            "GENCOACH_REDIS__URL": "unix:///run/redis.sock",
        },
    )
    assert settings.coaching.max_pending_per_stage == 3
    assert settings.coaching.lease_s == 2.5
    assert settings.coaching.routes.suboptimal is False
    assert settings.agents == ["http://agent.internal:9000"]
    assert settings.api.port == 8000
    assert settings.redis.url == "unix:///run/redis.sock"
    assert settings.workers.processes == 4


def test_environment_json_reaches_a_nested_list(load: Load) -> None:
    """A nested variable whose value starts with `[` is read as a JSON list."""
    settings = load("", {"GENCOACH_WORKERS__QUEUES": '["repair", "diagnosis"]'})
    assert settings.workers.queues == ["repair", "diagnosis"]


def test_environment_json_object_merges_into_the_file_section(load: Load) -> None:
    """A JSON object in a variable merges into the file's section rather than replacing it."""
    settings = load(
        "coaching: {max_pending_per_stage: 7}\n",
        {"GENCOACH_COACHING": '{"max_unproven_per_stage": 9}'},
    )
    assert settings.coaching.max_pending_per_stage == 7
    assert settings.coaching.max_unproven_per_stage == 9


def test_environment_matches_file_keys_without_case(load: Load) -> None:
    """A variable reaches a backend whose name the file spells in capitals."""
    settings = load(
        MAGMA.replace("default_ollama", "Local"),
        {"GENCOACH_BACKENDS__LOCAL__DEFAULT_MODEL": "llama3"},
    )
    assert settings.backends["Local"].default_model == "llama3"


def test_environment_alone_can_configure_coaching(load: Load) -> None:
    """Without a file section, variables can define a backend and enable coaching."""
    settings = load(
        "",
        {
            "GENCOACH_COACHING__ENABLED": "true",
            "GENCOACH_BACKENDS__LLM__TYPE": "ollama",
            "GENCOACH_BACKENDS__LLM__ENDPOINT": "http://localhost:11434/v1/chat/completions",
            "GENCOACH_BACKENDS__LLM__DEFAULT_MODEL": "qwen3",
            "GENCOACH_BACKENDS__LLM__TIMEOUT": "5",
        },
    )
    assert settings.coaching.enabled is True
    assert settings.backends["llm"].timeout_s == 5.0


def test_variables_outside_the_prefix_and_the_config_path_are_ignored(load: Load) -> None:
    """PATH, HOME and GENCOACH_CONFIG (the CLI's file path) are not settings."""
    settings = load("", {"PATH": "/bin", "HOME": "/root", "GENCOACH_CONFIG": "x.yaml"})
    assert settings.coaching.max_pending_per_stage == 5


def test_only_the_environment_passed_is_read(load: Load, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's own GENCOACH_* variables reach neither load_settings, given another
    environment, nor a Settings built in code: the CLI alone passes os.environ."""
    monkeypatch.setenv("GENCOACH_API__PORT", "9999")
    assert load("", {}).api.port == 8750
    assert Settings().api.port == 8750


def test_reload_reads_new_limits_from_the_same_file(write: Write) -> None:
    """Loading again from settings.source picks up edited budgets."""
    settings = load_settings(write("coaching: {max_pending_per_stage: 5}\n"), {})
    write("coaching: {max_pending_per_stage: 2, max_unproven_per_stage: 8}\n")
    reloaded = load_settings(settings.source, {})
    assert reloaded.coaching.limits == Limits(
        max_pending_per_stage=2, max_unproven_per_stage=8, max_alternatives_per_situation=3
    )
