"""guided: structured and guided generation for PyTorch / Hugging Face models.

A spec (``Regex``, ``JsonSchema``, ``Grammar``, ``StructuralTag``, ``ToolCalls``,
``AfterThinking``) compiles into a ``Guide`` for one vocabulary; a ``Matcher`` per
sequence fills a token bitmask each step, which
``apply_token_bitmask_`` applies to the logits (on their device).

Example::

    >>> import guided
    >>> model, tokenizer = guided.models.load_default_model()
    >>> result = guided.generate(model, tokenizer, "Give a date.", guided.Regex(r"\\d{4}-\\d{2}-\\d{2}"))
    >>> result.text, result.stats.tokens_per_s

Beyond the names exported here: ``guided.steering`` (bias, penalties, DExperts,
proxy-tuning, classifier guidance), ``guided.decoding.speculative`` (drafters),
``guided.watermark`` (watermark and detection), ``guided.integrations.vllm`` (the
vLLM plug-in, docs/vllm.md) and ``guided.models`` (the default model). The guide and matcher classes ``guided.compile`` returns (``FSMGuide``,
``GrammarGuide``, ...) are internal: code against ``Guide`` and ``Matcher``.

Layers, bottom to top (a module imports only from its own layer or below)::

    guided.errors                    the error types (imports nothing)
    guided.fsm                       regex -> automata, vocabularies, token indexes
    guided.grammars                  JSON Schema and lark grammars -> automata / Earley
    guided (specs, compiler,         the contract: specs, compile(), Guide / Matcher,
      matcher, bitmask, processor)   bitmasks, the Hugging Face logits processor
    guided.decoding                  generate, beam search, speculative decoding
    guided.steering                  bias, penalties, DExperts, proxy-tuning, classifier
    guided.watermark                 red-green watermark and its detector
    guided.integrations              serving engines: the vLLM logits processor
    guided.models, guided.cli        the default model and the command line
"""

from guided.errors import (
    ApproximationLimitError,
    BudgetExceededError,
    CompileTimeoutError,
    EmptyLanguageError,
    GrammarError,
    GuideMemoryError,
    RecursiveSchemaError,
    RegexError,
    RegexSyntaxError,
    RegexTooLargeError,
    SchemaError,
    SchemaTooLargeError,
    SpecError,
    StructuralTagError,
    TokenBudgetError,
    UnsatisfiableSchemaError,
    UnsupportedRegexFeature,
    UnsupportedSchemaError,
    UnwritableSpecError,
)
from guided.fsm.vocabulary import Vocabulary

from . import models
from .batch import fill_next_token_bitmasks
from .bitmask import allocate_token_bitmask, apply_token_bitmask_, unpack_token_bitmask
from .compiler import cache_info, clear_cache, compile, configure_cache, load_kernels
from .decoding.generation import GenerationResult, GenerationStats, generate
from .matcher import Guide, Matcher
from .processor import LogitsProcessor
from .specs import Grammar, JsonSchema, Regex, StructuralTag
from .thinking import AfterThinking
from .tool_calls import ToolCalls

__version__ = "0.1.0"

__all__ = [
    # specs and their compilation
    "AfterThinking",
    "Grammar",
    "JsonSchema",
    "Regex",
    "StructuralTag",
    "ToolCalls",
    "Vocabulary",
    "cache_info",
    "clear_cache",
    "compile",
    "configure_cache",
    "load_kernels",
    # the matcher contract
    "Guide",
    "Matcher",
    "LogitsProcessor",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "fill_next_token_bitmasks",
    "unpack_token_bitmask",
    # decoding
    "GenerationResult",
    "GenerationStats",
    "generate",
    "models",
    # errors
    "ApproximationLimitError",
    "BudgetExceededError",
    "CompileTimeoutError",
    "EmptyLanguageError",
    "GrammarError",
    "GuideMemoryError",
    "TokenBudgetError",
    "RecursiveSchemaError",
    "RegexError",
    "RegexSyntaxError",
    "RegexTooLargeError",
    "SchemaError",
    "SchemaTooLargeError",
    "SpecError",
    "StructuralTagError",
    "UnsatisfiableSchemaError",
    "UnsupportedRegexFeature",
    "UnsupportedSchemaError",
    "UnwritableSpecError",
]
