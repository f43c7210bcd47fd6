"""ui/text/run_numbers.py: what the story pages read from one run, instead of importing engine.core.metrics."""
from engine.core.trace import DecodeStep, Trace
from ui.text import run_numbers, runs


def trace_with(riders: list[int]) -> Trace:
    steps = [DecodeStep(0.01, 4 + i, 0, riders=r) for i, r in enumerate(riders)]
    return Trace(model="hand", device="cpu", dtype="float32", prompt_ids=[1, 2, 3], output_ids=list(range(len(riders) + 1)),
                 prefill_seconds=0.05, steps=steps, text="", env={})


def test_summary_and_sharing_note():
    alone, shared = trace_with([1, 1]), trace_with([1, 3])
    assert run_numbers.summary(alone).output_tokens == 3
    assert run_numbers.sharing_note(alone) is None and run_numbers.sharing_note(trace_with([])) is None
    assert run_numbers.sharing_note(shared).startswith("**Riders on the bridge.** 1 of this request's 2 decode steps")


def test_server_records_become_traces():
    rec = {"prompt_tokens": 2, "output_tokens": 2, "steps": [{"seconds": 0.02}], "url": "http://h:1", "model": "m",
           "prefill_seconds": 0.1}
    (trace,) = run_numbers.server_traces([rec])
    assert trace.source == "server" and trace.n_output == 2 and trace.steps[0].seconds == 0.02


def waited(per_step: float, prefill: float = 0.002, measured: bool = True, note: str = "") -> Trace:
    """A run of 0.05 s steps whose threads waited `per_step` seconds each for a CPU (None: not measured)."""
    trace = trace_with([1, 1, 1, 1])
    for step in trace.steps:
        step.seconds, step.cpu_wait_seconds = 0.05, per_step
    trace.prefill_cpu_wait_seconds = prefill
    trace.cpu_wait_seconds = prefill + 4 * per_step if measured else None
    trace.cpu_wait_note, trace.cpu_wait_read_seconds = note, 0.0004
    return trace


def test_the_wait_is_said_per_token_next_to_tpot_and_offers_quiet_timing():
    note = run_numbers.cpu_wait_note(waited(0.024))
    assert note.startswith("**This run waited 24.0 ms per token for a CPU**: your browser was drawing")
    assert "48% of its TPOT of 50.0 ms" in note and "about **26.0 ms**" in note and "2.0 ms of TTFT's 50.0 ms" in note
    assert "Quiet timing" in note and "0.40 ms" in note  # the reads' own cost, stated
    assert "Quiet timing" not in run_numbers.cpu_wait_note(waited(0.024), quiet=True)
    assert run_numbers.cpu_wait_label(waited(0.024)) == ", waited for a CPU 24.0 ms per token, 2.0 ms in prefill"
    assert run_numbers.cpu_wait_caption(waited(0.024)).startswith("This run waited 24.0 ms per token for a CPU (48% of")


def test_threads_that_waited_at_different_moments_say_the_wait_with_every_threads_added():
    """Two threads each descheduled at another barrier: the step lost more than the longest wait (one spun while
    the other waited), so every page's line states the second figure too, and only when it differs."""
    apart = waited(0.024)
    apart.env["decode_cpu_wait_all_threads_s"] = 4 * 0.041  # per step 41 ms, every thread's added
    assert run_numbers.cpu_wait_label(apart) == (", waited for a CPU 24.0 ms per token, 41.0 ms with every thread's "
                                                 "wait added, 2.0 ms in prefill")
    assert "(up to 41.0 ms with every thread's wait added" in run_numbers.cpu_wait_caption(apart)
    assert "(up to 41.0 ms with every thread's wait added" in run_numbers.cpu_wait_note(apart)
    together = waited(0.024)
    together.env["decode_cpu_wait_all_threads_s"] = 4 * 0.026  # about the longest: nothing more to say
    assert "every thread" not in run_numbers.cpu_wait_label(together) + run_numbers.cpu_wait_caption(together)


