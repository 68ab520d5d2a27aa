"""The ragtime service: FastAPI app, CLI, auth, admission, the request pipeline, moderation.

Importing ``app`` stays light (settings only): the app itself is built by ``app.main.create_app``.
"""

from app.settings import Settings, get_settings

__all__ = ["Settings", "get_settings"]
