"""What one target forward costs by feed length, measured while decoding.

::

    verification pass over n positions (pending token + drafts)
      -> timed (CPU only), kept per length: the median of the last WINDOW passes
      -> padding(n): extra dummy positions where a longer feed measured cheaper
      -> best_length(chances): the drafts worth a place in the pass, by expected
       tokens per measured second

On CPU the price of a few extra positions depends on the BLAS build and the
processor: one machine multiplies fewer than 4 rows one at a time (SmolLM2: a
3-position pass 114 ms, a 4-position one 82 ms), another switches to a slower kernel
at 4 rows (66 ms against 93 ms). A hard-coded rule is wrong on one of them, so the
passes decoding makes anyway are timed. A GPU pass returns before it has run; there
nothing is timed, nothing padded, and every length counts as one pass.
"""

from __future__ import annotations

import statistics
import weakref

#: Passes kept per feed length; the median of these is the length's cost.
WINDOW = 9
#: Passes a length needs before its cost is used.
MIN_SAMPLES = 3
#: The most dummy positions added to a feed.
MAX_PAD = 3
#: A longer feed replaces a shorter one only when it measured at least this much cheaper
#: (timing noise must not flip the choice).
MARGIN = 0.95

_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class FeedCosts:
    """Measured seconds of a target forward by feed length, for one model on one
    device; shared by every ``generate`` call on that model (``for_model``).

    Args:
        timed: whether passes are timed at all (False on GPU: a pass returns before
            it has run).

    Example::

        >>> costs = FeedCosts.for_model(model)
        >>> pad = costs.padding(len(feed))          # dummy positions to append
        >>> t = time.perf_counter(); model(...); costs.record(len(feed) + pad, time.perf_counter() - t)
    """

    def __init__(self, timed: bool = True):
        self.timed = timed
        self._seconds: dict[int, list[float]] = {}

    @classmethod
    def for_model(cls, model) -> FeedCosts:
        """The costs of ``model`` on its device (made on first use, kept while the
        model lives)."""
        device = str(model.device)
        key = (device, getattr(model, "dtype", None))
        per_model = _SHARED.setdefault(model, {})
        got = per_model.get(key)
        if got is None:
            got = per_model[key] = cls(timed=device.startswith("cpu"))
        return got

    def record(self, n: int, seconds: float) -> None:
        """Keep one pass over ``n`` positions that took ``seconds``."""
        if not self.timed:
            return
        kept = self._seconds.setdefault(n, [])
        kept.append(seconds)
        if len(kept) > WINDOW:
            del kept[0]

    def cost(self, n: int) -> float | None:
        """The median seconds of a pass over ``n`` positions, None until measured."""
        kept = self._seconds.get(n)
        if not kept or len(kept) < MIN_SAMPLES:
            return None
        return statistics.median(kept)

    def padding(self, n: int) -> int:
        """Dummy positions to append to an ``n``-position feed: to the cheapest
        measured length up to ``n + MAX_PAD``, where that is cheaper than ``n``
        measured (0 while ``n`` is not measured, so that it gets measured)."""
        own = self.cost(n) if n >= 2 else None
        if own is None:
            return 0
        best, pad = own * MARGIN, 0
        for extra in range(1, MAX_PAD + 1):
            c = self.cost(n + extra)
            if c is not None and c < best:
                best, pad = c, extra
        return pad

    def best_length(self, chances: list[float]) -> int:
        """How many of a draft's tokens to verify: the prefix that yields the most
        expected tokens per measured second. A pass over the pending token and ``d``
        drafts yields ``1 + sum over j <= d of chances[0] * ... * chances[j - 1]``
        tokens on average (``chances[i]``: that draft token is kept if all before it
        are). All of them where the full pass is not measured (so it gets measured)
        or passes are not timed.

        Example::

            >>> costs.best_length([0.9, 0.9, 0.9])   # 4 positions measured dearer than 3
            2
        """
        n = len(chances)
        full = self._padded_cost(n + 1)
        if full is None:
            return n
        expected, reach = [1.0], 1.0  # tokens a pass with d drafts yields, d = 0 .. n
        for p in chances:
            reach *= p
            expected.append(expected[-1] + reach)
        best_d, best = n, expected[n] / full
        for d in range(n - 1, -1, -1):  # a shorter draft only where clearly better
            c = self._padded_cost(d + 1)
            if c is not None and expected[d] / c * MARGIN > best:
                best_d, best = d, expected[d] / c
        return best_d

    def _padded_cost(self, n: int) -> float | None:
        return self.cost(n + self.padding(n))
