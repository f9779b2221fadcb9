"""Decoding loops over the contract: ``generate`` (sampling or greedy, with a KV
cache), constrained beam search and speculative decoding, all drawing each token
from the scores of one step function (``step.next_token_scores``)."""
