"""Generation for ragtime: prompt assembly under a token budget, and streaming backends.

``PromptAssembler`` turns a question and ranked passages into an ``AssembledPrompt``;
a ``GenerationBackend`` (``LlamaCppBackend`` in-process on the CPU) streams ``TextDelta``
events and one ``GenerationDone`` for it. Failures are ``InferenceError`` subclasses.
``SGLangBackend`` (SGLang's native ``/generate``) and ``OpenAICompatBackend`` (an
OpenAI-compatible ``/v1/completions``) stream from remote servers, with the served model's
tokenizer as an ``HFTokenizer``, configured by one ``RemoteOptions``. ``RoutedBackend`` routes
each request to a pool of them (small or large model, least-loaded endpoint) by a
``QuestionClassifier``, polled loads and the time left before ``stream()``'s ``deadline``.
A request the server finds invalid is a ``GenerationRejected``; every server full, a
``BackendBusy``. ``NullBackend`` streams without a model, for benches and tests only.
"""

from inference.backend import (
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    Penalties,
    RouteDecision,
    TargetLoad,
    TextDelta,
    Urgency,
    Usage,
)
from inference.errors import (
    BackendBusy,
    BackendUnavailable,
    GenerationFailed,
    GenerationRejected,
    InferenceError,
)
from inference.local.llamacpp import (
    LlamaCppBackend,
    LlamaCppTokenizer,
    default_generation_model_path,
)
from inference.local.null_backend import NullBackend
from inference.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    AssembledPrompt,
    ContextPassage,
    PromptAssembler,
    PromptPassage,
    common_prefix,
)
from inference.remote.hf_tokenizer import HFTokenizer
from inference.remote.openai_compat import OpenAICompatBackend
from inference.remote.options import RemoteOptions
from inference.remote.scheduling import GatewayClasses
from inference.remote.sglang import SGLangBackend
from inference.routing.router import QuestionClassifier, RoutedBackend
from inference.tokenizer import PromptTokenizer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AssembledPrompt",
    "BackendBusy",
    "BackendUnavailable",
    "ContextPassage",
    "GatewayClasses",
    "GenerationBackend",
    "GenerationDone",
    "GenerationEvent",
    "GenerationFailed",
    "GenerationRejected",
    "HFTokenizer",
    "InferenceError",
    "LlamaCppBackend",
    "LlamaCppTokenizer",
    "NullBackend",
    "OpenAICompatBackend",
    "Penalties",
    "PromptAssembler",
    "PromptPassage",
    "PromptTokenizer",
    "QuestionClassifier",
    "RemoteOptions",
    "RouteDecision",
    "RoutedBackend",
    "SGLangBackend",
    "TargetLoad",
    "TextDelta",
    "Urgency",
    "Usage",
    "common_prefix",
    "default_generation_model_path",
]
