"""Every st.session_state key in one place, so pages never invent their own spellings."""

# the shared sidebar's widgets
MODEL = "sb_model"
DEVICE = "sb_device"
DTYPE = "sb_dtype"
KERNELS = "sb_kernels"
EXAMPLE = "sb_example"
PROMPT = "sb_prompt"
PROMPT_TOKENS = "sb_prompt_tokens"
MAX_NEW_TOKENS = "sb_max_new_tokens"
TEMPERATURE = "sb_temperature"
TOP_K = "sb_top_k"
TOP_P = "sb_top_p"
SEED = "sb_seed"
CHAT = "sb_chat"
IGNORE_EOS = "sb_ignore_eos"  # True: exactly MAX_NEW_TOKENS output tokens, past an end-of-text token (vLLM's ignore_eos)
LIVE_CHART = "sb_live_chart"
RUN = "sb_run"

RUN_CANCEL = "sb_run_cancel"  # the run panel's Cancel button
RUN_PANEL = "run_panel"  # the run panel's container (its CSS class st-key-run_panel: shown in presenter mode too)

# results kept across pages: a ui.engine_link.run_store.RunStore (last run, history, lab results, work in flight),
# cleared by ui/engine_link/server_link.py's janitor as soon as the session's tab is closed
STORE = "run_store"

# sidebar + run panel + home/timing pages (ui/controls/widgets.py, run_panel.py, pages/story/home.py, pages/story/timing.py)
FIT_PROMPT = "sb_fit_prompt"  # True: send exactly PROMPT_TOKENS tokens (trim or repeat the text)
TIMING_RUNS_CSV = "timing_runs_csv"
TIMING_STEPS_CSV = "timing_steps_csv"
TIMING_CLEAR = "timing_clear_history"

# labs: sweeps, batch, roofline, budget (pages/labs/lab_sweeps.py, lab_batch.py, lab_roofline.py, lab_budget.py)
SWEEP_KIND = "lab_sweep_kind"  # "prompt" or "output"
SWEEP_PROMPT_LENGTHS = "lab_sweep_prompt_lengths"
SWEEP_OUTPUT_LENGTHS = "lab_sweep_output_lengths"
SWEEP_FIXED_OUTPUT = "lab_sweep_fixed_output"  # output tokens per point of the prompt sweep
SWEEP_FIXED_PROMPT = "lab_sweep_fixed_prompt"  # prompt tokens per point of the output sweep
SWEEP_ROUNDS = "lab_sweep_rounds"  # rounds of a sweep (every point once per round)
SWEEP_RUN = "lab_sweep_run"
SWEEP_CANCEL = "lab_sweep_cancel"
SWEEP_RESULTS = "lab_sweep_results"  # {"prompt": SweepResult, "output": SweepResult}, partial results kept
SWEEP_RUNNING = "lab_sweep_running"  # the kind the latest sweep job measures (results land there)
SWEEP_JOB = "lab_sweep_job"  # the sweep job in the worker (RunStore.jobs key)
SWEEP_CSV = "lab_sweep_csv"
BATCH_SIZES = "lab_batch_sizes"
BATCH_PROMPT = "lab_batch_prompt_tokens"
BATCH_OUTPUT = "lab_batch_output_tokens"
BATCH_ROUNDS = "lab_batch_rounds"  # rounds of the batch sweep (every point once per round)
BATCH_RUN = "lab_batch_run"
BATCH_CANCEL = "lab_batch_cancel"
BATCH_RESULT = "lab_batch_result"  # SweepResult of kind "batch"
BATCH_JOB = "lab_batch_job"  # the batch sweep job in the worker (RunStore.jobs key)
BATCH_CSV = "lab_batch_csv"
PEAKS = "lab_measured_peaks"  # engine.labs.hardware.MeasuredPeaks, measured once per session and device
PEAKS_JOB = "lab_peaks_job"
STORY_PEAKS_MEASURE = "story_peaks_measure"  # the Prefill and Decode pages' "measure this machine's peaks" button
CONTEXT_MEASURE = "story_context_measure"  # the Decode page's button: decode steps against the context
CONTEXT_JOB = "story_context_job"  # that sweep in the worker (RunStore.jobs key)
CONTEXT_RESULT = "story_context_result"  # engine.labs.context_sweep.ContextSweep, the latest
ROOF_MODEL = "lab_roof_model"
ROOF_WORKLOAD = "lab_roof_workload"
ROOF_TRACE = "lab_roof_trace"  # a small measurement of our own when no dashboard run exists
ROOF_JOB = "lab_roof_job"
ROOF_MEASURE_RUN = "lab_roof_measure_run"
ROOF_BATCH = "lab_roof_batch"
ROOF_DTYPE = "lab_roof_dtype"  # the number format the cards are compared in
ROOF_COST_CARD = "lab_roof_cost_card"  # the card "which stage eats the money" is shown on
ROOF_WALL_TOKENS = "lab_roof_wall_tokens"  # the sequence length of the KV-cache wall
BUDGET_SOURCE = "lab_budget_source"
BUDGET_SHARE = "lab_budget_share"
BUDGET_HARDWARE = "lab_budget_hardware"
BUDGET_WORKLOAD = "lab_budget_workload"
BUDGET_PREFILL_SPEEDUP = "lab_budget_prefill_speedup"
BUDGET_DECODE_SPEEDUP = "lab_budget_decode_speedup"
BUDGET_FABLE = "lab_budget_fable"
CROSSED_ROUNDS = "lab_crossed_rounds"  # the Budget lab's crossed experiment: rounds
CROSSED_RUN = "lab_crossed_run"
CROSSED_CANCEL = "lab_crossed_cancel"
CROSSED_JOB = "lab_crossed_job"  # in the worker (RunStore.jobs key)
CROSSED_RESULT = "lab_crossed_result"  # engine.labs.crossed_remedies.CrossedResult, the latest

