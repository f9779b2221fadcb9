"""Lark grammar text to lark's compiled parts, read without lark's loader.

::

    text ──one regex scan (lark's meta-grammar terminals, lark's order)──> tokens
         ──recursive descent over lark's meta-grammar──> definitions
    terminals: references inlined, trees folded into one pattern each
    rules:     literals to terminals (named as lark names them), template uses
               to instances, ``?`` ``*`` ``+`` ``[..]`` ``~`` to alternatives and
               helper rules, groups multiplied out, duplicates dropped, unused
               rules and terminals dropped
         ──> (lark TerminalDefs, lark Rules, ignored names)

lark's ``load_grammar`` and ``Grammar.compile`` do this with an LALR parser of the
meta-grammar and a dozen generic tree transformers: 10-15 ms for a grammar of a
hundred lines, then most of such a grammar's time to first mask. Done directly it
is a sixth of that.

The output is lark's own objects, named and ordered as lark's compile names and
orders them: anonymous terminals (``LPAR``, ``SELECT``, ``__ANON_0``) in the order
lark's bottom-up passes meet them, helper rules of ``*`` and ``+``
(``__expr_star_0``) shared between equal sub-expressions as lark's cache shares
them, duplicate alternatives dropped where lark drops them. The grammars read here
are the common subset: rules and terminals with priorities and rule modifiers,
alternatives, aliases, groups, ``[..]``, ``?``, ``*``, ``+``, ``~ n`` and
``~ n..m`` (``m`` below lark's split threshold), strings (also ``"..."i``),
regexps with flags, ranges, terminal references, templates, ``%ignore`` and
``%import common``. For anything else (other imports, ``%declare``,
``%override``, ``%extend``, long repeats, aliases inside groups) and for every
grammar with an error, ``read_lark`` returns
None and the caller runs lark's loader: its result, or its error with line and
column, is then what users get.

Cost (pure Python, no vocabulary involved): ~2 ms for the 100-line python_expr and
sql grammars, where lark's loader and compile take 13-14 ms; 0.3-0.5 ms for the
30-40-line ones (lark: 1.6-3 ms). Most of it is the token scan and the rules'
alternatives written out as lark ``Rule`` objects.
"""

from __future__ import annotations

import copy
import functools
import itertools
import pkgutil
import re

#: Alternatives past which the reader stops multiplying groups out and leaves the
#: grammar to lark's path (which refuses it with a clear error, see
#: ``lark_frontend.MAX_EXPANDED_ALTERNATIVES``).
_ALTERNATIVES_LIMIT = 5_000
#: lark writes ``x ~ n..m`` out whole below this ``m``, and as helper rules above.
_REPEAT_BREAK_THRESHOLD = 50
#: lark's meta-grammar tokens that carry no syntax.
_SKIPPED = frozenset({"WS", "COMMENT", "BACKSLASH"})
#: Tokens that can start an item of a sequence.
_ATOM_START = frozenset({"_LPAR", "_LBRA", "TERMINAL", "RULE", "STRING", "REGEXP"})

_EMPTY = object()  # lark's placeholder for an omitted ``[..]`` item (dropped from rules)


class _Unsupported(Exception):
    """Outside the subset read here, or not a valid grammar: lark's loader decides."""


class _Node:
    """A tree node compared and hashed by content, as lark's ``Tree`` is (helper
    rules are cached and alternatives deduplicated by tree equality)."""

    __slots__ = ("children", "data")

    def __init__(self, data: str, children: list):
        self.data = data
        self.children = children

    def __eq__(self, other):
        return type(other) is _Node and self.data == other.data and self.children == other.children

    def __hash__(self):
        return hash((self.data, tuple(self.children)))


