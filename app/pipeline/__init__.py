"""The request pipeline: a question's stages in order, each through its budget session
(``pipeline``), its retrieval half (``retrieval``) and its answer (``answering``: generation
and the answer's moderation as one stream)."""

from app.pipeline.pipeline import Pipeline

__all__ = ["Pipeline"]