# prefill ("the valley") and decode ("the bridge") pages
PREFILL_LAYER = "pf_layer"  # index into trace.attention.layers
PREFILL_HEAD = "pf_head"  # query head, or None = mean over heads
PREFILL_SCALE = "pf_scale"  # colour scale of the matrix: "linear" or "log"
DECODE_POSITION = "dc_position"  # step-through position: 0 = first token (prefill), p = decode step p-1
DECODE_PREV = "dc_prev"
DECODE_NEXT = "dc_next"
DECODE_AUTOPLAY = "dc_autoplay"
DECODE_SPEED = "dc_speed"  # seconds per token while autoplaying
DECODE_LAYER = "dc_layer"
DECODE_HEAD = "dc_head"
DECODE_KV_HEAD = "dc_kv_head"  # KV head shown in the cache picture, or None = mean
DECODE_LAST_TICK = "dc_last_tick"  # monotonic time of the last autoplay advance
DECODE_AUTOPLAY_DONE = "dc_autoplay_done"  # set when autoplay reached the last token: switch it off

# labs: remedies, profile
REMEDY_RESULTS = "remedy_results"  # dict remedy key -> measured result (engine.labs.remedies dataclasses)
REMEDY_HISTORY = "remedy_history"  # dict remedy key -> this session's measurements of it (the latest few), for verdicts
REMEDY_TOKENS = "rem_tokens"  # output tokens per measured request
REMEDY_DRAFT_K = "rem_draft_k"  # prompt lookup: draft tokens per pass
REMEDY_COPY_PROMPT = "rem_copy_prompt"
REMEDY_OPEN_PROMPT = "rem_open_prompt"
REMEDY_TURN1 = "rem_turn1"
REMEDY_TURN2 = "rem_turn2"
REMEDY_MEASURE = "rem_measure_"  # + remedy key: each section's Measure button
REMEDY_JOB = "rem_job_"  # + remedy key: its job in the worker (RunStore.jobs key)
PROFILE_RESULT = "profile_result"  # engine.labs.profiling.ProfileResult of the latest run
PROFILE_TOKENS = "prof_tokens"  # prompt tokens of the profiled prefill
PROFILE_RUN = "prof_run"
PROFILE_JOB = "prof_job"
REMEDY_CANCEL = "rem_cancel"

