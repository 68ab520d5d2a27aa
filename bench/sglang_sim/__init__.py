"""A simulated SGLang server: SGLang 0.5.23's native HTTP API with GPU-like timings, no GPU.

Capacity planning without a GPU (``python -m bench.sglang_sim``, ``ragtime bench budget
--fake-sglang SPEC``) and the engine that ragtime's tests talk to, directly and through
SGLang's real gateway. ``server`` holds the HTTP routes, ``contract`` what a ``/generate`` body
must be, ``scheduler`` the queue, the running batch and the timing model, ``model`` what it
"runs" (deterministic tokens, a prefix cache), ``tokenizer`` the tiny tokenizer it serves, and
``process`` starts it as a process of its own.
"""

from bench.sglang_sim.config import SimConfig
from bench.sglang_sim.server import SimulatedSGLang

__all__ = ["SimConfig", "SimulatedSGLang"]