def test_a_run_that_had_the_cpu_to_itself_says_so():
    note = run_numbers.cpu_wait_note(waited(0.0002))
    assert note.startswith("**This run had the CPU to itself**") and "Quiet timing" not in note
    assert run_numbers.cpu_wait_caption(waited(0.0002)) is None


def test_a_missing_schedstat_is_stated_not_hidden():
    reason = "this system has no per-thread schedstat (macOS), so the time the engine waited for a CPU was not measured"
    note = run_numbers.cpu_wait_note(waited(0.0, measured=False, note=reason))
    assert note.startswith("**CPU wait: not measured** — this system has no per-thread schedstat (macOS)")
    assert "recorded before" in run_numbers.cpu_wait_note(waited(0.0, measured=False))  # an older trace file
    assert run_numbers.cpu_wait_label(waited(0.0, measured=False)) == ""
    assert run_numbers.cpu_wait_caption(waited(0.0, measured=False)) is None


def test_a_run_beside_the_engines_own_start_up_work_names_it():
    """A run started before the background prepacking or compiling ended: that work shared its cores (its Trace's
    env["backends"] says which), so the wait names it before the browser."""
    from engine.serving.scheduling.work import PENDING_DECODE_STEP, PENDING_KERNELS

    compiling = waited(0.024)
    compiling.env["backends"] = {"matmuls": "prepacked", "decode_step": "flat loop", "pending": PENDING_DECODE_STEP}
    caption = run_numbers.cpu_wait_caption(compiling)
    assert "the engine was still compiling its decode step in the background" in caption and "browser" not in caption
    note = run_numbers.cpu_wait_note(compiling)
    assert "still compiling its decode step in the background, on the same cores; besides, your browser" in note
    prepacking = waited(0.024)
    prepacking.env["backends"] = {"matmuls": "torch", "decode_step": "flat loop", "pending": PENDING_KERNELS}
    assert "still preparing its fast kernels" in run_numbers.cpu_wait_caption(prepacking)
    assert run_numbers.background_work(waited(0.024)) is None  # an ordinary run: the browser, as before


def test_a_run_that_changed_its_threads_says_so_and_the_steps_table_shows_them():

    trace = waited(0.02)
    for step, threads in zip(trace.steps, [2, 1, 1, 1]):
        step.threads = threads
    assert "threads" not in runs.steps_table(trace).columns  # nothing changed: no column, no sentence
    assert "fewer threads" not in run_numbers.cpu_wait_note(trace)
    trace.threads_note = "from step 2 on 1 thread(s) (a reason)"
    note = run_numbers.cpu_wait_note(trace)
    assert ("the engine chose fewer threads by measurement (1 step(s) with 2 thread(s), 3 step(s) with 1 "
            "thread(s)): from step 2 on 1 thread(s) (a reason).") in note
    assert list(runs.steps_table(trace)["threads"])[1:] == [2, 1, 1, 1]
    assert "fewer threads" in run_numbers.cpu_wait_caption(trace)


def test_a_run_says_where_its_numbers_come_from():
    from types import SimpleNamespace as N
    here = N(source="local", settings={"model_spec": {"name": "smollm2-135m"}})
    assert run_numbers.provenance(here) == "Measured on this machine in this session."
    recorded = N(source="local", settings={})
    assert run_numbers.provenance(recorded, "Long prompt — SmolLM2 · cpu · EPYC · 2026-12-01").startswith(
        "A recording, not measured in this session: Long prompt")
    assert run_numbers.provenance(N(source="server", settings={})) == "Measured over HTTP from a server in this session."
    # the same words as the labs and the report use for each kind (runs.ORIGIN_WORDS)
    assert run_numbers.provenance(here) == runs.origin_words(here)[0].upper() + runs.origin_words(here)[1:] + "."


def test_no_unmeasured_ratio_is_shown_as_measured():
    note = run_numbers.cpu_wait_note(waited(0.024))
    assert "0.2-1.1x" not in note and "Measured in this run" in note and "an estimate" in note
    assert "2026" not in run_numbers.PAGE_VS_CLI and "1.72" not in run_numbers.PAGE_VS_CLI
