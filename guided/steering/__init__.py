"""Logits processors that steer within the mask.

Each is a Hugging Face style callable ``(input_ids [B, T], scores [B, V]) -> scores``
that ``guided.generate(..., processors=[...])`` runs between the two applications of
the grammar mask (``guided.decoding.step``), and that ``model.generate`` takes as a
``logits_processor`` too:

- ``bias``: ``LogitBias``, ``PresencePenalty``, ``FrequencyPenalty``, ``RepetitionPenalty``;
- ``ensemble``: ``DExperts`` and ``ProxyTuning`` over helper models kept in
  ``ContextModel``s (each with its own KV cache);
- ``classifier``: ``ClassifierGuidance`` (FUDGE / CAIF re-ranking of the best allowed
  candidates by a classifier of the text).

Example::

    >>> from guided.steering import LogitBias, RepetitionPenalty
    >>> guided.generate(model, tok, "Say hi", processors=[LogitBias({42: -5.0}), RepetitionPenalty(1.2)])
"""

from guided.decoding.context_model import ContextModel

from .bias import FrequencyPenalty, LogitBias, PresencePenalty, RepetitionPenalty
from .classifier import ClassifierGuidance
from .ensemble import DExperts, ProxyTuning

__all__ = [
    "ClassifierGuidance",
    "ContextModel",
    "DExperts",
    "FrequencyPenalty",
    "LogitBias",
    "PresencePenalty",
    "ProxyTuning",
    "RepetitionPenalty",
]
