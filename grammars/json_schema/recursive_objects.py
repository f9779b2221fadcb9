"""Objects with keys in any order inside recursive schemas: one grammar nonterminal per
set of keys written, each given its rules when the parser first reaches it.

In a regular schema, an any-order object (``containers.key_order``) is a graph of NFA
nodes, one per set of written keys, each built when decoding reaches it. A recursive
schema's rules (``recursive``) are NFAs with *calls*, and the calls are fixed
when the grammar is made, so a node whose values make calls cannot wait, and building
all 2^n nodes is out of reach. Here the nodes are lazy nonterminals of the Earley
parser (``earley.LazyRules``), and each key/value pair is a rule of its own::

    caller's rule:  "{" Node(∅,0)
    Node(∅,0) -> Empty                          if the object may be empty
               | Open Pair_i Node({i},1)        for each key i
               | Open Extra Node(∅,1)           extra keys, where allowed
    Node(S,c) -> Close                          once S holds every required key (and c
               | Sep Pair_i Node(S+{i},c+1)     reaches minProperties), i not in S
               | Sep Extra Node(S,c+1)
    Pair_i:  "key_i" : value_i    Extra: any other allowed key and its value
    Open, Empty, Close, Sep: the whitespace sites with "}" or ","

As in ``containers.key_order``, c counts keys only up to what ``minProperties`` /
``maxProperties`` need, and only nodes from which the object can still be finished
are made: here a key counts as writable only if its pair rule can end (a required
key whose value recurses forever makes the object impossible).

Cost notes: compiling builds each value once, in its pair rule, as schema order
does. A node costs one rule per key it may write next, made when an Earley set first
predicts it: one node per key written, for each object shape decoded.
"""

from __future__ import annotations

import json

from guided.errors import UnsatisfiableSchemaError
from guided.grammars.earley import LazyRules
from guided.grammars.json_schema.containers.key_order import ObjectShape


class ObjectFamily:
    """One any-order object of a recursive schema: its rules (compiled now, through
    ``rules.new_rule(label, build) -> rule name`` and ``rules.pair_rule(compiler, key,
    sub, ptr, depth)``, which shares a key and value's rule between objects) and the
    counts that decide its nodes. Optional keys with no possible value are left out.

    Args:
        compiler: the ``SchemaCompiler`` (its values are compiled through it).
        shape: the object's ``containers.key_order.ObjectShape``.
        path: the object's place in the schema, for rule names and errors.
        depth: its nesting depth (whitespace sites depend on it).
        rules: makes the rules (``new_rule``, ``pair_rule``).

    Raises:
        UnsatisfiableSchemaError: a required key can have no value (from the
            values), or ``minProperties`` exceeds the keys allowed.
    """

    def __init__(self, compiler, shape: ObjectShape, path: str, depth: int, rules):
        ws = compiler.ws
        new_rule = rules.new_rule
        self.shape = shape
        self.pairs: list[str | None] = []  # rule names (then ids), None: no value possible
        for name, sub, req, ptr in shape.entries:
            key = json.dumps(name, ensure_ascii=False).encode("utf-8")
            try:
                self.pairs.append(rules.pair_rule(compiler, key, sub, ptr, depth))
            except UnsatisfiableSchemaError:
                if req:
                    raise
                self.pairs.append(None)
        self.extra = None
        if shape.extras is not None:
            try:
                self.extra = new_rule(f"{path} (other keys)", lambda n: shape.extras(into=n))
            except UnsatisfiableSchemaError:
                pass  # no extra key can have a valid value: the object has none
        if not shape.can_finish(frozenset(), 0, self._usable(None), self.extra is not None):
            raise UnsatisfiableSchemaError("minProperties exceeds the number of allowed keys", path)
        self.open = new_rule(f"{path} (open)", lambda n: ws.site(n, "open", depth))
        self.empty = new_rule(f"{path} (empty)", lambda n: n.concat([ws.site(n, "empty", depth), n.byte_string(b"}")]))
        self.close = new_rule(f"{path} (close)", lambda n: n.concat([ws.site(n, "close", depth), n.byte_string(b"}")]))
        self.sep = new_rule(f"{path} (comma)", lambda n: n.concat([n.byte_string(b","), ws.site(n, "comma", depth)]))

    def resolve(self, symbol) -> None:
        """Rule names become the grammar's symbol ids (``symbol(name)``)."""
        self.pairs = [None if p is None else symbol(p) for p in self.pairs]
        self.extra = None if self.extra is None else symbol(self.extra)
        self.open, self.empty, self.close, self.sep = map(symbol, (self.open, self.empty, self.close, self.sep))

    def symbols(self) -> list[int]:
        return [p for p in self.pairs if p is not None] + [x for x in (self.extra, self.open, self.empty,
                                                                      self.close, self.sep) if x is not None]

    def _usable(self, good) -> frozenset[int]:
        return frozenset(i for i, p in enumerate(self.pairs) if p is not None and (good is None or p in good))


class ObjectNodes(LazyRules):
    """The nodes of every any-order object of a grammar, as lazy nonterminals
    numbered from ``first_id``; ``roots`` maps each object's first node's id (named by
    its caller's rule) to its ``ObjectFamily``.

    Args:
        roots: each object's first node's id -> its ``ObjectFamily``.
        first_id: the first id the nodes take."""

    def __init__(self, roots: dict[int, ObjectFamily], first_id: int):
        self._node_of: dict[int, tuple[ObjectFamily, frozenset, int]] = {}
        self._ids: dict[tuple[int, frozenset, int], int] = {}
        for sym, family in roots.items():
            self._node_of[sym] = (family, frozenset(), 0)
            self._ids[(id(family), frozenset(), 0)] = sym
        self._roots = list(roots)
        self._next = first_id
        self._good: frozenset[int] | None = None
        self.made = 0  # nodes given their rules so far

    def owns(self, sym: int) -> bool:
        return sym in self._node_of

    def roots(self):
        return self._roots

    def uses(self, sym: int):
        return self._node_of[sym][0].symbols()

    def productive(self, sym: int, good) -> bool:
        family, written, c = self._node_of[sym]
        return family.shape.can_finish(written, c, family._usable(good),
                                       family.extra is not None and family.extra in good)

    def keep(self, good) -> None:
        self._good = good

    def rules(self, sym: int) -> list[tuple[int, ...]]:
        if self._good is None:
            raise AssertionError("lazy object rules asked for before the grammar was trimmed")
        self.made += 1
        family, written, c = self._node_of[sym]
        shape = family.shape
        usable = family._usable(self._good)
        extras = family.extra is not None and family.extra in self._good
        out = []
        if c == 0:  # the first node: nothing written yet
            if not shape.required and shape.lo == 0:
                out.append((family.empty,))
            lead = family.open
        else:
            if shape.can_close(written, c):
                out.append((family.close,))
            lead = family.sep
        nxt = shape.count_after(c)
        if nxt is not None:
            for i in sorted(usable - written):
                if shape.can_finish(written | {i}, nxt, usable, extras):
                    out.append((lead, family.pairs[i], self._node(family, written | {i}, nxt)))
            if extras and shape.can_finish(written, nxt, usable, extras):
                out.append((lead, family.extra, self._node(family, written, nxt)))
        return out

    def _node(self, family: ObjectFamily, written: frozenset, c: int) -> int:
        key = (id(family), written, c)
        sym = self._ids.get(key)
        if sym is None:
            sym = self._ids[key] = self._next
            self._next += 1
            self._node_of[sym] = (family, written, c)
        return sym
