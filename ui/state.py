"""Every st.session_state key in one place, so pages never invent their own spellings."""

# the shared sidebar's widgets
MODEL = "sb_model"
DEVICE = "sb_device"
DTYPE = "sb_dtype"
EXAMPLE = "sb_example"
PROMPT = "sb_prompt"
PROMPT_TOKENS = "sb_prompt_tokens"
MAX_NEW_TOKENS = "sb_max_new_tokens"
TEMPERATURE = "sb_temperature"
TOP_K = "sb_top_k"
TOP_P = "sb_top_p"
SEED = "sb_seed"
CHAT = "sb_chat"
RUN = "sb_run"

# results kept across pages
LAST_TRACE = "last_trace"  # engine.Trace of the latest run
RUN_HISTORY = "run_history"  # list of engine.Trace, every run of this session
LAST_ERROR = "last_error"  # message of the latest failed run, shown instead of a traceback
