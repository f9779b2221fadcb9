"""guided: structured and guided generation for PyTorch / Hugging Face models.

Example::

    import guided
    model, tokenizer = guided.models.load_default_model()
    result = guided.generate(model, tokenizer, "Give a date.", guided.Regex(r"\\d{4}-\\d{2}-\\d{2}"))
    print(result.text, result.stats.tokens_per_s)
"""

from guided.decoding.generation import GenerationResult, GenerationStats, generate
from guided.errors import (
    EmptyLanguageError,
    RegexError,
    RegexSyntaxError,
    RegexTooLargeError,
    UnsupportedRegexFeature,
)
from guided.fsm.vocabulary import Vocabulary
from guided.grammars.json_schema.compiler import (
    ApproximationLimitError,
    RecursiveSchemaError,
    SchemaError,
    UnsatisfiableSchemaError,
    UnsupportedSchemaError,
)
from guided.grammars.lark_frontend import GrammarError

from . import models
from .bitmask import allocate_token_bitmask, apply_token_bitmask_, unpack_token_bitmask
from .compiler import compile
from .grammar_matcher import GrammarGuide, GrammarMatcher
from .matcher import FSMGuide, FSMMatcher, Guide, Matcher
from .processor import LogitsProcessor
from .specs import Grammar, JsonSchema, Regex

__version__ = "0.1.0"

__all__ = [
    "ApproximationLimitError",
    "EmptyLanguageError",
    "FSMGuide",
    "FSMMatcher",
    "GenerationResult",
    "GenerationStats",
    "Grammar",
    "GrammarError",
    "GrammarGuide",
    "GrammarMatcher",
    "Guide",
    "JsonSchema",
    "LogitsProcessor",
    "Matcher",
    "Regex",
    "RegexError",
    "RegexSyntaxError",
    "RecursiveSchemaError",
    "RegexTooLargeError",
    "SchemaError",
    "UnsatisfiableSchemaError",
    "UnsupportedSchemaError",
    "UnsupportedRegexFeature",
    "Vocabulary",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "compile",
    "generate",
    "models",
    "unpack_token_bitmask",
]
