"""The service's settings: one ``Settings`` from ``RAGTIME_*`` variables, a part per concern."""

from app.settings.answers import AnswerMode, default_answer_mode
from app.settings.checks import DEFAULT_ATTRIBUTION_THRESHOLD
from app.settings.faults import setting_faults
from app.settings.generation import ModelPool
from app.settings.retrieval import SearchMode
from app.settings.serve import AUTO_WORKERS_MAX, usable_cores
from app.settings.settings import Settings, get_settings

__all__ = [
    "AUTO_WORKERS_MAX",
    "DEFAULT_ATTRIBUTION_THRESHOLD",
    "AnswerMode",
    "ModelPool",
    "SearchMode",
    "Settings",
    "default_answer_mode",
    "get_settings",
    "setting_faults",
    "usable_cores",
]
