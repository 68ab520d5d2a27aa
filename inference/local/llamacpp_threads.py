"""How llama.cpp's compute threads share the CPU: one thread decodes, the prompt gets the cores the
process may use, and threads that wait for each other sleep instead of spinning.

llama.cpp (the ``ggml`` CPU backend, built with OpenMP as llama-cpp-python's wheel builds it)
splits every operation of a token's graph over its threads and joins them at an OpenMP barrier
after each one: a few hundred barriers a token for SmolLM2-135M. By default GNU OpenMP's threads
spin at a barrier. That costs nothing while every thread has a core of its own; when another
process takes a core, the thread that reached the barrier spins away its time slice while the
one it waits for is descheduled. Measured on our 2 cores by ``python -m
bench.studies.llamacpp_threads`` (issue 56; docs/studies/overload-and-neighbours.md, "A noisy
neighbour"): a 450-token prompt, then 32 tokens decoded, in seconds, quiet and beside two CPU-bound
processes (hogs):

| decode / prompt threads, OpenMP wait | prompt | 32 tokens | prompt, hogs | 32 tokens, hogs |
| --- | --- | --- | --- | --- |
| 2 / 2, spinning (ragtime before)      | 1.35 | 0.24 | 3.63 | 0.87 |
| 1 / 1, spinning                       | 2.08 | 0.27 | 2.75 | 0.35 |
| 2 / 2, passive                        | 1.17 | 0.86 | 2.09 | 0.40 |
| 1 / 2, passive (now)                  | 1.08 | 0.26 | 2.61 | 0.39 |

So decoding runs on one thread (a token of a small model is too little work to split: two
threads decode no faster quiet, over twice as slow beside the hogs, and three times as slow quiet
once they wait passively), the prompt on every core the process may use, and OpenMP waits
passively (``OMP_WAIT_POLICY=PASSIVE``): across this session's runs, a prompt on 2 spinning
threads beside the hogs took 3.5 to 9.2 s, on 2 passive ones 2.1 to 2.6 s; quiet, the same.
The policy is read once, when OpenMP's library loads with llama.cpp: ``import_llama_cpp`` sets
it (unless the environment already names one) before the first import, and every module that
needs ``llama_cpp`` imports it through that function.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

#: Threads that decode, one token at a time (llama.cpp's ``n_threads``).
DECODE_THREADS = 1
#: OpenMP's wait policy for llama.cpp's threads, unless the environment names one.
WAIT_POLICY = "PASSIVE"


def import_llama_cpp() -> ModuleType:
    """``llama_cpp``, imported after OpenMP has been told to wait passively (where the
    environment does not choose). Once imported, the policy it loaded with stays."""
    if "llama_cpp" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    import llama_cpp

    return llama_cpp
