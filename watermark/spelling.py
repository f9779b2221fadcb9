"""Positions where the grammar fixes the text and leaves only its tokenisation open.

After ``{"cust`` under a schema whose only key is ``customer_name``, the allowed
tokens are ``o``, ``om``, ``omer``, ...: every one spells a prefix of the same forced
text. Choosing among them is not a choice of content.

Generation still draws a green list there: the text is the same whatever the split,
so the bias costs no content, and a small model's choice of split does follow it.
That signal lives in the token ids only. A detector given *text* re-tokenises it
canonically, so at these positions it sees the tokenizer's split, not the model's:
green no more often than chance, noise that dilutes the test. The grammar-aware
detector therefore skips them for text input and scores them for token ids.

The check is a function of the allowed set alone (never of the token chosen), so the
z-test's null distribution over the remaining positions is unchanged.
"""

from __future__ import annotations

from collections import Counter


class SpellingCheck:
    """``check(allowed_ids)``: True when the allowed tokens all spell one text, i.e.
    each is a prefix of the longest (EOS or any special token makes it a real choice).

    Example::

        >>> check = SpellingCheck(guide.vocab)
        >>> check([ids["o"], ids["om"], ids["omer"]])
        True
    """

    def __init__(self, vocab):
        self.token_bytes = vocab.token_bytes
        self.max_chain = _longest_prefix_chain(self.token_bytes)

    def __call__(self, allowed) -> bool:
        n = len(allowed)
        if n < 2 or n > self.max_chain:
            return False
        spellings = [self.token_bytes[int(i)] for i in allowed]
        if any(s is None for s in spellings):
            return False
        longest = max(spellings, key=len)
        return all(longest.startswith(s) for s in spellings)


def _longest_prefix_chain(token_bytes) -> int:
    """The most tokens that are all prefixes of one token (duplicates counted): no
    larger allowed set can pass the check, so larger sets skip it at no cost."""
    count = Counter(b for b in token_bytes if b)
    best = 1
    for b in count:
        best = max(best, sum(count.get(b[:k], 0) for k in range(1, len(b) + 1)))
    return best