# demo kit: presenter mode, shareable links, recorded runs (ui/controls/presenter.py, ui/demo/links.py, ui/controls/demo_panel.py)
PRESENTER = "sb_presenter"  # presenter mode: big type, no sidebar, keys drive the Decode and Prefill pages
PRESENTER_LEAVE = "presenter_leave"  # the main area's button that switches presenter mode off
PRESENTER_KEYS = "presenter_keys"  # container of the keyboard script (its CSS class: st-key-presenter_keys)
PRESENTER_BAR = "presenter_bar"  # presenter mode's own compact controls above every page (ui/controls/presenter.py)
PRESENTER_RUN = "presenter_run"  # its Run button
PRESENTER_EXAMPLE = "presenter_example"  # its copies of the sidebar's example and lengths (kept in step with them)
PRESENTER_PROMPT_TOKENS = "presenter_prompt_tokens"
PRESENTER_OUTPUT_TOKENS = "presenter_output_tokens"
PRESENTER_IGNORE_EOS = "presenter_ignore_eos"
LINK_RUN = "link_run"  # a link's run=1: "pending" until the run starts, then "done" (once per opening)
SETTINGS_RESET = "sb_reset"  # the sidebar's "Reset to defaults" button
LINK_RESTORED = "link_restored"  # the URL's settings were applied once for this session
TRACE_UPLOAD = "sb_trace_upload"  # file uploader: open a recorded run (Trace JSON)
TRACE_SHIPPED = "sb_trace_shipped"  # which shipped recording (assets/traces/) to open
TRACE_OPEN = "sb_trace_open"  # button: open the chosen shipped recording
TRACE_MESSAGE = "sb_trace_message"  # ("error" | "success", text) about the latest file opened
TRACE_DOWNLOAD = "sb_trace_download"  # download the latest run as a Trace JSON file
TIMING_TRACE_JSON = "timing_trace_json"  # the same download on the Timing page
TIMING_REPORT = "timing_report_html"  # the one-page HTML run report
PREFILL_POSITION = "pf_position"  # presenter step-through of the Prefill page: 0 = all prompt rows, k = k decode rows
PREFILL_PREV = "pf_prev"
PREFILL_NEXT = "pf_next"
PREFILL_AUTOPLAY = "pf_autoplay"
PREFILL_SPEED = "pf_speed"
PREFILL_LAST_TICK = "pf_last_tick"
PREFILL_AUTOPLAY_DONE = "pf_autoplay_done"
LINK_NOTICE = "link_notice"  # what the URL asked for that could not be used (shown once, then dropped)
TRACE_SHOWN = "trace_shown"  # the shipped recording last opened (kept in the link while it is the run shown)
LINK_PRESET = "link_preset"  # a link's preset=...: the verdict it pressed (kept in the link, like run=1)

# lesson mode (ui/demo/lesson.py reads the files, ui/controls/lesson_panel.py draws the bar and moves between steps)
LESSON = "lesson_name"  # the lesson being taught (its file name without .json), absent when none
LESSON_STEP = "lesson_step"  # its current step, from 1
LESSON_STARTED = "lesson_step_started"  # (lesson, step, a weak reference to the run shown when the step opened)
LESSON_SWITCH = "lesson_switch"  # the page a Next / Back asked for (switched to before the page draws)
LESSON_BAR = "lesson_bar"  # the bar's container (CSS class st-key-lesson_bar)
LESSON_NEXT = "lesson_next"  # its buttons (the keys PageDown / PageUp press them)
LESSON_BACK = "lesson_back"
LESSON_END = "lesson_end"
LESSON_KEYS = "lesson_keys"  # container of the keys' script
LESSON_CHECK = "lesson_check"  # the line under the bar: did the step's run produce what it asked for
LESSON_SHEET = "lesson_sheet"  # the teacher sheet's download (HTML)
LESSON_PICK = "lesson_pick"  # the sidebar's choice of lesson
LESSON_START = "lesson_start"

# measure a server (pages/serving/measure_server.py): any OpenAI-compatible server, on the operator's allow-list only
MEASURE_URL = "ms_url"
MEASURE_MODEL = "ms_model"  # "" = the first model the server lists
MEASURE_PROMPT_TOKENS = "ms_prompt_tokens"
MEASURE_OUTPUT_TOKENS = "ms_output_tokens"
MEASURE_REQUESTS = "ms_requests"
MEASURE_CONCURRENCY = "ms_concurrency"
MEASURE_SHARED_PREFIX = "ms_shared_prefix"
MEASURE_RUN = "ms_run"
MEASURE_PICK = "ms_pick"  # which measured request the ledger draws
MEASURE_RESULT = "measure_result"  # RunStore.labs key: the latest measurement's records (list of dicts)
# the room's serving engine (--engine-url): a server's run replayed untimed on the local engine for its insides
REMOTE_REPLAY = "remote_replay"  # RunStore.labs key: (the server's trace, it with the local replay's insides)
REMOTE_REPLAY_RUN = "remote_replay_run"  # the Prefill and Decode pages' "Replay on the local engine" button

