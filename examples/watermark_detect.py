"""Watermark free text and schema-constrained JSON with the default model, then detect.

The ``WatermarkLogitsProcessor`` goes in ``guided.generate``'s ``watermark=`` argument,
never in ``processors=``: it is applied last, after the grammar mask, the processors
and the sampling warpers, so it biases the distribution that is actually sampled.
For JSON the processor gets the compiled guide too, and draws its green list among
the tokens the schema allows.

Prints, for each output, the z-score and p-value with the right key, with a wrong
key, and (for JSON) naive against grammar-aware detection, from token ids and from
the text.

    python examples/watermark_detect.py          # ~1-3 minutes on a small CPU
"""

import torch

import guided
from guided.watermark import WatermarkDetector, WatermarkLogitsProcessor

torch.set_num_threads(2)
model, tokenizer = guided.models.load_default_model()
KEY = b"example-watermark-key-please-change"
detector = WatermarkDetector(tokenizer, KEY)
wrong = WatermarkDetector(tokenizer, b"some-other-key-that-was-not-used")


def show(label, r):
    print(f"  {label:<14} z = {r.z_score:6.2f}  p = {r.p_value:.2e}  scored {r.num_tokens_scored:3d}"
          f"  forced {r.num_forced:3d}  watermarked: {r.is_watermarked}")


# 1. Free text, sampled: the watermark is generate's last step (watermark=, not processors=).
wm = WatermarkLogitsProcessor(len(tokenizer), KEY)
r = guided.generate(model, tokenizer, "Write a short story about a lighthouse keeper.", None,
                    max_new_tokens=150, temperature=1.0, seed=0, watermark=wm)
print(r.text[:300], "...\n")
show("right key", detector.detect(r.token_ids))
show("wrong key", wrong.detect(r.token_ids))

# 2. JSON under a schema: the same guide as the spec, so the green list is drawn among
#    the allowed tokens, and where the grammar fixes the text only green splits of it
#    are allowed (spelling="hard", the default with a guide): signal in the token ids
#    that the text does not carry. A processor with a guide follows one generation:
#    make a new one for each generate call.
schema = {
    "type": "object",
    "properties": {
        "product_name": {"type": "string", "maxLength": 40},
        "customer_review_text": {"type": "string", "minLength": 60, "maxLength": 300},
        "star_rating_out_of_five": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["product_name", "customer_review_text", "star_rating_out_of_five"],
    "additionalProperties": False,
}
guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), tokenizer)
wm = WatermarkLogitsProcessor(len(tokenizer), KEY, guide=guide)
r = guided.generate(model, tokenizer, "Review a pair of running shoes as JSON.", guide,
                    max_new_tokens=120, temperature=1.0, seed=1, watermark=wm)
print("\n" + r.text + "\n")
show("naive", detector.detect(r.token_ids))
show("grammar-aware", detector.detect(r.token_ids, guide=guide))
show("from the text", detector.detect(r.text, guide=guide))  # re-tokenised: spelling choices not scored
