"""``grammars.lark_reader`` reads lark grammars exactly as lark's own loader and
compile do: same terminals (names, patterns, priorities, order), same rules (origin,
symbols, alias, order), same ignored names; and it leaves every grammar lark
refuses to lark."""

import random

import pytest

import guided

lark = pytest.importorskip("lark")

from guided.grammars.lark_frontend import _expanded_alternatives, _load
from guided.grammars.lark_reader import read_lark

_WORDS = ["select", "from", "if", "x", "(", ")", ",", "+", "*", "-", "==", "=>", "a", "b", "\\n", " ", "Ab",
          "é", '\\"', "end", "_", "中"]
_REGEXPS = ["/[0-9]+/", "/[a-z_]\\w*/", "/\\s+/", "/x|yy/", "/\\d+(\\.\\d+)?/i", "/[^\\n]+/s", "/a/", "/\\//"]
_COMMON = ["WS", "INT", "NUMBER", "CNAME", "ESCAPED_STRING", "SIGNED_NUMBER", "LETTER", "WORD", "NEWLINE",
           "HEXDIGIT", "WS_INLINE", "DIGIT", "_EXP", "C_COMMENT"]


def random_grammar(rng: random.Random) -> str:
    """A lark grammar drawing on every construct the reader reads: rule modifiers and
    priorities, aliases, groups, ``[..]``, ``? * + ~``, string (``i``) and regexp
    literals, ranges, terminal references and priorities, templates (nested, with
    literal arguments), ``%ignore`` and ``%import common``; some are refused by lark
    (a duplicate alternative, an alias on a ``_`` rule, an undefined name), as
    users' grammars sometimes are."""
    rules = ["start"] + [rng.choice(["", "_"]) + f"r{i}" for i in range(1, rng.randint(1, 5))]
    # templates: name -> parameters; a template's body may use its parameters and
    # the templates defined before it
    templates = {rng.choice(["", "_"]) + f"t{i}": ["p", "q"][:rng.randint(1, 2)] for i in range(rng.choice([0, 0, 1, 2]))}
    scope = {"params": [], "templates": []}
    terms = [rng.choice(["", "_"]) + f"T{i}" for i in range(rng.randint(0, 4))]
    imported, import_lines = [], []
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        name = rng.choice(_COMMON)
        if rng.random() < 0.3:
            import_lines.append(f"%import common.{name} -> IM{name.strip('_')}")
            imported.append(f"IM{name.strip('_')}")
        elif rng.random() < 0.3:
            pair = rng.sample(_COMMON, 2)
            import_lines.append(f"%import common ({pair[0]}, {pair[1]})")
            imported += pair
        else:
            import_lines.append(f"%import common.{name}")
            imported.append(name)
    defined_terms = [0]  # a terminal refers to earlier terminals only (no recursion)

    def atom(depth, in_term):
        c = rng.random()
        if c < 0.3:
            return f'"{rng.choice(_WORDS)}"' + ("i" if rng.random() < 0.1 else "")
        if c < 0.4:
            return rng.choice(_REGEXPS)
        if c < 0.45:
            return '"a".."f"'
        pool = terms[:defined_terms[0]] + imported if in_term else terms + imported
        if c < 0.6 and pool:
            return rng.choice(pool)
        if c < 0.75 and not in_term:
            return rng.choice(rules + scope["params"])
        if c < 0.82 and not in_term and scope["templates"]:
            name = rng.choice(scope["templates"])
            args = [rng.choice([rng.choice(rules), f'"{rng.choice(_WORDS)}"', rng.choice(terms + imported or ['"z"']),
                                *scope["params"]]) for _ in templates[name]]
            return f"{name}{{{', '.join(args)}}}"
        if depth < 2:
            inner = alternatives(depth + 1, in_term, alias=False)
            return f"({inner})" if rng.random() < 0.6 else f"[{inner}]"
        return f'"{rng.choice(_WORDS)}"'

    def expr(depth, in_term):
        a, c = atom(depth, in_term), rng.random()
        for limit, suffix in ((0.12, "?"), (0.24, "*"), (0.36, "+")):
            if c < limit:
                return a + suffix
        if c < 0.40:
            return a + f" ~ {rng.randint(0, 3)}"
        if c < 0.44:
            return a + f" ~ {rng.randint(0, 2)}..{rng.randint(2, 4)}"
        return a

    def alternatives(depth, in_term, alias):
        out = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            n = rng.choice([1, 1, 2, 3]) if in_term else rng.choice([0, 1, 1, 2, 2, 3])
            seq = " ".join(expr(depth, in_term) for _ in range(n))
            if alias and rng.random() < 0.2:
                seq += f" -> al{rng.randint(0, 2)}"
            out.append(seq)
        return rng.choice([" | ", "\n    | "]).join(out)

    lines = []
    for name, params in templates.items():
        scope["params"], before = params, scope["templates"]
        lines.append(f"{name}{{{', '.join(params)}}}: {alternatives(0, False, not name.startswith('_'))}")
        scope["params"], scope["templates"] = [], before + [name]
    for r in rules:
        modifier = rng.choice(["", "", "", "?", "!"]) if not r.startswith("_") else rng.choice(["", "!"])
        priority = f".{rng.randint(-1, 3)}" if rng.random() < 0.1 else ""
        alias = not r.startswith("_") or rng.random() < 0.05
        lines.append(f"{modifier}{r}{priority}: {alternatives(0, False, alias)}")
        if rng.random() < 0.2:
            lines.append(rng.choice(["// a comment", "# a comment", "   // indented"]))
    for i, t in enumerate(terms):
        defined_terms[0] = i
        priority = f".{rng.randint(-1, 3)}" if rng.random() < 0.2 else ""
        lines.append(f"{t}{priority}: {alternatives(1, True, False)}")
    lines += import_lines
    if rng.random() < 0.3 and terms + imported:
        lines.append(f"%ignore {rng.choice(terms + imported)}")
    if rng.random() < 0.2:
        lines.append('%ignore " "')
    if rng.random() < 0.02:
        lines.append('start: "twice"')
    if rng.random() < 0.3:
        rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def lark_parts(grammar, start: str = "start"):
    """lark's compile of its loaded ``grammar``, or the exception it raises."""
    try:
        return grammar.compile([start], set())
    except Exception as e:  # noqa: BLE001 - the reference refuses it
        return e


