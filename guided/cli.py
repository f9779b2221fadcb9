"""The ``guided`` command line.

::

    guided generate --regex '\\d{4}-\\d{2}-\\d{2}' "When did Apollo 11 land?"
    guided generate --regex '(yes|no)' --json "Is water wet?"
    guided generate --schema person.json "Describe Ada Lovelace."
    guided generate --pydantic mymodule:Person --whitespace indent=2 "Describe Ada Lovelace."
    guided generate --grammar sql "All users older than 30, as SQL."
    guided generate --grammar my.lark --start expr "Two plus two."
    guided generate --watermark-key-file wm.key --temperature 1 "Write a haiku."
    guided detect --key-file wm.key story.txt          (JSON result on stdout)
    guided detect --key-file wm.key --schema person.json out.json
    guided serve --key-file wm.key --port 8000         (POST /v1/watermark/detect)
    guided demo

Generated text goes alone to stdout; progress and timing go to stderr. A spec that
cannot be compiled (or a bad key file) fails with exit status 2 and a one-line
message, before the model loads. ``guided <command> --help`` lists every option.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="guided", description="Structured generation for Hugging Face models.")
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="generate text constrained by a spec")
    spec = gen.add_mutually_exclusive_group()
    spec.add_argument("--regex", help="Python regex the whole output must match")
    spec.add_argument("--schema", metavar="FILE.json", help="JSON Schema file the output must satisfy")
    spec.add_argument("--pydantic", metavar="MODULE:CLASS", help="pydantic model class the output must satisfy")
    spec.add_argument("--grammar", metavar="FILE.lark|NAME",
                      help="lark grammar file, or a shipped grammar's name (json, arithmetic, sql, csv, python_expr)")
    spec.add_argument("--structural-tag", metavar="FILE.json",
                      help="structural tag file (XGrammar's format): free text with constrained tags")
    spec.add_argument("--tools", metavar="FILE.json",
                      help="OpenAI-style tools (a JSON list): tool calls, rendered into the system prompt")
    gen.add_argument("--tool-choice", default="auto",
                     help='with --tools: "auto" (default), "none", "required", or a tool\'s name')
    gen.add_argument("--tool-format", choices=("hermes", "llama3", "mistral", "json"), default="hermes",
                     help="with --tools: the call syntax (default hermes)")
    gen.add_argument("--one-tool-call", action="store_true", help="with --tools: at most one call")
    gen.add_argument("--think", metavar="N", type=_count(0), default=None,
                     help="a <think> block of at most N tokens first, then the spec (or free text)")
    gen.add_argument("--start", default="start", help="the grammar's start rule (with --grammar)")
    gen.add_argument("--whitespace", default="flexible",
                     help='JSON whitespace: "flexible" (default), "compact", "indent=N" or "max=N" '
                          '(flexible, at most N characters per run)')
    gen.add_argument("--key-order", choices=("schema", "any"), default="schema",
                     help="JSON object keys in the schema's properties order (default) or in any order")
    gen.add_argument("--lenient", action="store_true",
                     help="drop JSON Schema keywords that cannot be enforced (with a warning) instead of failing")
    gen.add_argument("prompt", help="the prompt ('-' reads it from stdin)")
    gen.add_argument("--model", default=None,
                     help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M-Instruct)")
    gen.add_argument("--max-tokens", type=_count(1), default=256,
                     help="most new tokens, EOS included (default 256); regex and JSON output is finished "
                          "within them (budget-aware masks)")
    gen.add_argument("--no-budget", action="store_true",
                     help="masks ignore --max-tokens: the output may be cut unfinished")
    gen.add_argument("--temperature", type=_number(0), default=0.0, help="0 = greedy (default); above 0, sampling")
    gen.add_argument("--top-k", type=_count(1), default=None, help="sampling: keep the K best tokens")
    gen.add_argument("--top-p", type=_number(0, 1, low_open=True), default=None, help="sampling: nucleus of probability P")
    gen.add_argument("--seed", type=int, default=None, help="sampling: random seed (reproducible output)")
    gen.add_argument("--compile-timeout", metavar="S", type=_number(0, None, low_open=True), default=10.0,
                     help="seconds the spec may take to compile (default 10)")
    gen.add_argument("--system", default=None, help="system message for the chat template")
    gen.add_argument("--no-chat", action="store_true", help="send the prompt raw, without the chat template")
    gen.add_argument("--threads", type=_count(1), default=None, help="torch CPU threads")
    gen.add_argument("--json", action="store_true", help="print one JSON object with text and stats")
    gen.add_argument("--speculative", metavar="DRAFTERS", default=None,
                     help="speculative decoding (same output, fewer model passes): 'auto', or a comma "
                          "list of forced, lookup, early-exit[:LAYERS]")
    gen.add_argument("--num-draft-tokens", type=_count(1), default=8, help="most tokens drafted per pass")
    gen.add_argument("--watermark-key-file", metavar="K", default=None,
                     help="watermark the output with this key (red-green, gamma 0.25, delta 2; with a spec, "
                          "among its allowed tokens: detect with the same --schema)")
    gen.add_argument("--watermark-spelling", choices=("soft", "hard"), default=None,
                     help="with a spec: 'hard' (the default) keeps only green splits of fixed text "
                          "(stronger detection from token ids, none from text); 'soft' only biases them")
    gen.set_defaults(func=_cmd_generate)

    det = sub.add_parser("detect", help="test a text for the watermark; prints a JSON result")
    det.add_argument("file", help="text file ('-' reads stdin), tokenized with --tokenizer")
    _add_detector_options(det)
    det.add_argument("--schema", metavar="FILE.json", default=None,
                     help="the JSON Schema the text was generated under: grammar-aware detection")
    det.add_argument("--whitespace", default="flexible", help="the JSON whitespace generation used (as for generate)")
    det.add_argument("--key-order", choices=("schema", "any"), default="schema",
                     help="the JSON key order generation used (as for generate)")
    det.add_argument("--window", action="store_true", help="find the most watermarked span")
    det.set_defaults(func=_cmd_detect)

    srv = sub.add_parser("serve",
                         help="HTTP detection service (POST /v1/watermark/detect, GET /healthz, /openapi.json)")
    _add_detector_options(srv)
    srv.add_argument("--host", default="127.0.0.1",
                     help="interface to listen on (default 127.0.0.1: this machine only)")
    srv.add_argument("--port", type=_count(0, 65535), default=8000, help="TCP port (default 8000)")
    srv.add_argument("--max-body-bytes", type=_count(1), default=2_000_000,
                     help="larger request bodies get 413 (default 2000000)")
    srv.add_argument("--max-tokens", metavar="N", type=_count(1), default=100_000,
                     help="requests with more tokens get 413 (default 100000)")
    srv.add_argument("--min-scored-tokens", metavar="N", type=_count(0), default=16,
                     help="texts with fewer scored tokens get 422 (default 16; 0: no minimum)")
    srv.add_argument("--auth-token-file", metavar="F", default=None,
                     help="require a bearer token from this file (one per line, each a client; chmod 600); "
                          "/healthz stays open")
    srv.add_argument("--allow-details", action="store_true",
                     help="answer per-token green flags and window spans to requests that ask: anyone who may "
                          "call the service can then read green lists (trusted clients only)")
    srv.add_argument("--rate-limit", metavar="N", type=_number(0), default=2.0,
                     help="requests per second per client: per bearer token, else per address (default 2; 0: off)")
    srv.add_argument("--rate-burst", metavar="B", type=_count(1), default=20,
                     help="requests a client may send at once before the rate limit applies (default 20)")
    srv.add_argument("--compile-timeout", metavar="S", type=_number(0, low_open=True), default=10.0,
                     help="seconds a request's schema may take to compile, 422 past it (default 10)")
    srv.add_argument("--max-schema-jobs", metavar="N", type=_count(1), default=2,
                     help="requests with a schema (compile and grammar replay) run at once (default 2)")
    srv.add_argument("--schema-queue", metavar="N", type=_count(0), default=32,
                     help="requests with a schema that may wait for a job slot, 503 past it (default 32)")
    srv.set_defaults(func=_cmd_serve)

    demo = sub.add_parser("demo", help="regex-constrained generation with the default model, with timing")
    demo.add_argument("--threads", type=_count(1), default=1, help="torch CPU threads (default 1)")
    demo.set_defaults(func=_cmd_demo)
    return parser


def _add_detector_options(p) -> None:
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--key-file", metavar="K", help="file holding the watermark key (at least 16 bytes)")
    key.add_argument("--key-env", metavar="VAR", help="environment variable holding the key")
    p.add_argument("--tokenizer", default=None, help="local tokenizer / model folder (default: SmolLM2's)")
    p.add_argument("--gamma", type=_number(0, 1, low_open=True, high_open=True), default=0.25, help="green fraction generation used (default 0.25)")
    p.add_argument("--delta", type=_number(), default=2.0, help="bias generation used (default 2; not used by the test)")
    p.add_argument("--seeding", choices=("lefthash", "selfhash"), default="lefthash",
                   help="green-list seeding generation used (default lefthash)")
    p.add_argument("--context-width", type=_count(1), default=1, help="context tokens generation used (default 1)")
    p.add_argument("--z-threshold", type=_number(), default=4.0, help="z-score from which text is watermarked (default 4)")
    p.add_argument("--count-repeats", action="store_true", help="score repeated n-grams every time")


def _detector_from_args(args):
    from guided.watermark import WatermarkDetector, load_key

    from . import models

    key = load_key(args.key_file, args.key_env)
    tokenizer = models.load_tokenizer(args.tokenizer)
    return WatermarkDetector(
        tokenizer, key, args.gamma, args.delta, args.seeding, args.context_width,
        z_threshold=args.z_threshold, ignore_repeated_ngrams=not args.count_repeats,
    )


def _cmd_detect(args) -> int:
    text = _read_text(args.file)
    guide = None
    detector = _detector_from_args(args)
    if args.schema is not None:
        from .compiler import compile as compile_spec
        from .specs import JsonSchema

        spec = JsonSchema(_read_text(args.schema), whitespace=_whitespace(args), key_order=args.key_order)
        guide = compile_spec(spec, detector.tokenizer)
    result = detector.detect(text, guide=guide, window=args.window)
    print(json.dumps(result.as_dict()))
    return 0


def _cmd_serve(args) -> int:
    from guided.watermark.service import load_auth_tokens, serve

    # A bad token file fails before the tokenizer loads.
    tokens = load_auth_tokens(args.auth_token_file) if args.auth_token_file else None
    detector = _detector_from_args(args)
    _log(f"watermark detection on http://{args.host}:{args.port} (key id {detector.fingerprint['key_id']}; "
         f"auth {'on: ' + str(len(tokens)) + ' token(s)' if tokens else 'off'}; "
         f"rate limit {f'{args.rate_limit:g}/s per client' if args.rate_limit else 'off'}; "
         f"per-token details {'on' if args.allow_details else 'off'})")
    serve(detector, args.host, args.port, max_body_bytes=args.max_body_bytes, max_tokens=args.max_tokens,
          min_scored_tokens=args.min_scored_tokens, allow_details=args.allow_details, auth_tokens=tokens,
          rate_limit=args.rate_limit, rate_burst=args.rate_burst, compile_timeout=args.compile_timeout,
          max_schema_jobs=args.max_schema_jobs, schema_queue=args.schema_queue)
    return 0


def _read_text(path: str) -> str:
    """A file's text, or stdin's for ``-``, as UTF-8; a ``ValueError`` naming the file
    when it cannot be read or is not UTF-8 text."""
    name = "stdin" if path == "-" else repr(path)
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise ValueError(f"cannot read {name}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name} is not UTF-8 text (byte {e.start})") from None


def _count(low: int, high: int | None = None):
    """An argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{'' if high is None else high}")
        return value

    return parse


