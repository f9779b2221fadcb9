"""Red-green watermarking (Kirchenbauer et al. 2023) that knows the grammar.

``WatermarkLogitsProcessor`` biases a keyed pseudo-random green list at each step
(drawn among the grammar's allowed tokens when given a guide);
``WatermarkDetector`` runs the z-test, naive or grammar-aware (forced tokens are not
scored, each position uses its true null probability), with exact p-values and a
windowed search for watermarked spans in mixed text.

With ``guided.generate`` the processor goes in the ``watermark=`` argument, applied
last, after the grammar mask, the processors and the sampling warpers (never in
``processors=``); with ``model.generate`` it is a plain logits processor.

``guided.watermark.service`` serves detection over HTTP (``guided serve``): aggregates
only by default, with optional bearer-token auth and a per-client rate limit
(docs/watermark.md, "The detection service").

Example::

    import guided
    from guided.watermark import WatermarkDetector, WatermarkLogitsProcessor, load_key

    key = load_key("wm.key")
    r = guided.generate(model, tokenizer, "Write a haiku.", temperature=1.0,
                        watermark=WatermarkLogitsProcessor(len(tokenizer), key))
    WatermarkDetector(tokenizer, key).detect(r.token_ids).z_score

    out = model.generate(**inputs, do_sample=True,
                         logits_processor=[WatermarkLogitsProcessor(len(tokenizer), key)])
"""

from .config import KeyFileWarning, WatermarkConfig, load_key
from .detector import DetectionResult, WatermarkDetector
from .processor import WatermarkLogitsProcessor

__all__ = ["DetectionResult", "KeyFileWarning", "WatermarkConfig", "WatermarkDetector", "WatermarkLogitsProcessor",
           "load_key"]
