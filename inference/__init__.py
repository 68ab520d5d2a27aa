"""Generation for ragtime: prompt assembly under a token budget, and streaming backends.

``PromptAssembler`` turns a question and ranked passages into an ``AssembledPrompt``;
a ``GenerationBackend`` (``LlamaCppBackend`` in-process on the CPU) streams ``TextDelta``
events and one ``GenerationDone`` for it. Failures are ``InferenceError`` subclasses.
``SGLangBackend`` (SGLang's native ``/generate``) and ``OpenAICompatBackend`` (an
OpenAI-compatible ``/v1/completions``) stream from remote servers, with the served model's
tokenizer as an ``HFTokenizer``. ``RoutedBackend`` routes each request to a pool of them (small
or large model, least-loaded endpoint) by a ``QuestionClassifier``, polled loads and the time
left under ``routing_deadline``. ``NullBackend`` streams without a model, for benches and tests
only.
"""

from inference.backend import (
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    RouteDecision,
    TargetLoad,
    TextDelta,
    Usage,
)
from inference.errors import BackendUnavailable, GenerationFailed, InferenceError
from inference.hf_tokenizer import HFTokenizer
from inference.llamacpp import LlamaCppBackend, LlamaCppTokenizer, default_generation_model_path
from inference.null_backend import NullBackend
from inference.openai_compat import OpenAICompatBackend
from inference.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    AssembledPrompt,
    ContextPassage,
    PromptAssembler,
    PromptPassage,
)
from inference.routing import QuestionClassifier, RoutedBackend, routing_deadline
from inference.sglang import SGLangBackend
from inference.tokenizer import PromptTokenizer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AssembledPrompt",
    "BackendUnavailable",
    "ContextPassage",
    "GenerationBackend",
    "GenerationDone",
    "GenerationEvent",
    "GenerationFailed",
    "HFTokenizer",
    "InferenceError",
    "LlamaCppBackend",
    "LlamaCppTokenizer",
    "NullBackend",
    "OpenAICompatBackend",
    "PromptAssembler",
    "PromptPassage",
    "PromptTokenizer",
    "QuestionClassifier",
    "RouteDecision",
    "RoutedBackend",
    "SGLangBackend",
    "TargetLoad",
    "TextDelta",
    "Usage",
    "default_generation_model_path",
    "routing_deadline",
]