def _number(low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False):
    """An argparse type: a finite number within the bounds (open where asked)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
        too_low = low is not None and (value <= low if low_open else value < low)
        too_high = high is not None and (value >= high if high_open else value > high)
        if too_low or too_high:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            lo = "-inf" if low is None else f"{low:g}"
            hi = "inf" if high is None else f"{high:g}"
            raise argparse.ArgumentTypeError(f"{value:g} is not in {left}{lo}, {hi}{right}")
        return value

    return parse


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _load(model_path, threads):
    import torch

    from . import models

    if threads:
        torch.set_num_threads(threads)
    t = time.perf_counter()
    model, tokenizer = models.load_model(model_path)
    _log(f"model loaded in {time.perf_counter() - t:.1f} s")
    return model, tokenizer


def _spec_from_args(args):
    spec = _constraint_from_args(args)
    if args.think is None:
        return spec
    from .specs import StructuralTag
    from .thinking import AfterThinking

    return AfterThinking(spec if spec is not None else StructuralTag({"type": "any_text"}),
                         max_thinking_tokens=args.think)


def _constraint_from_args(args):
    from .specs import Grammar, JsonSchema, Regex, StructuralTag
    from .tool_calls import ToolCalls

    if args.regex is not None:
        return Regex(args.regex)
    if args.grammar is not None:
        if args.grammar.endswith(".lark") or "/" in args.grammar:
            return Grammar(_read_text(args.grammar), start=args.start)
        return Grammar.from_name(args.grammar, start=args.start)
    whitespace = _whitespace(args)
    if args.schema is not None:
        return JsonSchema(_read_text(args.schema), whitespace=whitespace, strict=not args.lenient,
                          key_order=args.key_order)
    if args.pydantic is not None:
        return JsonSchema(_import_class(args.pydantic), whitespace=whitespace, strict=not args.lenient,
                          key_order=args.key_order)
    if args.structural_tag is not None:
        return StructuralTag(_read_text(args.structural_tag), whitespace=whitespace)
    if args.tools is not None:
        choice = args.tool_choice
        if choice not in ("auto", "none", "required"):
            choice = {"type": "function", "function": {"name": choice}}
        return ToolCalls(json.loads(_read_text(args.tools)), tool_choice=choice, parallel=not args.one_tool_call,
                         format=args.tool_format, whitespace=whitespace)
    return None


def _whitespace(args):
    from guided.integrations.requests import parse_whitespace

    return parse_whitespace(args.whitespace, "--whitespace")


def _import_class(target: str):
    import importlib
    import os

    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--pydantic takes MODULE:CLASS, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"cannot import {module_name!r}: {e}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name!r} has no attribute {attr!r}") from None


def _check_spec(spec) -> None:
    """Compile the spec's automaton now, so a bad spec fails before the model loads."""
    from guided.fsm.regex import compile_regex

    from .specs import Grammar, JsonSchema, Regex, StructuralTag
    from .thinking import AfterThinking

    if isinstance(spec, Regex):
        compile_regex(spec.pattern, spec.flags)
    elif isinstance(spec, Grammar):
        from guided.grammars.lark_frontend import compile_lark

        compile_lark(spec.lark_text, spec.start)
    elif isinstance(spec, JsonSchema):
        from guided.grammars.json_schema.compiler import compile_json_schema

        compile_json_schema(spec.schema, spec.whitespace, spec.strict, spec.key_order)
    elif isinstance(spec, StructuralTag):  # ToolCalls too
        from guided.grammars.structural_tag import compile_structural_tag

        compile_structural_tag(spec.format, spec.whitespace)
    elif isinstance(spec, AfterThinking):
        _check_spec(spec.spec)


