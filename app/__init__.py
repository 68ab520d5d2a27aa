"""The ragtime service: FastAPI app, CLI, auth, admission, the request pipeline, moderation."""

from app.config import Settings, get_settings
from app.main import create_app

__all__ = ["Settings", "create_app", "get_settings"]
