"""Sampling state that remembers: parameters whose law depends on the tokens emitted so far."""

from .conventions import HISTORY_CONVENTIONS, HistoryConvention
from .generation import history_generation_law, padded_code, stop_padding_violation
from .masks import bad_words_mask, grammar_mask, grammar_states, grammar_violation
from .processors import CONVENTION, generated_length, history_logits, is_stop

__all__ = [
    "CONVENTION",
    "HISTORY_CONVENTIONS",
    "HistoryConvention",
    "bad_words_mask",
    "generated_length",
    "grammar_mask",
    "grammar_states",
    "grammar_violation",
    "history_generation_law",
    "history_logits",
    "is_stop",
    "padded_code",
    "stop_padding_violation",
]