def _cmd_generate(args) -> int:
    from guided.decoding.generation import generate

    spec = _spec_from_args(args)
    _check_spec(spec)  # a bad spec fails before the slow model load
    drafter_names = _parse_drafters(args.speculative)  # and so does a bad drafter list
    prompt = _read_text("-") if args.prompt == "-" else args.prompt
    watermark = None
    if args.watermark_key_file:
        from guided.watermark import load_key

        key = load_key(args.watermark_key_file)  # a bad key file fails before the model loads
    model, tokenizer = _load(args.model, args.threads)
    t = time.perf_counter()
    if spec is not None:  # compiled here under the time limit; generate then finds it cached
        from .compiler import compile as compile_spec

        compile_spec(spec, tokenizer, timeout=args.compile_timeout)
    compile_s = time.perf_counter() - t
    if args.watermark_key_file:
        watermark = _watermark_processor(spec, tokenizer, key, args.watermark_spelling)
    _log("generating…")
    result = generate(
        model,
        tokenizer,
        prompt,
        spec,
        max_new_tokens=args.max_tokens,
        budget_aware=False if args.no_budget else None,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        chat=not args.no_chat,
        system=_system(args, spec),
        watermark=watermark,
        speculative=_drafters(drafter_names, model, tokenizer),
        num_draft_tokens=args.num_draft_tokens,
    )
    s = result.stats
    _log(
        f"{s.new_tokens} tokens in {s.total_s:.2f} s ({s.tokens_per_s:.1f} tok/s; "
        f"compile {1e3 * compile_s:.1f} ms; mask {s.mask_us_per_token:.0f} us/token; "
        f"finish: {result.finish_reason})"
    )
    if drafter_names is not None:
        _log(f"speculative: {s.target_forward_passes} model passes, {s.accepted_draft_tokens} of "
             f"{s.draft_tokens} drafted tokens kept")
    if args.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False, default=_jsonable))
    else:
        print(result.text)
    if result.finish_reason == "no_match":
        print("error: the output does not match the spec: it reached a point where no token of the "
              "vocabulary continues it", file=sys.stderr)
        return 1
    return 0


