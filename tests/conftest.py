"""Shared fixtures: real tokenizers (offline) and a tiny randomly initialised model."""

from __future__ import annotations

import pytest
import torch

try:
    from tests import tokenizer_zoo
except ImportError:  # tests/ itself on sys.path
    import tokenizer_zoo

import guided
from guided.fsm import kernels

# numba loaded up front: every test runs the kernels wherever it asks for them (a fresh
# process's first small compile runs without them: tests/test_first_run.py).
kernels.load()


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    return tokenizer_zoo.smollm2()


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_tokenizer):
    return guided.Vocabulary.from_tokenizer(smollm2_tokenizer)


#: The tiny model's vocabulary is padded past the tokenizer's 49,152 ids, as real
#: models often are: ids >= len(tokenizer) must never be generated.
PADDED_VOCAB = 49152 + 64


@pytest.fixture(scope="session")
def tiny_model():
    """A 2-layer Llama with random weights over SmolLM2's (padded) vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=PADDED_VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    model = LlamaForCausalLM(config).eval()
    # Random logits are nearly flat; scale them up so sampling is not uniform noise
    # and top-k / top-p actually cut something.
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    return model
