"""Logits processors that steer within the mask: logit bias and penalties
(``bias``), DExperts and proxy-tuning (``ensemble``), classifier guidance
(``classifier``)."""
