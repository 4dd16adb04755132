"""The start-up summary says what serve will do, and why coaching is off when it is."""

from __future__ import annotations

from pathlib import Path

from gencoach.config import load_settings
from gencoach.config.summary import startup_summary


def test_defaults_say_coaching_is_off_and_why(tmp_path: Path) -> None:
    """With no file: the embedded Redis, a loopback API without token, why nothing is coached."""
    settings = load_settings(None, {"GENCOACH_OUTPUT_DIR": str(tmp_path / "out")})
    lines = startup_summary(settings, "redis://127.0.0.1:6390/0")
    assert lines == [
        "redis:    redis://127.0.0.1:6390/0 (embedded, stopped on exit), key prefix gencoach",
        "api:      http://127.0.0.1:8750/ (no token: reachable from this machine only)",
        "metrics:  http://127.0.0.1:8750/metrics (Prometheus); `gencoach status` shows them",
        "agents:   runs may name agents under http://127.0.0.1, http://localhost",
        "coaching: off (coaching.enabled is false: runs are recorded and saved, "
        "nothing is coached)",
        "budgets:  per stage 5 pending, 5 unproven; 3 alternatives per situation; leases 30 s",
        "workers:  queues gencoach-repair, gencoach-diagnosis; 1 process(es) x 32 jobs at once "
        "(start them with `gencoach worker` and the same configuration)",
        f"output:   {tmp_path / 'out'}",
    ]


def test_a_coaching_setup_shows_routes_backends_and_token_without_secrets() -> None:
    """Coaching on lists the routes and each backend's mode; the token and passwords stay hidden."""
    environ = {
        "GENCOACH_REDIS__URL": "redis://:hunter2-secret@db.example:6379/0",
        "GENCOACH_API__TOKEN_ENV": "TOKEN",
        "TOKEN": "very-secret-token",
        "GENCOACH_COACHING__ENABLED": "true",
        "GENCOACH_COACHING__ROUTES__SUBOPTIMAL": "false",
        "GENCOACH_BACKENDS__LLM__TYPE": "openai",
        "GENCOACH_BACKENDS__LLM__ENDPOINT": "http://127.0.0.1:8080/v1/chat/completions",
        "GENCOACH_BACKENDS__LLM__DEFAULT_MODEL": "qwen3:8b",
        "GENCOACH_BACKENDS__LLM__HEADERS": '{"Authorization": "Bearer sk-secret-value"}',
    }
    settings = load_settings(None, environ)
    text = "\n".join(startup_summary(settings, settings.redis.url))
    assert "redis:    redis://:**********@db.example:6379/0, key prefix gencoach" in text
    assert "(a token protects changes (TOKEN))" in text
    assert "coaching: on, routes format, failure, no_action, exceeded, text_rewrite" in text
    assert (
        "backend:  llm: openai http://127.0.0.1:8080/v1/chat/completions, model qwen3:8b, "
        "structured output auto"
    ) in text
    for secret in ("hunter2-secret", "very-secret-token", "sk-secret-value"):
        assert secret not in text
