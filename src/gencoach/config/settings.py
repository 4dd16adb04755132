"""The settings of gencoach: one frozen model per section of the config file."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gencoach.config.fields import (
    AgentPrefix,
    Budget,
    Count,
    EnvName,
    FilePath,
    Port,
    RedisUrl,
    Retries,
    Seconds,
    Text,
)
from gencoach.config.redaction import mask_password
from gencoach.config.urls import http_url_problem, url_has_prefix
from gencoach.protocol.jobs import DEFAULT_MAX_ATTEMPTS

BACKEND_TYPES = ("openai", "ollama", "python")
NO_BACKEND = "coaching is enabled but no backend is configured under `backends`"
# The keys MAGMA spells differently, mapped to ours.
_BACKEND_ALIASES = {"timeout": "timeout_s", "max_retry": "max_retries"}


class Section(BaseModel):
    """Base of every settings model: immutable, unknown keys refused, URL passwords unprinted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_section_is_empty(cls, data: Any) -> Any:
        # YAML reads a section whose entries are all commented out as null: the defaults.
        if not isinstance(data, Mapping):
            return data
        return {
            key: value
            for key, value in data.items()
            if value is not None or key not in _sections(cls)
        }

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if isinstance(value, str):
                value = mask_password(value)
            elif isinstance(value, list):
                value = [mask_password(item) if isinstance(item, str) else item for item in value]
            yield name, value


def _sections(model: type[BaseModel]) -> set[str]:
    """The fields of `model` that hold a section or a mapping rather than one value."""
    return {
        name
        for name, info in model.model_fields.items()
        if get_origin(info.annotation) is dict
        or (isinstance(info.annotation, type) and issubclass(info.annotation, Section))
    }


class RedisSettings(Section):
    """Where Redis is: 'embedded' starts a private server for this process tree."""

    url: RedisUrl = "embedded"
    key_prefix: Text = "gencoach"


class RouteSwitches(Section):
    """Which kinds of coaching opportunity the router may turn into requests."""

    format: bool = True
    failure: bool = True
    no_action: bool = True
    exceeded: bool = True
    suboptimal: bool = True
    text_rewrite: bool = True


class ExamplesSettings(Section):
    """Validated diagnoses kept as examples for later automatic diagnosis (MAGMA-GEN's)."""

    register_successful: bool = False
    use_for_automatic: bool = False
    cache_dir: FilePath = Path("cache")


class Limits(Section):
    """The coaching budgets, which can change while the service runs."""

    max_pending_per_stage: Budget = 5
    max_unproven_per_stage: Budget = 5
    max_alternatives_per_situation: Budget = 3


class CoachingSettings(Limits):
    """Automatic coaching: on/off, limits, routes, leases; MAGMA-GEN's section loads unchanged."""

    enabled: bool = False
    lease_s: Seconds = 30.0
    max_attempts: Count = DEFAULT_MAX_ATTEMPTS
    routes: RouteSwitches = Field(default_factory=RouteSwitches)
    examples: ExamplesSettings = Field(default_factory=ExamplesSettings)

    @property
    def limits(self) -> Limits:
        """The budgets alone, to swap in when the config is reloaded."""
        return Limits.model_validate(self.model_dump(include=set(Limits.model_fields)))


def _import_path_problem(endpoint: str) -> str | None:
    module, colon, attribute = endpoint.partition(":")
    names = [*module.split("."), *attribute.split(".")]
    if colon and all(name.isidentifier() for name in names):
        return None
    return "a python backend's endpoint must be an import path like 'package.module:function'"