def lark_compile(text: str, start: str = "start"):
    return _load(text).compile([start], set())


def as_compared(parts):
    terminals, rules, ignore = parts
    return ([(t.name, t.pattern, t.priority) for t in terminals],
            [(r.origin, r.expansion, r.alias) for r in rules], list(ignore))


def test_reader_compiles_random_grammars_as_lark_does():
    rng = random.Random(20261207)
    outcomes = {"same": 0, "refused": 0}
    for _ in range(300):
        text = random_grammar(rng)
        try:
            grammar = _load(text)
        except Exception as e:  # noqa: BLE001 - the reference refuses it
            grammar, expected = None, e
        if grammar is not None:
            if _expanded_alternatives(grammar.rule_defs, 300)[0] > 300:
                continue  # (lark's compile would take seconds)
            expected = lark_parts(grammar)
        ours = read_lark(text)
        if isinstance(expected, Exception):
            assert ours is None, (text, expected)
            outcomes["refused"] += 1
        else:
            assert ours is not None, text
            assert as_compared(ours) == as_compared(expected), text
            outcomes["same"] += 1
    # Both kinds are exercised, the accepted ones most.
    assert outcomes["same"] > 150 and outcomes["refused"] > 40, outcomes


def test_reader_reads_the_shipped_grammars_itself():
    for name in guided.Grammar.names():
        text = guided.Grammar.from_name(name).lark_text
        ours = read_lark(text)
        assert ours is not None, name
        assert as_compared(ours) == as_compared(lark_compile(text)), name


@pytest.mark.parametrize("text", [
    # names for literals: a defined terminal's, punctuation's, an upper-cased word's
    'start: "(" NAME ")" "select" "é" "中" | LPAR\nLPAR: "("\nNAME: /[a-z]+/\n',
    # one helper rule for equal sub-expressions, across rules
    'start: ("," x)* y\ny: ("," x)+ x*\nx: "x"\n',
    # [..] against ?, empty alternatives, nested groups, repeats
    'start: [a] b? (a | b ~ 2..3) | | (c [d]) ~ 2\na: "a"\nb: "b"\nc: "c"\nd: "d"\n',
    # aliases, rule modifiers, priorities, keep-all-tokens
    '?start: a -> one | "b" b -> two\n!a.2: "a" [","]\nb: "b"\n',
    # terminals: references, ranges, flags, priorities, %ignore of an expression
    'start: W+\nW.2: L (L | D)*\nL: "a".."z" | "A".."Z"\nD: /[0-9]/i\n%ignore /[ \\t]+/\n%ignore "#"\n',
    # common.lark: single, aliased and listed imports, the helper terminals they use
    ('start: NUMBER | ESCAPED_STRING | N2 | CNAME\n%import common.NUMBER\n%import common.ESCAPED_STRING\n'
     '%import common.SIGNED_NUMBER -> N2\n%import common (CNAME, WS)\n%ignore WS\n'),
    # comments and continuation lines
    'start: a // a comment\n    | b # another\n\n    | "c"\na: "a"\nb: "b"\n',
    # templates: literal and rule arguments, nested uses, one instance per distinct use
    ('start: sep{a, ","} b | l{l{a}}\nb: sep{a, ","} | sep{b, SEMI}\na: "a"\nsep{x, s}: x (s x)* [s]\n'
     'l{x}: "[" x* "]"\nSEMI: ";"\n'),
    # CRLF line ends, tabs, a backslash continuation
    'start:\ta\r\n\t| b \\\n "c"\r\na: "a"\r\nb: "b"\r\n',
])
def test_reader_matches_lark_on_each_construct(text):
    ours = read_lark(text)
    assert ours is not None
    assert as_compared(ours) == as_compared(lark_compile(text))


@pytest.mark.parametrize("text", [
    "start: A\n%declare A\n",
    'start: a\na: "a"\n%override a: "b"\n',
    'start: x ~ 60\nx: "x"\n',  # a long repeat: lark writes helper rules for it
    'start: ("a" -> b) "c"\n',  # an alias inside a group
])
def test_reader_leaves_other_constructs_to_lark(text):
    assert read_lark(text) is None


@pytest.mark.parametrize("text", [
    'start: "a"\nstart: "b"\n',  # defined twice
    'start: b | b\n',  # undefined rule
    'start: a [b] | a\na: "a"\nb: "b"\n',  # the same alternative twice
    '_start: "a" -> x\n',  # an alias on an inlined rule
    'start: ("x"\n',  # a syntax error
    'start: A\nA: "a" A\n',  # a recursive terminal
    'start: ""\n',  # an empty literal
])
def test_reader_leaves_every_error_to_lark(text):
    assert read_lark(text) is None
    with pytest.raises(guided.GrammarError):
        from guided.grammars.lark_frontend import compile_lark

        compile_lark(text)