def _system(args, spec):
    """The system message: ``--system``, with the tools rendered after it for ``--tools``."""
    from .thinking import AfterThinking
    from .tool_calls import ToolCalls

    inner = spec.spec if isinstance(spec, AfterThinking) else spec
    if not isinstance(inner, ToolCalls):
        return args.system
    return inner.system_prompt() if args.system is None else f"{args.system}\n\n{inner.system_prompt()}"


_DRAFTERS = ("forced", "lookup", "early-exit")


def _parse_drafters(text):
    """``--speculative``: None, "auto", or [(name, layers or None), ...]."""
    if text is None or text == "auto":
        return text
    out = []
    for item in text.split(","):
        name, _, layers = item.strip().partition(":")
        if name not in _DRAFTERS or (layers and (name != "early-exit" or not layers.isdigit())):
            raise SystemExit(f"--speculative: unknown drafter {item.strip()!r} (use auto, or a comma list of "
                             f"forced, lookup, early-exit[:LAYERS])")
        out.append((name, int(layers) if layers else None))
    return out


def _drafters(names, model, tokenizer):
    from guided.decoding.speculative import EarlyExit, ForcedTokens, PromptLookup

    if names is None or names == "auto":
        return names
    make = {"forced": lambda _: ForcedTokens(tokenizer), "lookup": lambda _: PromptLookup(),
            "early-exit": lambda layers: EarlyExit(model, layers)}
    return [make[name](layers) for name, layers in names]


