"""Settings: one validated object from a YAML file and `GENCOACH_*` variables, built at the edge."""

from gencoach.config.environment import CONFIG_ENV_VAR, ENV_NESTED_DELIMITER, ENV_PREFIX
from gencoach.config.files import DEFAULT_CONFIG_FILE
from gencoach.config.loading import load_settings
from gencoach.config.redaction import MASK, redacted
from gencoach.config.settings import (
    ApiSettings,
    BackendSettings,
    CoachingSettings,
    ControllerSettings,
    ExamplesSettings,
    Limits,
    LogSettings,
    RedisSettings,
    RouteSwitches,
    Settings,
    WorkerSettings,
)

__all__ = [
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