class BackendSettings(Section):
    """One LLM backend: an OpenAI-compatible server (`ollama` is an alias) or a Python function.

    MAGMA's spellings `timeout` and `max_retry` are accepted for `timeout_s` and
    `max_retries`. Header values are secrets; `api_key_env` names the variable that holds
    the API key, which `load_settings` reads into `api_key`.
    """

    type: Literal["openai", "python"]
    endpoint: Text
    default_model: str | None = Field(default=None, validate_default=True)
    # Never in repr; the redacted dump masks the secret-like ones (Authorization, API
    # keys, tokens, cookies) and shows the others (Content-type) as they are.
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    api_key_env: EnvName | None = None
    timeout_s: Seconds = Field(default=30.0, validation_alias=AliasChoices("timeout_s", "timeout"))
    max_retries: Retries = Field(
        default=3, validation_alias=AliasChoices("max_retries", "max_retry")
    )
    # Requests in flight at once across every worker process; None: `workers.concurrency`.
    max_concurrency: Count | None = None
    # auto: json_schema, else json_object with the schema, else the schema in the prompt.
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    max_tokens: Count = 1024  # sent on every call; an answer cut there is an error
    # An answer longer than this (UTF-8) is refused and kept cut to it: no contract's
    # answer comes near it, and a broken model or proxy must not fill Redis.
    max_answer_bytes: Count = 65_536
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] = 0.0

    _declared_type: str = PrivateAttr(default="openai")
    _api_key: SecretStr | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _accept_magma_spellings(
        cls, data: Any, handler: ModelWrapValidatorHandler[BackendSettings]
    ) -> BackendSettings:
        if isinstance(data, Mapping):
            both = [alias for alias, name in _BACKEND_ALIASES.items() if {alias, name} <= set(data)]
            if both:
                spelled = ", ".join(f"{alias} or {_BACKEND_ALIASES[alias]}" for alias in both)
                raise PydanticCustomError(
                    "alias_conflict",
                    "give one spelling, not both: {spelled}",
                    {"spelled": spelled, "key": both[0], "value": data[both[0]]},
                )
        backend = handler(data)
        if isinstance(data, Mapping) and isinstance(data.get("type"), str):
            backend._declared_type = data["type"]
        return backend

    @field_validator("type", mode="before")
    @classmethod
    def _normalise_type(cls, value: object) -> object:
        if value not in BACKEND_TYPES:
            raise PydanticCustomError("backend_type", "must be openai, ollama or python")
        return "openai" if value == "ollama" else value

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, endpoint: str, info: ValidationInfo) -> str:
        kind = info.data.get("type")
        if kind == "openai":
            problem = http_url_problem(endpoint)
        elif kind == "python":
            problem = _import_path_problem(endpoint)
        else:
            problem = None  # the type is wrong, and reported as such
        if problem:
            raise PydanticCustomError("backend_endpoint", problem)
        return endpoint

    @field_validator("default_model")
    @classmethod
    def _check_model(cls, model: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("type") == "openai" and not (model and model.strip()):
            raise PydanticCustomError("missing_model", "an openai backend needs a default_model")
        return model

    @field_validator("headers", mode="before")
    @classmethod
    def _drop_null_headers(cls, value: object) -> object:
        if value is None:
            return {}
        if isinstance(value, Mapping):  # MAGMA writes `Authorization: null` for "no header"
            return {name: item for name, item in value.items() if item is not None}
        return value

    def header_values(self) -> dict[str, str]:
        """The headers to send, secrets in clear."""
        return dict(self.headers)

    @property
    def declared_type(self) -> str:
        """The type as the config spelled it: 'ollama' stays 'ollama' here."""
        return self._declared_type

    @property
    def api_key(self) -> SecretStr | None:
        """The API key read from the variable `api_key_env` names, if it names one."""
        return self._api_key


class WorkerSettings(Section):
    """The RQ workers: queues in priority order, processes, jobs in flight each, time limits.

    `mode: async` runs up to `concurrency` jobs at once as tasks on one event loop per
    process; `mode: fork` runs one job at a time, each in a forked work-horse (isolation
    for backends that run untrusted code). Every process serves every queue, first to last.
    """

    queues: list[Text] = Field(
        default_factory=lambda: ["gencoach-repair", "gencoach-diagnosis"], min_length=1
    )
    processes: Count = 1
    concurrency: Count = 32
    mode: Literal["async", "fork"] = "async"
    job_timeout_s: Seconds = 300.0
    # A warm stop waits this long for jobs in flight, then cancels them.
    shutdown_grace_s: Seconds = 30.0
    # What a job keeps of foreign text (UTF-8 bytes), cut beyond with a note: each
    # coaching log (an LLM exchange, an agent's log), how many logs, and its reason.
    max_log_bytes: Count = 65_536
    max_logs_per_job: Count = 8
    max_reason_bytes: Count = 4_096

    @field_validator("queues")
    @classmethod
    def _unique_queues(cls, queues: list[str]) -> list[str]:
        if len(set(queues)) != len(queues):
            raise PydanticCustomError("duplicate_queue", "lists a queue twice")
        return queues


class ControllerSettings(Section):
    """The controller daemon: its stream consumer, intake batches, shutdown, save expiry."""

    # The stream consumer name, one per controller; None: this host's name and process id.
    consumer: Text | None = None
    batch_size: Count = 500
    claim_idle_s: Seconds = 60.0
    # Each controller renews a lease this long; once it lapses, the others take over the
    # stream entries the dead controller held.
    lease_s: Seconds = 10.0
    # A run's events that wait for a missing seq while the run makes no progress this long
    # are applied without it (docs/events.md, "Order").
    gap_timeout_s: Seconds = 30.0
    grace_s: Seconds = 10.0
    saved_ttl_s: Count = 86_400
    # An active run with no event for this long is finished as abandoned and saved.
    abandon_idle_s: Seconds = 3_600.0
    # An event larger than this (its JSON, in bytes) goes to the dead letters.
    max_event_bytes: Count = 1_048_576
    # Entries the dead-letter stream keeps (approximately: trimmed with MAXLEN ~).
    dead_letters_kept: Count = 10_000
    # How often acknowledged stream entries are trimmed and leftover run keys expired.
    housekeeping_s: Seconds = 30.0
    # An unreachable agent is asked again with backoff for this long, then given up.
    registration_give_up_s: Seconds = 300.0
    # Terminal candidates handled at once, in all and per run.
    terminals_at_once: Count = 32
    terminals_per_run: Count = 1
    # Each of the controller's five caches of write-once graph nodes keeps at most this
    # many, each for at most this long (docs/operations.md, "Bounded state").
    node_cache_entries: Count = 10_000
    node_cache_ttl_s: Seconds = 300.0

    @model_validator(mode="after")
    def _gaps_outlast_takeover(self) -> ControllerSettings:
        if self.gap_timeout_s < 2 * self.lease_s:
            raise PydanticCustomError(
                "gap_before_takeover",
                "must be at least twice controller.lease_s ({lease_s} s): the events a "
                "dead controller held are taken over about lease_s after its death, and "
                "the later events of their runs wait for them",
                {"key": "gap_timeout_s", "value": self.gap_timeout_s, "lease_s": self.lease_s},
            )
        return self


class ApiSettings(Section):
    """The HTTP API. The bearer token, if any, is read from the variable `token_env` names
    when it is set, else from the file `token_file` names (a Docker or Kubernetes secret)."""

    host: Text = "127.0.0.1"
    port: Port = 8750
    token_env: EnvName | None = None
    token_file: FilePath | None = None
    # A request body larger than this is answered 413 before it is read.
    max_body_bytes: Count = 8_388_608
    # Requests served at once (each holds at most one Redis connection of the API's own
    # pool); a request waiting longer than `busy_wait_s` for its turn is answered 503.
    max_concurrent_requests: Count = 32
    busy_wait_s: Seconds = 10.0
    # A client must send a request's headers within `header_timeout_s` (else 408) and its
    # body within `body_timeout_s` (else the connection closes); beyond `max_connections`
    # open connections, a new one is answered 503 (Retry-After) and closed.
    header_timeout_s: Seconds = 10.0
    body_timeout_s: Seconds = 30.0
    max_connections: Count = 256

    _token: SecretStr | None = PrivateAttr(default=None)
    _token_source: str | None = PrivateAttr(default=None)

    @property
    def token_source(self) -> str | None:
        """Where the token was read: the variable's name or the file's path."""
        return self._token_source

    @property
    def token(self) -> SecretStr | None:
        """The bearer token from `token_env`'s variable or `token_file`, if either holds one."""
        return self._token


_LEVELS = ("debug", "info", "warning", "error", "critical")


class LogSettings(Section):
    """Log level and rendering; 'auto' renders for a console on a TTY and JSON otherwise."""

    level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    format: Literal["auto", "json", "console"] = "auto"

    @field_validator("level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() in _LEVELS:
            return value.lower()
        return value  # refused as it was written


class Settings(Section):
    """Everything gencoach is configured with, validated as a whole."""

    redis: RedisSettings = Field(default_factory=RedisSettings)
    coaching: CoachingSettings = Field(default_factory=CoachingSettings)
    backends: dict[Text, BackendSettings] = Field(default_factory=dict)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    output_dir: FilePath = Path("output")
    agents: list[AgentPrefix] = Field(
        default_factory=lambda: ["http://127.0.0.1", "http://localhost"]
    )
    log: LogSettings = Field(default_factory=LogSettings)

    _source: Path | None = PrivateAttr(default=None)
    _ignored_sections: list[str] = PrivateAttr(default_factory=list)
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _coaching_needs_backend(self) -> Settings:
        if self.coaching.enabled and not self.backends:
            raise PydanticCustomError(
                "no_backend", NO_BACKEND, {"key": "coaching.enabled", "value": True}
            )
        return self

    @property
    def source(self) -> Path | None:
        """The file these settings were read from (None: defaults and environment only)."""
        return self._source

    @property
    def ignored_sections(self) -> list[str]:
        """The file's MAGMA-only top-level sections, which gencoach does not read."""
        return list(self._ignored_sections)

    @property
    def warnings(self) -> list[str]:
        """What the settings leave out that the operator may not mean to, with the
        consequence (an optional variable that is not set, say)."""
        return list(self._warnings)

    def backend_concurrency(self, name: str) -> int:
        """How many requests backend `name` may have in flight: its `max_concurrency`, else
        `workers.concurrency` (so that, by default, the cap never throttles the workers)."""
        return self.backends[name].max_concurrency or self.workers.concurrency

    def agent_allowed(self, url: str) -> bool:
        """Whether a run may name the agent at `url`: it lies under one of `agents`."""
        return any(url_has_prefix(url, prefix) for prefix in self.agents)