def _watermark_processor(spec, tokenizer, key, spelling: str | None = None):
    """Watermark among the spec's allowed tokens (detect with the same --schema)."""
    from guided.watermark import WatermarkLogitsProcessor

    from .compiler import compile as compile_spec

    guide = compile_spec(spec, tokenizer) if spec is not None else None
    return WatermarkLogitsProcessor(len(tokenizer), key, guide=guide, spelling=spelling if guide else None)


DEMO_TASKS = [
    ("Give me a US phone number for a pizza place.", r"\(\d{3}\) \d{3}-\d{4}"),
    ("When did Apollo 11 land on the moon? Answer with the date.",
     r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"),
    ("Is the sky blue on a clear day? Answer yes or no.", r"(yes|no)"),
    ("Write an email address for Ada Lovelace.", r"[a-z]+(\.[a-z]+)?@[a-z]+\.(com|org|net)"),
    ("Give a JSON object with a person's name and age.", r'\{"name": "[A-Z][a-z]{1,15}", "age": [1-9][0-9]?\}'),
]


def _cmd_demo(args) -> int:
    import re

    from guided.decoding.generation import generate

    from .specs import Regex

    model, tokenizer = _load(None, args.threads)
    for prompt, pattern in DEMO_TASKS:
        unconstrained = generate(model, tokenizer, prompt, None, max_new_tokens=24)
        result = generate(model, tokenizer, prompt, Regex(pattern), max_new_tokens=64)
        ok = re.fullmatch(pattern, result.text) is not None
        s, u = result.stats, unconstrained.stats
        print(f"prompt : {prompt}")
        print(f"regex  : {pattern}")
        print(f"free   : {unconstrained.text!r}")
        print(f"guided : {result.text!r}  (matches: {ok})")
        print(
            f"timing : {s.new_tokens} tokens, {1e3 * s.total_s:.0f} ms, {s.tokens_per_s:.1f} tok/s "
            f"(unconstrained {u.tokens_per_s:.1f} tok/s); compile {1e3 * s.compile_s:.1f} ms; "
            f"mask {s.mask_us_per_token:.0f} us/token\n"
        )
    return 0


def _jsonable(value):
    if hasattr(value, "model_dump"):  # a pydantic instance in .value
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    warnings.formatwarning = lambda message, *rest, **kw: f"warning: {message}\n"
    try:
        return args.func(args)
    except (ValueError, OSError) as e:  # bad specs, files, keys: a clear message, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
