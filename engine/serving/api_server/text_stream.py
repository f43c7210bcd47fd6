"""From token ids to the text a client sees: incremental detokenisation and stop strings.

A server streams text, not tokens, and two things make that more than joining token pieces:
1. One character may span several byte tokens (an emoji is 4 UTF-8 bytes). A token's text is only
   known once its character is complete; until then decoding ends in U+FFFD and the token adds "".
   Each step decodes a short window of earlier tokens as left context, so the cost per token stays
   constant (the incremental detokeniser of TGI and vLLM).
2. Stop strings: generation ends as soon as the text contains one, and the client never sees it.
   Text that could still become a stop string is held back until it clearly does not.
Special tokens (the end-of-sequence token) add no text, as in `python -m engine generate`.
"""
from __future__ import annotations


class TextStream:
    """Feed token ids one at a time; get back the text that may be released to the client."""

    def __init__(self, tokenizer, stop: list[str] | tuple[str, ...] = ()):
        self.tokenizer = tokenizer
        self.stop = [s for s in stop if s]
        self.ids: list[int] = []
        self.text = ""  # every character decoded so far (cut at the stop string once one is found)
        self.sent = 0  # characters of `text` already released
        self.stopped = False  # a stop string was found: generation should end
        self._prefix = 0  # window start: tokens before it are never decoded again
        self._read = 0  # tokens up to here are already in `text`

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def add(self, token_id: int) -> str:
        """Add one generated token; returns the newly released text ("" while held back or incomplete)."""
        if self.stopped:
            return ""
        self.ids.append(int(token_id))
        before = self._decode(self.ids[self._prefix:self._read])
        after = self._decode(self.ids[self._prefix:])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.text += after[len(before):]
            self._prefix, self._read = self._read, len(self.ids)
        return self._release(final=False)

    def finish(self) -> str:
        """Generation is over: release everything still held back (a dangling partial character too)."""
        if not self.stopped and self._read < len(self.ids):
            before = self._decode(self.ids[self._prefix:self._read])
            self.text += self._decode(self.ids[self._prefix:])[len(before):]
            self._read = len(self.ids)
        return self._release(final=True)

    def _release(self, final: bool) -> str:
        if self.stop and not self.stopped:
            longest = max(len(s) for s in self.stop)
            start = max(0, self.sent - longest + 1)  # a stop string may straddle what was already released
            hits = [i for i in (self.text.find(s, start) for s in self.stop) if i >= 0]
            if hits:
                self.text, self.stopped, final = self.text[:min(hits)], True, True
        end = len(self.text) if final else len(self.text) - self._held_back()
        out = self.text[self.sent:end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return out

    def _held_back(self) -> int:
        """Length of the longest end of `text` that is the beginning of some stop string."""
        held = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self.text)), held, -1):
                if self.text.endswith(s[:k]):
                    held = k
                    break
        return held
