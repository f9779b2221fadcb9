"""Budget-aware decoding: the checks every loop that knows its token budget makes.

A loop that will generate at most ``max_new_tokens`` tokens passes each matcher the
tokens left (``fill_next_token_bitmask(..., remaining=...)``), so the output is a
complete match, EOS written, by the last token (``docs/budget.md``). Before the
first token it checks that the shortest output fits at all.
"""

from __future__ import annotations

from guided.errors import TokenBudgetError
from guided.fsm.distance import INFINITE

from .matcher import Guide


def check_budget(guide: Guide, max_new_tokens: int, wanted: bool | None = None, **names) -> bool:
    """Whether a loop with ``max_new_tokens`` tokens should pass ``remaining`` to
    ``guide``'s matchers.

    Args:
        guide: the compiled guide (None: unconstrained, no budget).
        max_new_tokens: the tokens the loop may generate, EOS included.
        wanted: True (required: an error where the guide cannot), None (where the
            guide supports it) or False (never).
        **names: ``limit`` and ``opt_out`` for the error's message (``TokenBudgetError``).

    Returns:
        True where the loop should pass ``remaining``; False also where no token path
        finishes the spec at all (decoding then meets that dead end as without a
        budget).

    Raises:
        TokenBudgetError: the shortest output of the spec does not fit.
        ValueError: ``wanted`` is True and the guide has no budget-aware masks.

    Example::

        >>> check_budget(guided.compile(guided.Regex(r"[0-9]{4}"), tok), 3)
        TokenBudgetError: max_new_tokens=3 is too small: the shortest output ... takes 5 tokens
    """
    if guide is None or wanted is False:
        return False
    if not guide.supports_budget:
        if wanted:
            raise ValueError(f"budget-aware masks are available for regex, JSON Schema and grammar guides and "
                             f"thinking blocks before them, not for {type(guide).__name__}: pass "
                             "budget_aware=None or False")
        return False
    needed = guide.min_tokens()
    if needed >= INFINITE:
        # No token path to a match (a byte no token spells) or none found: a budget
        # cannot help; decoding meets the dead end as it would without one.
        return False
    if needed > max_new_tokens:
        raise TokenBudgetError(needed, max_new_tokens, exact=guide.budget_exact, **names)
    return True
