"""Text <-> token ids for the engine, and the checks that turn bad input into a clear EngineError."""
from __future__ import annotations

from dataclasses import dataclass

from engine.errors import EngineError

MAX_NEW_TOKENS_CAP = 100_000  # beyond this the request is certainly a typo
FILL_SEPARATOR = "\n\n"  # placed between repeats when a short text is repeated to fill N tokens


def check_text(text: str, what: str = "the prompt") -> str:
    """`text` if a tokenizer can read it: a lone surrogate (\\udcff from bytes that were not UTF-8 on a command
    line, or \\ud800 escaped in JSON) is not Unicode text, and the tokenizer would fail with a cryptic TypeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start].encode("unicode_escape").decode("ascii")
        raise EngineError(f"{what} is not valid Unicode text: character {exc.start} is a lone surrogate ({bad}), "
                          "e.g. bytes that were not UTF-8") from None
    return text


def chat_ids(lm, messages: list[dict]) -> list[int]:
    """Token ids of a conversation in the model's chat template, ending with the assistant's turn opening."""
    for i, m in enumerate(messages):
        check_text(str(m.get("content", "")), f"message {i + 1}")
    tok = lm.tokenizer
    if not getattr(tok, "chat_template", None):
        raise EngineError(f"{lm.name} has no chat template; turn the chat option off")
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def encode_prompt(lm, prompt: str | list[int], chat: bool = False) -> list[int]:
    """Token ids for a prompt given as text (optionally wrapped in the chat template) or as ids."""
    if isinstance(prompt, (list, tuple)):
        if not prompt:
            raise EngineError("the prompt is empty: give at least one token")
        wrong = next((t for t in prompt if isinstance(t, bool) or not isinstance(t, int)), None)
        if wrong is not None:
            raise EngineError(f"a prompt given as a list must hold token ids (whole numbers), not {type(wrong).__name__} "
                              f"values such as {wrong!r}; give text as one string")
        bad = [t for t in prompt if not 0 <= t < lm.config.vocab_size]
        if bad:
            raise EngineError(f"token id {bad[0]} is outside the vocabulary (0..{lm.config.vocab_size - 1})")
        return [int(t) for t in prompt]
    if not isinstance(prompt, str):
        raise EngineError(f"the prompt must be text (a string) or a list of token ids, not {type(prompt).__name__}")
    if not prompt.strip():
        raise EngineError("the prompt is empty: type some text first")
    check_text(prompt)
    if chat:
        return chat_ids(lm, [{"role": "user", "content": prompt}])
    return lm.tokenizer.encode(prompt, add_special_tokens=False) or [lm.config.bos_token_id or 0]


MAX_BATCH_SIZE = 1024  # far beyond what fits in memory for any model this engine runs


def check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise EngineError(f"batch_size must be a whole number from 1 to {MAX_BATCH_SIZE} (got {batch_size!r})")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise EngineError(f"batch_size must be from 1 to {MAX_BATCH_SIZE} (got {batch_size})")
    return batch_size


def check_max_new_tokens(max_new_tokens, cap: int | None = None) -> int:
    """max_new_tokens as a whole number from 1 to `cap` (the operator's limit; None: only typos are refused)."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise EngineError(f"max_new_tokens must be a whole number, not {max_new_tokens!r}")
    if max_new_tokens < 1:
        raise EngineError(f"max_new_tokens must be at least 1 (got {max_new_tokens})")
    if cap is not None and max_new_tokens > cap:
        raise EngineError(f"this server allows at most {cap} new tokens per request (asked for {max_new_tokens})")
    if max_new_tokens > MAX_NEW_TOKENS_CAP:
        raise EngineError(f"max_new_tokens={max_new_tokens} is far beyond any context window")
    return max_new_tokens


def check_context(lm, n_prompt: int, max_new_tokens: int) -> None:
    """The prompt and its longest answer fit the model's context window (max_new_tokens already checked)."""
    limit = lm.config.max_seq_len
    if n_prompt >= limit:
        raise EngineError(f"the prompt is {n_prompt} tokens but {lm.name} allows {limit} tokens in total "
                          f"(prompt + output); shorten it to at most {limit - 1} tokens")
    if n_prompt + max_new_tokens > limit:
        raise EngineError(f"prompt ({n_prompt} tokens) + max_new_tokens ({max_new_tokens}) exceeds "
                          f"{lm.name}'s context of {limit} tokens; max_new_tokens can be at most "
                          f"{limit - n_prompt} for this prompt")


def check_lengths(lm, n_prompt: int, max_new_tokens) -> int:
    """Validate max_new_tokens, and the prompt with it against the model's context window; return it as an int."""
    max_new_tokens = check_max_new_tokens(max_new_tokens)
    check_context(lm, n_prompt, max_new_tokens)
    return max_new_tokens


def token_pieces(tokenizer, ids: list[int], context: int = 4) -> list[str]:
    """The text each token adds. A character split over several byte tokens is given to the token
    that completes it (earlier ones get ""), so the pieces always join up to the decoded text."""
    pieces: list[str] = []
    start = 0  # first token whose text has not been emitted yet
    for i in range(len(ids)):
        left = max(0, start - context)  # a little left context so merges decode as in the full text
        before = tokenizer.decode(ids[left:start], skip_special_tokens=False)
        after = tokenizer.decode(ids[left:i + 1], skip_special_tokens=False)
        if after.endswith("\ufffd") and i < len(ids) - 1:
            pieces.append("")  # an incomplete multi-byte character: wait for the next token
            continue
        pieces.append(after[len(before):] if after.startswith(before) else tokenizer.decode(ids[start:i + 1]))
        start = i + 1
    return pieces


@dataclass(frozen=True)
class FittedPrompt:
    ids: list[int]  # exactly what the engine is given
    text: str  # the decoding of `ids`: what is shown as "the prompt sent"
    source_tokens: int  # tokens in the text before fitting
    action: str  # "as typed", "trimmed" or "repeated"


def fit_prompt_to_tokens(tokenizer, text: str, n_tokens: int | None) -> FittedPrompt:
    """Token ids of `text`, trimmed from the end or repeated (joined by a blank line) to exactly n_tokens.

    n_tokens None or 0 means "as typed": the text's own tokens are returned unchanged.
    Raises EngineError for an empty text (nothing to fill from) or a negative n_tokens.
    """
    if not text or not text.strip():
        raise EngineError("the prompt is empty: type some text or pick an example")
    if n_tokens is not None and n_tokens < 0:
        raise EngineError(f"the prompt length must be positive (got {n_tokens})")
    ids = list(tokenizer.encode(check_text(text), add_special_tokens=False))
    source = len(ids)
    if not n_tokens:
        return FittedPrompt(ids, text, source, "as typed")
    if source >= n_tokens:
        kept = ids[:n_tokens]
        action = "as typed" if source == n_tokens else "trimmed"
    else:
        # repeat the text (not the ids) so each repeat tokenises naturally, then trim to N
        repeat = list(tokenizer.encode(FILL_SEPARATOR + text, add_special_tokens=False))
        kept = list(ids)
        while len(kept) < n_tokens:
            kept.extend(repeat)
        kept = kept[:n_tokens]
        action = "repeated"
    return FittedPrompt(kept, tokenizer.decode(kept), source, action)


# The fable as filler: prompts of exactly N tokens for sweeps, benchmarks and `engine measure` are cut from it
SWEEP_TEXT = (
    "Two bends on the old post road decide how long a journey takes. At Longmen Bay the road opens into a wide "
    "valley, and the whole convoy rides through side by side: fifty horses cross it in almost the time one horse "
    "needs. Further on, a single-plank bridge spans the gorge, and the riders cross it one at a time, each waiting "
    "for the one before. Old Qin, the dispatcher, keeps two columns in his ledger, one for the valley and one for "
    "the bridge, because money spent on stronger horses shortens the valley but does nothing for the bridge. "
    "A language model reads its prompt the way the convoy crosses the valley, every token at once in one wide "
    "pass, and writes its answer the way riders cross the bridge, one token after another, each step reading all "
    "the weights and every key and value stored so far. "
)