# one-click presets that show each verdict on this machine (ui/controls/preset_buttons.py, on Home)
PRESET_BUTTON = "preset_"  # + verdict: its button
PRESET_PENDING = "preset_pending"  # the verdict clicked, until its lengths are applied to the sidebar
PRESET_RATES = "preset_rates"  # RunStore.labs key: {model spec: ui.text.preset_lengths.Rates} measured by the quick probe
PRESET_APPLIED = "preset_applied"  # the ui.text.preset_lengths.Preset last applied (its caption on Home)
RUN_REQUESTED = "run_requested"  # set by a preset: the run panel runs once as if Run had been pressed

# runs kept per browser across refreshes, whole sessions saved and opened (ui/engine_link/worker_link.py,
# ui/controls/demo_panel.py, pages/story/timing.py)
BROWSER_TOKEN_NEW = "browser_token_new"  # the token this session gave its browser (its cookie is set by a script)
BROWSER_COOKIE = "browser_cookie"  # container of that script (its CSS class: st-key-browser_cookie)
SESSION_DOWNLOAD = "sb_session_download"  # save every run of the session in one file
SESSION_UPLOAD = "sb_session_upload"  # file uploader: open a session file
TIMING_HANDOUT = "timing_handout_html"  # the handout: the HTML report of every run side by side

# room mode (ui/room/): the session's admitted role and the join form
ROOM_ROLE = "room_role"  # "teacher" or "student" once the session entered a code
ROOM_RULES = "room_rules"  # the room's rules for this session, asked by the engine link (ui/room/admission.py)
ROOM_SIGN_IN = "room_sign_in"  # the signed token this session's browser keeps in a cookie (ui/room/gate.py)
ROOM_COOKIE = "room_cookie"  # container of the script that sets that cookie
ROOM_LANDING = "room_landing"  # the page a deep link asked for before the code (landed on once admitted)
ROOM_INTERRUPTED = "room_interrupted"  # the line about this browser's runs a restart cut short (and the history then)
ROOM_FORM = "room_form"
ROOM_CODE = "room_code"
ROOM_CODE_SHOWN = "room_code_shown"  # presenter mode shows the join code large until the teacher hides it
ROOM_CODE_TOGGLE = "room_code_toggle"  # its Hide / Show button
ROOM_CODE_BANNER = "room_code_banner"  # its container (CSS class st-key-room_code_banner: the large type)
ROOM_CODE_HEADER = "room_code_header"  # the teacher console's header line (ui/room/code_display.py)

# the look (ui/controls/theme_toggle.py): a dark theme for a dark room, in the sidebar, the presenter bar and links
DARK_THEME = "theme_dark"  # True: dark pages and charts (the link's theme=dark)
THEME_SWITCH = "theme_switch"  # the presenter bar's light/dark button

# predict, then measure (pages/room/poll.py, ui/room/poll_panel.py): the Poll itself is the Room's (room mode) or
# this session's (solo); widget keys below are the teacher's controls and a session's answer
POLL_SOLO = "poll_solo"  # solo mode: this session's own ui.room.polls.Poll
POLL_HISTORY = "poll_history"  # every Poll this session opened (CSV export)
POLL_PICK = "poll_pick"  # the bank question chosen
POLL_OPEN = "poll_open"
POLL_WRITE_TEXT = "poll_write_text"
POLL_WRITE_OPTIONS = "poll_write_options"
POLL_WRITE_EXPERIMENT = "poll_write_experiment"
POLL_WRITE_OPEN = "poll_write_open"
POLL_CLOSE = "poll_close"  # lock / unlock answers
POLL_REVEAL = "poll_reveal"  # show the room's answers (locks them)
POLL_REVOTE = "poll_revote"  # a new round of the same question
POLL_MEASURE = "poll_measure"
POLL_CANCEL = "poll_cancel"
POLL_JOB = "poll_job"  # the measurement in the worker (RunStore.jobs key)
POLL_MEASURING = "poll_measuring"  # the Poll this session's measurement answers
POLL_CSV = "poll_csv"
POLL_SAVE = "poll_save_question"  # a written question, downloaded as a file for assets/polls/
POLL_CHOICE = "poll_choice_"  # + the poll's serial: this session's answer
POLL_ERROR = "poll_error"  # one line from the last answer that could not be taken

