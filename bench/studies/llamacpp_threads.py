"""llama.cpp's thread counts and OpenMP wait policy, quiet and beside CPU-bound neighbours
(``python -m bench.studies.llamacpp_threads``; issue 56).

For each choice of decode threads, prompt threads and ``OMP_WAIT_POLICY``, a fresh process loads
the offline default's GGUF (SmolLM2-135M) and times, ``--repeats`` times, the evaluation of a
``--prompt-tokens`` prompt (a new one each time: nothing cached) and the decoding of ``--tokens``
tokens after it; the medians are printed. With ``--hogs N`` the same runs again while N processes
spin on the CPU at normal priority (``while True: pass``), as a browser and a build would beside
the service on a laptop. The policy is read once, when OpenMP loads, so each choice needs its own
process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench.harness.burners import burners

#: (decode threads, prompt threads, OpenMP wait policy or "" for the library's own).
CHOICES = ((2, 2, ""), (1, 2, ""), (1, 1, ""), (2, 2, "PASSIVE"), (1, 2, "PASSIVE"))


def measure(decode: int, prompt: int, repeats: int, prompt_tokens: int, tokens: int) -> dict:
    """Runs in the child process, whose environment names the wait policy or none (OpenMP's
    own): the medians, in seconds."""
    import llama_cpp  # directly: the policy is the environment's, or OpenMP's own without one

    from inference.local.llamacpp import default_generation_model_path

    llm = llama_cpp.Llama(
        model_path=str(default_generation_model_path()),
        n_ctx=2048,
        n_threads=decode,
        n_threads_batch=prompt,
        verbose=False,
    )
    text = b"The quick brown fox jumps over the lazy dog. " * (prompt_tokens // 8)
    base = llm.tokenize(text, add_bos=True)[:prompt_tokens]
    prefill, decoding = [], []
    for r in range(repeats):
        llm.reset()
        ids = [base[0], 1000 + r, *base[2:]]  # a new second token: no prefix is reused
        started = time.perf_counter()
        llm.eval(ids)
        evaluated = time.perf_counter()
        for n, _ in enumerate(llm.generate(ids, temp=0.0), 1):
            if n >= tokens:
                break
        prefill.append(evaluated - started)
        decoding.append(time.perf_counter() - evaluated)
    return {"prompt_s": statistics.median(prefill), "decode_s": statistics.median(decoding)}


def run_choice(choice: tuple[int, int, str], args: argparse.Namespace) -> dict:
    decode, prompt, policy = choice
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    argv = [sys.executable, "-m", "bench.studies.llamacpp_threads", "--child"]
    argv += [str(decode), str(prompt), str(args.repeats), str(args.prompt_tokens)]
    argv += [str(args.tokens)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=450)
    parser.add_argument("--tokens", type=int, default=32, help="tokens decoded after the prompt")
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound neighbours (0: quiet only)")
    parser.add_argument("--child", nargs=5, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        decode, prompt, repeats, prompt_tokens, tokens = args.child
        print(json.dumps(measure(decode, prompt, repeats, prompt_tokens, tokens)))
        return 0
    print(
        f"| threads (decode / prompt), OpenMP wait | prompt of {args.prompt_tokens}, quiet | "
        f"{args.tokens} tokens, quiet | prompt, {args.hogs} hogs | {args.tokens} tokens, "
        f"{args.hogs} hogs |"
    )
    print("| --- | --- | --- | --- | --- |")
    for choice in CHOICES:
        quiet = run_choice(choice, args)
        with burners(args.hogs):
            time.sleep(0.5 if args.hogs else 0.0)  # the neighbours running before it starts
            loaded = run_choice(choice, args) if args.hogs else None
        cells = [f"{quiet['prompt_s']:.2f} s", f"{quiet['decode_s']:.2f} s"]
        if loaded:
            cells += [f"{loaded['prompt_s']:.2f} s", f"{loaded['decode_s']:.2f} s"]
        else:
            cells += ["–", "–"]
        name = f"{choice[0]} / {choice[1]}, {choice[2].lower() or 'spinning (default)'}"
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