class _TermRef:
    """A terminal's name inside a terminal definition (inlined when read)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


@functools.cache
def _lark():
    """lark's classes and helpers the reader builds its output with, or None where
    this lark lacks one of them (then lark's loader reads every grammar)."""
    try:
        from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal
        from lark.lexer import PatternRE, PatternStr, TerminalDef, Token
        from lark.load_grammar import _TERMINAL_NAMES, TERMINALS, _literal_to_pattern, eval_escaping
        from lark.utils import is_id_continue, is_id_start
    except ImportError:  # pragma: no cover - another lark
        return None
    # The meta-grammar's lexer tries its terminals in this order, first match wins
    # (``lark.lexer.BasicLexer``): the same alternation gives the same tokens.
    order = sorted(TERMINALS.items(), key=lambda kv: (-PatternRE(kv[1]).max_width, -len(kv[1]), kv[0]))
    scanner = re.compile("|".join(f"(?P<{name}>{value})" for name, value in order))
    return {
        "NonTerminal": NonTerminal, "Rule": Rule, "RuleOptions": RuleOptions, "Terminal": Terminal,
        "PatternRE": PatternRE, "PatternStr": PatternStr, "TerminalDef": TerminalDef, "Token": Token,
        "names": _TERMINAL_NAMES, "literal": _literal_to_pattern, "unescape": eval_escaping,
        "id_continue": is_id_continue, "id_start": is_id_start, "scanner": scanner,
    }


@functools.cache
def _common() -> _Reader:
    """lark's own ``common.lark`` (where ``%import common.X`` looks), read once."""
    return _Reader(_lark(), pkgutil.get_data("lark", "grammars/common.lark").decode())


def read_lark(text: str, start: str = "start", check_rules=None):
    """``(terminals, rules, ignored names)`` as ``lark.load_grammar``'s loader and
    ``Grammar.compile([start], set())`` produce them, or None where lark's loader
    must read ``text`` (outside the subset, or an error that lark words).

    Args:
        text: lark grammar text.
        start: the start rule (the output keeps only rules it reaches).
        check_rules: called with ``[(name, tree), ...]``, the rules as lark's parser
            shapes them (nodes with ``data`` and ``children``), before any is
            multiplied out; its exceptions propagate.

    Returns:
        A list of ``lark.lexer.TerminalDef``, a list of ``lark.grammar.Rule`` and a
        list of terminal names, or None.

    Example::

        >>> terminals, rules, ignore = read_lark('start: "(" start ")" | NUMBER\\nNUMBER: /[0-9]+/')
        >>> [t.name for t in terminals], [str(r) for r in rules]
        (['NUMBER', 'LPAR', 'RPAR'], ['<start : LPAR start RPAR>', '<start : NUMBER>'])
    """
    lk = _lark()
    if lk is None:  # pragma: no cover - another lark
        return None
    try:
        reader = _Reader(lk, text)
    except (_Unsupported, RecursionError):
        return None
    except Exception:  # noqa: BLE001 - an error in lark's literal helpers: lark's loader words it
        return None
    if check_rules is not None:
        check_rules([(name, d[3]) for name, d in reader.defs.items() if d[0] == "rule"])
    try:
        return reader.compile(start)
    except (_Unsupported, RecursionError):
        return None
    except Exception:  # noqa: BLE001 - an error in lark's pattern helpers: lark's loader words it
        return None


class _Reader:
    """One grammar: tokens, definitions, then lark's compile of them."""

    def __init__(self, lk: dict, text: str):
        self.lk = lk
        self.tokens = self._tokens(text + "\n")
        self.at = 0
        #: name -> ("rule", modifiers, priority, tree, template parameters) or
        #: ("term", priority, tree), in definition order (lark's order of terminals
        #: and rules).
        self.defs: dict[str, tuple] = {}
        self.ignore: list[str] = []
        self._read_statements()

    # -- tokens and statements -------------------------------------------------

    def _tokens(self, text: str) -> list[tuple[str, str]]:
        scan = self.lk["scanner"].scanner(text).match  # each match starts where the last ended
        out = []
        end = 0
        while (m := scan()) is not None:
            kind = m.lastgroup
            if kind not in _SKIPPED:
                out.append((kind, m.group()))
            if m.end() == end:  # (no meta-grammar token is empty; guard anyway)
                raise _Unsupported
            end = m.end()
        if end != len(text):
            raise _Unsupported
        out.append(("$END", ""))
        return out

    def _kind(self) -> str:
        return self.tokens[self.at][0]

    def _take(self, kind: str) -> str:
        k, value = self.tokens[self.at]
        if k != kind:
            raise _Unsupported
        self.at += 1
        return value

    def _read_statements(self) -> None:
        """Statements in order; as in lark, every ``%import`` is applied first."""
        statements, imports = [], {}
        while self._kind() != "$END":
            kind = self._kind()
            if kind == "_NL":
                self.at += 1
            elif kind in ("RULE_MODIFIERS", "RULE"):
                statements.append(self._read_rule())
            elif kind == "TERMINAL":
                statements.append(self._read_term())
            elif kind == "_IGNORE":
                self.at += 1
                statements.append(("%ignore", self._expansions()))
                self._take("_NL")
            elif kind == "_IMPORT":
                path, aliases = self._read_import()
                imports.setdefault(path, {}).update(aliases)
            else:  # %declare, %override, %extend, or a syntax error
                raise _Unsupported
        for path, aliases in imports.items():
            self._import(path, aliases)
        for name, definition in statements:
            if name == "%ignore":
                self._add_ignore(definition)
            elif name in self.defs or name.startswith("__"):
                raise _Unsupported
            else:
                self.defs[name] = definition

    def _read_rule(self) -> tuple[str, tuple]:
        modifiers = self._take("RULE_MODIFIERS") if self._kind() == "RULE_MODIFIERS" else ""
        name = self._take("RULE")
        params = ()
        if self._kind() == "_LBRACE":  # a template: name{param, ...}
            self.at += 1
            params = tuple(self._listed(lambda: self._take("RULE"), "_RBRACE"))
        priority, tree = self._definition(None)
        if "?" in modifiers and name.startswith("_"):
            raise _Unsupported
        return name, ("rule", modifiers, priority, tree, params)

    def _read_term(self) -> tuple[str, tuple]:
        name = self._take("TERMINAL")
        priority, tree = self._definition(0)
        return name, ("term", priority, tree)

    def _definition(self, priority):
        """``[.N] : expansions NL`` after a definition's name: its priority (else
        ``priority``) and tree."""
        if self._kind() == "_DOT":
            self.at += 1
            priority = int(self._take("NUMBER"))
        self._take("_COLON")
        tree = self._expansions()
        self._take("_NL")
        return priority, tree

    def _listed(self, read, close: str) -> list:
        """Items ``read`` reads, separated by commas, up to the token ``close`` (the
        opening one already taken)."""
        items = [read()]
        while self._kind() == "_COMMA":
            self.at += 1
            items.append(read())
        self._take(close)
        return items

    def _name(self) -> str:
        kind, value = self.tokens[self.at]
        if kind not in ("RULE", "TERMINAL"):
            raise _Unsupported
        self.at += 1
        return value

    def _read_import(self) -> tuple[tuple, dict]:
        """``%import a.b.NAME [-> ALIAS]`` or ``%import a.b (NAME, ...)``: the
        grammar's dotted path and ``{name: alias}``."""
        self.at += 1
        if self._kind() == "_DOT":  # relative to the grammar's file
            raise _Unsupported
        path = [self._name()]
        while self._kind() == "_DOT":
            self.at += 1
            path.append(self._name())
        if self._kind() == "_LPAR":
            self.at += 1
            names = self._listed(self._name, "_RPAR")
            self._take("_NL")
            return tuple(path), {n: n for n in names}
        alias = path[-1]
        if self._kind() == "_TO":
            self.at += 1
            alias = self._name()
        self._take("_NL")
        if len(path) < 2:
            raise _Unsupported
        return tuple(path[:-1]), {path[-1]: alias}

    def _import(self, path: tuple, aliases: dict) -> None:
        """Terminals from lark's ``common.lark``, in its order, under their aliases,
        as folded patterns (what lark's import keeps of them)."""
        if path != ("common",):
            raise _Unsupported
        common = _common()
        if any(name not in common.defs for name in aliases):
            raise _Unsupported
        for name, d in common.defs.items():
            alias = aliases.get(name)
            if alias is None:
                continue
            if d[0] != "term" or alias in self.defs or alias.startswith("__") or not alias.lstrip("_")[:1].isupper():
                raise _Unsupported
            self.defs[alias] = ("term", d[1], common._pattern(name))

    def _add_ignore(self, tree: _Node) -> None:
        # ``%ignore NAME`` names a terminal; anything else is a terminal of its own.
        if len(tree.children) == 1 and tree.children[0].data == "expansion":
            items = tree.children[0].children
            if len(items) == 1 and type(items[0]) is _TermRef:
                self.ignore.append(items[0].name)
                return
        name = f"__IGNORE_{len(self.ignore)}"
        self.ignore.append(name)
        self.defs[name] = ("term", 0, tree)

    # -- expressions: the shapes of lark's parse tree ----------------------------

    def _expansions(self) -> _Node:
        alternatives = [self._alias()]
        while self._kind() in ("_OR", "_NL_OR"):
            self.at += 1
            alternatives.append(self._alias())
        return _Node("expansions", alternatives)

    def _alias(self) -> _Node:
        sequence = _Node("expansion", [])
        while self._kind() in _ATOM_START:
            sequence.children.append(self._expr())
        if self._kind() == "_TO":
            self.at += 1
            return _Node("alias", [sequence, self._take("RULE")])
        return sequence

    def _expr(self):
        atom = self._atom()
        kind = self._kind()
        if kind == "OP":
            return _Node("expr", [atom, self._take("OP")])
        if kind == "TILDE":
            self.at += 1
            counts = [int(self._take("NUMBER"))]
            if self._kind() == "_DOTDOT":
                self.at += 1
                counts.append(int(self._take("NUMBER")))
            if min(counts) < 0 or counts[-1] < counts[0]:
                raise _Unsupported
            return _Node("expr", [atom, "~", *counts])
        return atom

    def _atom(self):
        kind, value = self.tokens[self.at]
        self.at += 1
        if kind == "_LPAR":
            inner = self._expansions()
            self._take("_RPAR")
            return inner
        if kind == "_LBRA":
            inner = self._expansions()
            self._take("_RBRA")
            return _Node("maybe", [inner])
        if kind == "TERMINAL":
            return _TermRef(value)
        if kind == "RULE":
            if self._kind() == "_LBRACE":  # a template's use: name{value, ...}
                self.at += 1
                return _Node("template_usage", [value, *self._listed(self._value, "_RBRACE")])
            return self.lk["NonTerminal"](value)
        if kind == "STRING" and self._kind() == "_DOTDOT":
            self.at += 1
            return self._range(value, self._take("STRING"))
        return self._literal(kind, value)

    def _value(self):
        """A template argument: a name, a literal, a range or a template's use."""
        if self._kind() not in ("TERMINAL", "RULE", "STRING", "REGEXP"):
            raise _Unsupported
        return self._atom()

    def _literal(self, kind: str, value: str):
        """A string or regexp literal's pattern, as lark's ``_literal_to_pattern``
        makes it; its escapes, and its errors, are left to that function."""
        if kind not in ("STRING", "REGEXP"):
            raise _Unsupported
        flags_at = value.rfind('"' if kind == "STRING" else "/") + 1
        inner = value[1:flags_at - 1]
        if not inner or "\\" in inner or "\n" in value:
            return self.lk["literal"](self.lk["Token"](kind, value))
        pattern = self.lk["PatternStr" if kind == "STRING" else "PatternRE"]
        return pattern(inner, value[flags_at:], raw=value)

    def _range(self, first: str, last: str):
        if not (first.endswith('"') and last.endswith('"')):  # ("a"i.."z": lark's own message)
            raise _Unsupported
        first, last = first[1:-1], last[1:-1]
        if len(self.lk["unescape"](first)) != 1 or len(self.lk["unescape"](last)) != 1:
            raise _Unsupported
        return self.lk["PatternRE"](f"[{first}-{last}]")

    # -- compile -----------------------------------------------------------------

    def compile(self, start: str):
        lk = self.lk
        self._check_names()
        terminals = [lk["TerminalDef"](name, self._pattern(name), d[1])
                     for name, d in self.defs.items() if d[0] == "term"]
        anon = _AnonTerminals(lk, terminals)
        ebnf = _HelperRules(lk)
        templates = _Templates(lk, self.defs)
        # The rules in definition order (templates left out), then the templates'
        # instances in the order their uses are met (instances may use others).
        queue = [(name, d[1], d[2], d[3], None) for name, d in self.defs.items() if d[0] == "rule" and not d[4]]
        rules = []
        while queue:
            name, modifiers, priority, tree, template = queue.pop(0)
            keep_all = "!" in modifiers
            options = lk["RuleOptions"](keep_all, "?" in modifiers, priority=priority, template_source=template)
            helper_options = lk["RuleOptions"](keep_all_tokens=True) if keep_all else None
            anon.keep_all = ebnf.keep_all = keep_all
            ebnf.prefix, ebnf.options = name, helper_options
            _rewrite_bottom_up(tree, anon, ebnf, templates)
            rules.append((name, tree, options))
            queue += templates.made
            templates.made = []
        rules += ebnf.rules
        compiled = self._rules(rules)
        compiled = _reachable(compiled, lk["NonTerminal"](start))
        used = {s.name for r in compiled for s in r.expansion if s.is_term}
        kept = [t for t in terminals if t.name in used or t.name in self.ignore]
        return kept, compiled, self.ignore

    def _check_names(self) -> None:
        """lark's builder checks: every name used is defined (a template's
        parameters inside it), a template is used with its number of arguments,
        rules stay out of terminals, ignored names are terminals."""
        defs = self.defs
        for d in defs.values():
            params = d[4] if d[0] == "rule" else ()
            if len(set(params)) != len(params) or any(p in defs for p in params):
                raise _Unsupported
            for node in _nodes(d[3] if d[0] == "rule" else d[2]):
                if node.data == "template_usage":
                    used = defs.get(node.children[0])
                    if d[0] == "term" or used is None or used[0] != "rule" \
                            or len(used[4]) != len(node.children) - 1:
                        raise _Unsupported
                for leaf in node.children:
                    if type(leaf) is _TermRef:
                        if defs.get(leaf.name, ("rule",))[0] != "term":
                            raise _Unsupported
                    elif hasattr(leaf, "is_term") and leaf.name not in params:  # a rule
                        used = defs.get(leaf.name)
                        if d[0] == "term" or used is None or used[0] != "rule" or used[4]:
                            raise _Unsupported
        if any(defs.get(n, ("rule",))[0] != "term" for n in self.ignore):
            raise _Unsupported

    @functools.cache  # noqa: B019 - one reader per grammar
    def _pattern(self, name: str, _seen: frozenset = frozenset()):
        """A terminal's tree folded into one pattern, as lark's
        ``TerminalTreeToPattern`` folds it (references inlined)."""
        if name in _seen:  # recursion in a terminal
            raise _Unsupported
        seen = _seen | {name}
        lk = self.lk

        def fold(node):
            if type(node) is _TermRef:
                return self._pattern(node.name, seen)
            if type(node) is not _Node:
                return node  # a pattern
            data = node.data
            if data == "expansions":
                options = [fold(c) for c in node.children]
                if len(options) == 1:
                    return options[0]
                options.sort(key=lambda p: (-p.max_width, -p.min_width, -len(p.value)))
                return lk["PatternRE"]("(?:" + "|".join(p.to_regexp() for p in options) + ")", ())
            if data == "expansion":
                items = [fold(c) for c in node.children]
                if not items:  # (an empty terminal, or one with an empty alternative)
                    raise _Unsupported
                if len(items) == 1:
                    return items[0]
                return lk["PatternRE"]("".join(p.to_regexp() for p in items), ())
            if data == "maybe":
                return _repeat(lk, fold(node.children[0]), "?")
            if data == "expr":
                inner, op = fold(node.children[0]), node.children[1]
                if op == "~":
                    counts = node.children[2:]
                    op = "{" + ",".join(str(c) for c in counts) + "}"
                return _repeat(lk, inner, op)
            raise _Unsupported  # an alias in a terminal

        return fold(self.defs[name][2])

    def _rules(self, rules: list) -> list:
        """lark's ``Rule``s of each rule's alternatives, in order; an empty
        alternative written twice is kept once, any other is lark's error."""
        lk = self.lk
        out, seen, count = [], set(), 0
        for name, tree, options in rules:
            origin = lk["NonTerminal"](name)
            alternatives = _alternatives(tree)
            count += len(alternatives)
            if count > _ALTERNATIVES_LIMIT:
                raise _Unsupported
            for order, (sequence, alias) in enumerate(alternatives):
                if alias is not None and name.startswith("_"):
                    raise _Unsupported
                expansion = [s for s in sequence if s is not _EMPTY]
                exp_options = options
                if len(expansion) != len(sequence):
                    exp_options = copy.copy(options) or lk["RuleOptions"]()
                    exp_options.empty_indices = tuple(s is _EMPTY for s in sequence)
                key = (name, tuple((s.is_term, s.name) for s in expansion))
                if key in seen:
                    if expansion:  # "Rules defined twice"
                        raise _Unsupported
                    continue
                seen.add(key)
                if exp_options is not None and exp_options.keep_all_tokens:
                    for s in expansion:
                        if s.is_term:
                            s.filter_out = False
                out.append(lk["Rule"](origin, expansion, order, alias, exp_options))
        return out


def _repeat(lk: dict, inner, op: str):
    return lk["PatternRE"](f"(?:{inner.to_regexp()}){op}", inner.flags)


def _nodes(node):
    if type(node) is _Node:
        yield node
        for c in node.children:
            yield from _nodes(c)


def _bottom_up(root: _Node) -> list[_Node]:
    """Nodes in the order lark's in-place transformers visit them
    (``Tree.iter_subtrees``: breadth first over reversed children, reversed)."""
    queue = [root]
    for node in queue:
        queue.extend(c for c in reversed(node.children) if type(c) is _Node)
    queue.reverse()
    return queue


def _rewrite_bottom_up(root: _Node, anon: _AnonTerminals, ebnf: _HelperRules, templates: _Templates) -> None:
    """lark's passes over one rule (rewritten in place): each literal becomes a terminal
    (``PrepareAnonTerminals``), each template's use the rule of its instance
    (``ApplyTemplates``) and each ``?``, ``*``, ``+``, ``~`` and ``[..]`` a group or
    a helper rule (``EBNF_to_BNF``), in the order lark meets them."""
    terminal = anon.lk["Terminal"]
    for node in _bottom_up(root):
        children = node.children
        for i, c in enumerate(children):
            kind = type(c)
            if kind is _Node:
                if c.data == "expr":
                    children[i] = ebnf.expr(c.children[0], c.children[1], c.children[2:])
                elif c.data == "maybe":
                    children[i] = ebnf.maybe(c.children[0])
                elif c.data == "template_usage":
                    children[i] = templates.instance(c)
            elif kind is _TermRef:  # (lark drops a ``_``-named terminal from its parse trees)
                children[i] = terminal(c.name, filter_out=c.name.startswith("_"))
            elif hasattr(c, "to_regexp"):
                children[i] = anon.terminal(c)


class _AnonTerminals:
    """Names for the literals inside rules, as lark's ``PrepareAnonTerminals`` gives
    them: a defined terminal with the same pattern, else a punctuation name
    (``LPAR``), else the word upper-cased (``SELECT``), else ``__ANON_n``."""

    def __init__(self, lk: dict, terminals: list):
        self.lk = lk
        self.terminals = terminals  # grows with the new terminals
        self.names = {t.name for t in terminals}
        self.by_pattern = {t.pattern: t for t in terminals}
        self.i = 0
        self.keep_all = False

    def terminal(self, p):
        lk = self.lk
        is_str = isinstance(p, lk["PatternStr"])
        name = None
        known = self.by_pattern.get(p)
        if known is not None:
            name = known.name
        elif is_str:
            value = p.value
            name = lk["names"].get(value)
            if name is None and value and lk["id_continue"](value) and lk["id_start"](value[0]) \
                    and value.upper() not in self.names:
                name = value.upper()
            if name in self.names:
                name = None
        if name is None:
            name = f"__ANON_{self.i}"
            self.i += 1
        if name not in self.names:
            self.names.add(name)
            definition = lk["TerminalDef"](name, p)
            self.by_pattern[p] = definition
            self.terminals.append(definition)
        return lk["Terminal"](name, filter_out=False if self.keep_all else is_str)


class _Templates:
    """lark's ``ApplyTemplates``: each distinct use ``t{a, b}`` of a template (its
    arguments already symbols) becomes a rule named ``t{a,b}``, the template's tree
    with the arguments in place of its parameters, compiled after every rule
    written in the grammar (``made``: the instances not yet compiled)."""

    def __init__(self, lk: dict, defs: dict):
        self.lk = lk
        self.defs = defs
        self.created: set[str] = set()
        self.made: list = []

    def instance(self, use: _Node):
        template, args = use.children[0], use.children[1:]
        if not all(hasattr(a, "is_term") for a in args):
            raise _Unsupported
        name = template + "{" + ",".join(a.name for a in args) + "}"
        if name not in self.created:
            self.created.add(name)
            _, modifiers, priority, tree, params = self.defs[template]
            tree = _substituted(tree, dict(zip(params, args)))
            self.made.append((name, modifiers, priority, tree, template))
        return self.lk["NonTerminal"](name)


def _substituted(node, args: dict):
    """A copy of a template's tree with its parameters' rule references replaced by
    the arguments (lark's ``_ReplaceSymbols``)."""
    if type(node) is _Node:
        if node.data == "template_usage" and node.children[0] in args:  # a parameter used as a template
            raise _Unsupported
        return _Node(node.data, [_substituted(c, args) for c in node.children])
    if hasattr(node, "is_term") and not node.is_term and node.name in args:
        return args[node.name]
    return node


class _HelperRules:
    """lark's ``EBNF_to_BNF``: ``x?`` and ``[x]`` as alternatives, ``x+`` and
    ``x*`` through a helper rule ``__<rule>_plus_<n>`` (one per distinct ``x`` in the
    whole grammar), ``x ~ n..m`` written out."""

    def __init__(self, lk: dict):
        self.lk = lk
        self.rules: list = []
        self.cache: dict = {}
        self.i = 0
        self.prefix = "anon"
        self.options = None
        self.keep_all = False

    def _recurse(self, kind: str, x):
        helper = self.cache.get(x)
        if helper is None:
            name = f"__{self.prefix}_{kind}_{self.i}"
            self.i += 1
            helper = self.lk["NonTerminal"](name)
            tree = _Node("expansions", [_Node("expansion", [x]), _Node("expansion", [helper, x])])
            self.rules.append((name, tree, self.options))
            self.cache[x] = helper
        return helper

    def expr(self, x, op: str, counts: list):
        if op == "?":
            return _Node("expansions", [x, _Node("expansion", [])])
        if op == "+":
            return self._recurse("plus", x)
        if op == "*":
            return _Node("expansions", [self._recurse("star", x), _Node("expansion", [])])
        lo, hi = counts[0], counts[-1]
        if hi >= _REPEAT_BREAK_THRESHOLD:  # lark splits it into helper rules
            raise _Unsupported
        return _Node("expansions", [_Node("expansion", [x] * n) for n in range(lo, hi + 1)])

    def maybe(self, x):
        return _Node("expansions", [x, _Node("expansion", [_EMPTY] * self._size(x))])

    def _size(self, node) -> int:
        """lark's ``FindRuleSize``: the items an alternative of ``node`` keeps in
        lark's parse tree, at most (placeholders for an omitted ``[..]``)."""
        if type(node) is _Node:
            sizes = [self._size(c) for c in node.children]
            return sum(sizes) if node.data == "expansion" else max(sizes)
        if node is _EMPTY:
            return 0
        if node.is_term:
            return int(self.keep_all or not node.filter_out)
        return int(not node.name.startswith("_"))


def _alternatives(root: _Node) -> list[tuple[tuple, str | None]]:
    """A rule's tree as its alternatives ``(symbols, alias)``, groups multiplied out
    in order and duplicates dropped (lark's ``SimplifyRule_Visitor``)."""
    memo: dict[int, list] = {}

    def alts(node) -> list[tuple]:
        got = memo.get(id(node))
        if got is not None:
            return got
        children = node.children
        if node.data == "expansions":
            if len(children) == 1 and type(children[0]) is _Node:
                out = alts(children[0])
            else:
                out = list(dict.fromkeys(a for c in children for a in (alts(c) if type(c) is _Node else ((c,),))))
        elif node.data == "alias":  # inside a group
            raise _Unsupported
        else:  # expansion: the product of its items' alternatives
            parts, size = [], 1
            for c in children:
                part = alts(c) if type(c) is _Node else ((c,),)
                size *= len(part)
                parts.append(part)
            if size > _ALTERNATIVES_LIMIT:
                raise _Unsupported
            if size == 1:
                out = [tuple(itertools.chain.from_iterable(p[0] for p in parts))]
            else:
                out = [tuple(itertools.chain.from_iterable(combo)) for combo in itertools.product(*parts)]
        memo[id(node)] = out
        return out

    out: dict = {}
    for child in root.children:
        if child.data == "alias":
            alias = child.children[1]
            for a in alts(child.children[0]):
                out.setdefault((a, alias), None)
        else:
            for a in alts(child):
                out.setdefault((a, None), None)
    return list(out)


def _reachable(rules: list, start) -> list:
    """lark's pruning: rules whose name no other rule uses (nor ``start``) go, until
    none does."""
    while True:
        used = {s for r in rules for s in r.expansion if not s.is_term and s != r.origin}
        used.add(start)
        kept = [r for r in rules if r.origin in used]
        if len(kept) == len(rules):
            return kept
        rules = kept