# the Traffic lab (pages/labs/lab_traffic.py): a workload replayed per policy, judged against SLOs
TRAFFIC_PRESET = "traffic_preset"  # summarisation / chat / code (engine/perfmodel/workload.py PRESETS)
TRAFFIC_BURST = "traffic_burst"  # True: every request at t = 0
TRAFFIC_RATE = "traffic_rate"  # requests per second (Poisson when burstiness is 1)
TRAFFIC_BURSTINESS = "traffic_burstiness"
TRAFFIC_PROMPT = "traffic_prompt_tokens"
TRAFFIC_PROMPT_SPREAD = "traffic_prompt_spread"
TRAFFIC_OUTPUT = "traffic_output_tokens"
TRAFFIC_OUTPUT_SPREAD = "traffic_output_spread"
TRAFFIC_REQUESTS = "traffic_requests"
TRAFFIC_SEED = "traffic_seed"
TRAFFIC_POLICIES = "traffic_policies"
TRAFFIC_SLO_TTFT = "traffic_slo_ttft_ms"
TRAFFIC_SLO_TPOT = "traffic_slo_tpot_ms"
TRAFFIC_RUN = "traffic_run"
TRAFFIC_CANCEL = "traffic_cancel"
TRAFFIC_JOB = "traffic_job"  # the run in the worker (RunStore.jobs key)
TRAFFIC_RESULT = "traffic_result"  # RunStore.labs: the latest TrafficRun
TRAFFIC_TIMELINE = "traffic_timeline_policy"  # whose step timeline is drawn
TRAFFIC_WORKLOAD = "traffic_workload"  # the latest workload run here (the Measure-a-server page can replay it)
TRAFFIC_REPLAY = "traffic_replay"  # Measure a server: replay that workload
TRAFFIC_CHUNK = "traffic_chunk_tokens"  # chunked prefill's token budget per step (vLLM's --max-num-batched-tokens)
# quiet timing (ui/controls/widgets.py): no live chart and no streamed text while the model runs, drawn at the end
QUIET_TIMING = "sb_quiet_timing"
# the fleet planner (pages/labs/lab_fleet.py): workload, SLOs, card, price, policies; the plans of the last search
FLEET_WORKLOAD = "fleet_workload"
FLEET_RATE = "fleet_rate"  # requests per second
FLEET_REQUESTS = "fleet_requests"  # how many requests the simulation sends
FLEET_TTFT = "fleet_ttft_ms"
FLEET_TPOT = "fleet_tpot_ms"
FLEET_MODEL = "fleet_model"
FLEET_CARD = "fleet_card"
FLEET_PRICE = "fleet_price_"  # + the card's index: each card keeps its own price per hour
FLEET_POLICIES = "fleet_policies"
FLEET_MAX_BATCH = "fleet_max_batch"
FLEET_BUDGET = "fleet_token_budget"
FLEET_LINK = "fleet_link_gb_s"
FLEET_PLAN = "fleet_plan"  # the button
FLEET_RESULT = "fleet_result"  # (inputs, plans by policy) of the last search
FLEET_ERROR = "fleet_error"
FLEET_PROMPT = "fleet_prompt_tokens"  # a custom workload's mean lengths
FLEET_OUTPUT = "fleet_output_tokens"
FLEET_DECODE_CARD = "fleet_decode_card"  # a split fleet's decode cards, when another kind than the prefill ones
FLEET_DECODE_PRICE = "fleet_decode_price_"  # + the card's index, as FLEET_PRICE
FLEET_PEAKS_JOB = "fleet_peaks_job"  # measuring this machine's peaks from the planner page
FLEET_PEAKS_MEASURE = "fleet_peaks_measure"  # the button
