"""Bad input, tried as a new user would: the engine API and the CLI refuse it with the same one-line message
(EngineError in Python, exit code 2 on the command line) naming the value and the allowed range."""
import subprocess
import sys

import pytest

import engine

SAMPLING_CASES = [  # (keyword arguments, CLI flags, what the message must say)
    (dict(temperature=-1.0), ["--temperature", "-1"], r"temperature must be from 0 \(greedy\) to 10 \(got -1"),
    (dict(temperature=float("nan")), ["--temperature", "nan"], r"temperature must be a finite number .* \(got nan\)"),
    (dict(temperature=float("inf")), ["--temperature", "inf"], r"temperature must be a finite number .* \(got inf\)"),
    (dict(top_p=0.0), ["--top-p", "0"], r"top_p must be in \(0, 1\].* \(got 0"),
    (dict(top_p=1.5), ["--top-p", "1.5"], r"top_p must be in \(0, 1\].* \(got 1.5\)"),
    (dict(top_p=float("nan")), ["--top-p", "nan"], r"top_p must be a finite number in \(0, 1\] \(got nan\)"),
    (dict(top_k=-1), ["--top-k", "-1"], r"top_k must be from 0 \(off\) to 512 \(got -1\)"),
    (dict(top_k=513), ["--top-k", "513"], r"top_k must be from 0 \(off\) to 512 \(got 513\)"),
    (dict(seed=-1), ["--seed", "-1"], r"seed must be from 0 to 9223372036854775807 .*\(got -1\)"),
    (dict(seed=2**63), ["--seed", str(2**63)], r"seed must be from 0 to 9223372036854775807 .*\(got 9223372036854775808\)"),
]


@pytest.mark.parametrize("kwargs,flags,message", SAMPLING_CASES)
def test_bad_sampling_values_are_refused_alike_by_api_and_cli(tiny_llama, kwargs, flags, message):
    with pytest.raises(engine.EngineError, match=message):
        engine.generate(tiny_llama, "the valley", 4, **kwargs)
    # the first case as a real `python -m engine` process; the others through the same main() in this process
    # (each process pays ~3 s of imports for one line of argument checking)
    cli = _cli if (kwargs, flags, message) == SAMPLING_CASES[0] else _cli_in_process
    out = cli("generate", "--prompt", "the valley", "--max-new-tokens", "4", "--model", "tiny-llama", *flags)
    assert out.returncode == 2, out.stderr
    import re

    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and re.search(message, last), last
    assert "Traceback" not in out.stderr
    if not message.startswith("top_k"):  # refused before loading the model (top_k's range needs its vocabulary)
        assert "ready on" not in out.stderr, out.stderr


@pytest.mark.parametrize("seed", [1.5, "7", True])
def test_non_integer_seed_is_refused(tiny_llama, seed):
    with pytest.raises(engine.EngineError, match="seed must be a whole number"):
        engine.generate(tiny_llama, "the valley", 4, temperature=1.0, seed=seed)


@pytest.mark.parametrize("prompt,message", [
    (42, "must be text .* or a list of token ids, not int"),
    (["two", "bends"], "must hold token ids .* not str values"),
    ([1.0, 2.7], "must hold token ids .* not float values"),
    ([True, 3], "must hold token ids .* not bool values"),
    (None, "must be text .* not NoneType"),
])
def test_prompt_of_the_wrong_type(tiny_llama, prompt, message):
    with pytest.raises(engine.EngineError, match=message):
        engine.generate(tiny_llama, prompt, 4)


@pytest.mark.parametrize("batch_size,message", [
    (0, r"batch_size must be from 1 to 1024 \(got 0\)"),
    (-2, r"batch_size must be from 1 to 1024 \(got -2\)"),
    (1.5, r"batch_size must be a whole number from 1 to 1024 \(got 1.5\)"),
])
def test_bad_batch_size(tiny_llama, batch_size, message):
    with pytest.raises(engine.EngineError, match=message):
        engine.generate(tiny_llama, "the valley", 4, batch_size=batch_size)
    if isinstance(batch_size, int):
        out = _cli_in_process("generate", "--prompt", "the valley", "--model", "tiny-llama", "--batch-size", str(batch_size))
        assert out.returncode == 2 and "batch_size must be from 1 to 1024" in out.stderr
        assert "ready on" not in out.stderr, "refused before the model loads"


def test_generate_batch_refuses_a_non_list(tiny_llama):
    with pytest.raises(engine.EngineError, match="at least one prompt"):
        engine.generate_batch(tiny_llama, [], 4)


def test_bench_with_zero_repeats_is_a_one_line_error():
    out = _cli("bench", "--quick", "--repeats", "0", "--model", "tiny-llama")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == "error: --repeats must be at least 1 (got 0)"


def test_unknown_device_names_the_device():
    with pytest.raises(engine.EngineError, match="unknown device 'tpu'"):
        engine.load_model("tiny-llama", device="tpu")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=300)


def _cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """engine.cli.main(args) here, its output and exit code as a finished process's (torch's threads put back)."""
    import contextlib
    import io

    import torch

    from engine.cli import main

    out, err, threads = io.StringIO(), io.StringIO(), torch.get_num_threads()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code
        finally:
            torch.set_num_threads(threads)
    return subprocess.CompletedProcess(["python", "-m", "engine", *args], code, out.getvalue(), err.getvalue())


def test_generate_threads_are_used_and_negative_ones_refused():
    out = _cli("generate", "--prompt", "the valley", "--max-new-tokens", "2", "--model", "tiny-llama", "--threads", "1")
    assert out.returncode == 0, out.stderr
    assert ", 1 threads;" in out.stdout  # the summary line says how many threads ran the model
    out = _cli_in_process("generate", "--prompt", "the valley", "--model", "tiny-llama", "--threads", "-1")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == "error: threads must be 0 (every core) or more (got -1)"


@pytest.mark.parametrize("budget,message", [("0", "max_num_batched_tokens 0 is too small"),
                                            ("-5", "max_num_batched_tokens -5 is too small"),
                                            ("4", "with max_batch 8 it must be at least 8")])
def test_serve_refuses_a_token_budget_that_cannot_hold_a_step_in_one_line(budget, message):
    out = _cli("serve", "--model", "tiny-llama", "--mode", "batch", "--port", "0", "--worker", "thread",
               "--max-num-batched-tokens", budget)
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, out.stderr
