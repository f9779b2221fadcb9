"""The red-green watermark in a vLLM server: the key, the settings, the bias step.

The key is the server's, never a request's: ``GUIDED_WATERMARK_KEY_FILE`` (a file,
``chmod 600``) or ``GUIDED_WATERMARK_KEY`` (the key itself), read by the engine's
worker and by the detection endpoint. The settings (``GUIDED_WATERMARK_GAMMA``,
``_DELTA``, ``_SEEDING``, ``_CONTEXT_WIDTH``; defaults those of
``WatermarkConfig``) must be the same for both, so both read them from here.
Neither the key nor anything derived from it is logged.

vLLM runs logits processors before temperature, ``guided.generate`` runs the
watermark after it; the bias is scaled by the request's temperature so that both
give the same distribution: ``softmax(logits / T + delta * green)``.
"""

from __future__ import annotations

import os

import torch

from guided.watermark.config import WatermarkConfig, load_key
from guided.watermark.processor import WatermarkLogitsProcessor

KEY_FILE_ENV = "GUIDED_WATERMARK_KEY_FILE"
KEY_ENV = "GUIDED_WATERMARK_KEY"


def configured() -> bool:
    """Whether this process has a watermark key in its environment."""
    return bool(os.environ.get(KEY_FILE_ENV) or os.environ.get(KEY_ENV))


def server_key() -> bytes:
    """The server's key (``load_key`` on the file, else the variable).

    Raises:
        ValueError: no key configured, or an unreadable or too short one.
    """
    return load_key(os.environ.get(KEY_FILE_ENV) or None, None if os.environ.get(KEY_FILE_ENV) else KEY_ENV)


def server_config() -> WatermarkConfig:
    """The watermark settings from the environment (``WatermarkConfig``'s defaults)."""
    d = WatermarkConfig()
    return WatermarkConfig(
        gamma=float(os.environ.get("GUIDED_WATERMARK_GAMMA", d.gamma)),
        delta=float(os.environ.get("GUIDED_WATERMARK_DELTA", d.delta)),
        seeding=os.environ.get("GUIDED_WATERMARK_SEEDING", d.seeding),
        context_width=int(os.environ.get("GUIDED_WATERMARK_CONTEXT_WIDTH", d.context_width)),
    )


class ServerWatermark:
    """The bias step for the watermarked rows of a vLLM batch.

    Args:
        vocab: the served tokenizer's ``guided.Vocabulary``.
        key: the secret key (bytes).
        config: the ``WatermarkConfig`` (detection must use the same).

    Example::

        >>> wm = ServerWatermark.from_environment(vocab)
        >>> wm.bias(logits, [(0, [12, 873], 1.0, None)], bitmask)   # row 0, its last ids, temperature
    """

    def __init__(self, vocab, key: bytes, config: WatermarkConfig):
        settings = {"gamma": config.gamma, "delta": config.delta, "seeding": config.seeding,
                    "context_width": config.context_width}
        self.context_width = config.context_width
        self.plain = WatermarkLogitsProcessor(len(vocab), key, **settings)
        # Constrained rows: green lists among the allowed tokens, as guided.generate draws them.
        self.aware = WatermarkLogitsProcessor(len(vocab), key, vocab=vocab, **settings)

    @classmethod
    def from_environment(cls, vocab) -> ServerWatermark | None:
        """The server's watermark, or None where no key is configured."""
        if not configured():
            return None
        return cls(vocab, server_key(), server_config())

    def bias(self, logits: torch.Tensor, rows, bitmask: torch.Tensor) -> torch.Tensor:
        """Watermark ``rows`` of ``logits`` in place.

        Args:
            logits: ``[batch, V]``.
            rows: ``(logits_row, context_ids, temperature, bitmask_row)`` per row;
                ``context_ids`` ends with the row's last token; ``bitmask_row`` is the
                row's grammar mask in ``bitmask`` (None: unconstrained).
            bitmask: the batch's host bitmask.

        Returns:
            ``logits``.
        """
        w = self.context_width
        for proc, group in ((self.plain, [r for r in rows if r[3] is None]),
                            (self.aware, [r for r in rows if r[3] is not None])):
            group = [r for r in group if len(r[1]) >= w]  # too short a history: left alone
            if not group:
                continue
            where = torch.tensor([r[0] for r in group], device=logits.device)
            context = torch.tensor([list(r[1][-w:]) for r in group], device=logits.device)
            # Greedy requests (temperature 0) keep an unscaled bias: argmax is what counts.
            temps = torch.tensor([[t if t > 0 else 1.0] for _, _, t, _ in group], device=logits.device,
                                 dtype=logits.dtype)
            masks = bitmask[torch.tensor([r[3] for r in group])] if proc is self.aware else None
            scores = logits.index_select(0, where) / temps
            logits.index_copy_(0, where, proc.bias(context, scores, masks) * temps)
        return logits
