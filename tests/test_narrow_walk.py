"""Rows from the narrow walk (``fsm.narrow``) equal the batched walk's and brute force,
walked in Python and compiled (``guided.fsm.compiled_walk``).

The narrow walk takes whole subtrees of the split trie where a state stays alive on
any plain text or any text characters (``TokenIndex._plain_run`` / ``_text_run``),
and the tail of the text root where every non-ASCII character leads to one state
(``_utf8_target``). Each pattern below exercises one of those shortcuts, or a state
where it must not apply.
"""

import json
import random

import numpy as np
import pytest

from guided.fsm.compiled_walk import CompiledWalk
from guided.fsm.index import TokenIndex
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.lazy import LazyDFA
from guided.fsm.nfa import NFA
from guided.fsm.regex import regex_to_nfa

PATTERNS = [
    r'"([^"\\]|\\.)*"',                          # a free string: text and plain subtrees whole
    r'"[^"\\]{0,3}"x',                           # too little room for the longest text token
    r'"[^"\\]{2,40}"',                           # counted characters, multi-byte ones count once
    r'"[^"\\é]*"',                               # one non-ASCII character excluded: no text shortcut
    r'"(ab|[^"\\a][^"\\]*)"',                    # a key trie: ASCII first letters differ, the rest do not
    r'[a-zà-ÿ ]{0,12}\.',                        # some non-ASCII characters only
    r'\{"name":"[^"\\]*","n":-?\d{1,3}\}',       # a small object
    r'"[^"\\]*10\.[0-9]+/[^"\\]*"',             # an unanchored pattern: search states loop on most bytes
    r'"[^"\\]*,[^"\\]*,[^"\\]*"',              # two commas somewhere: states count them
    r'"https?://[a-z0-9.-]+(/[a-zA-Z0-9._~-]*)*"',  # loops on host and path bytes: subtrees whole
]


@pytest.fixture(params=["python", pytest.param("compiled", marks=pytest.mark.skipif(
    not COMPILED_AVAILABLE, reason="numba is not installed"))])
def compiled(request) -> bool:
    """Each narrow-walk test runs with the Python walk and the compiled one."""
    return request.param == "compiled"


def _lazy_dfa(pattern: str, compiled_rows: bool | None = None) -> LazyDFA:
    nfa = NFA()
    start, end = regex_to_nfa(pattern, nfa)
    return LazyDFA(nfa, start, end, compiled=compiled_rows)


def _reachable(dfa, limit: int, rng: random.Random) -> list[int]:
    seen, order, frontier = {0}, [0], [0]
    while frontier and len(order) < limit:
        nxt = []
        for s in frontier:
            for t in dfa.next_states(s):
                if t >= 0 and t not in seen:
                    seen.add(t)
                    order.append(t)
                    nxt.append(t)
        rng.shuffle(nxt)
        frontier = nxt
    return order[:limit]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_narrow_rows_equal_batched_rows(smollm2_vocab, pattern, compiled, monkeypatch):
    vocab = smollm2_vocab
    dfa = _lazy_dfa(pattern)
    states = _reachable(dfa, 60, random.Random(0))
    narrow = TokenIndex(dfa, vocab, eager=False, compiled=compiled)
    walked = []
    miss = TokenIndex._narrow_miss
    monkeypatch.setattr(TokenIndex, "_narrow_miss", lambda self, state: walked.append(miss(self, state)) or walked[-1])
    narrow_rows = {s: narrow.mask(s).copy() for s in states}
    assert any(walked), "the narrow walk was never used"
    monkeypatch.setattr(TokenIndex, "_narrow_miss", lambda self, state: False)
    batched = TokenIndex(dfa, vocab, eager=False)
    for s in states:
        assert (batched.mask(s) == narrow_rows[s]).all(), (pattern, s)


def _assert_brute_force(index, vocab, s, label):
    ids = np.arange(vocab.size)
    row = index.mask(s)
    allowed = (row[ids >> 5] >> (ids & 31)) & 1
    for t, b in enumerate(vocab.token_bytes):
        want = index.dfa.step(s, b) >= 0 if b else (t in vocab.eos_token_ids and index.dfa.is_accepting(s))
        assert allowed[t] == want, (label, s, t, b)


@pytest.mark.parametrize("pattern", [PATTERNS[0], PATTERNS[2], PATTERNS[4], PATTERNS[7], PATTERNS[8], PATTERNS[9]])
def test_narrow_rows_match_brute_force(smollm2_vocab, pattern, compiled):
    vocab = smollm2_vocab
    dfa = _lazy_dfa(pattern)
    index = TokenIndex(dfa, vocab, eager=False, compiled=compiled)
    for s in _reachable(dfa, 8, random.Random(1)):
        _assert_brute_force(index, vocab, s, pattern)


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("pattern", [PATTERNS[0], PATTERNS[2], PATTERNS[3], PATTERNS[6]])
def test_compiled_walk_over_rows_built_in_python(smollm2_vocab, pattern):
    """The compiled walk builds a lazy DFA's rows itself where its construction is
    compiled; over one built in Python it asks for each row it lacks (a round
    each). Both give brute force's rows."""
    vocab = smollm2_vocab
    for compiled_rows in (True, False):
        dfa = _lazy_dfa(pattern, compiled_rows)
        index = TokenIndex(dfa, vocab, eager=False, compiled=True)
        for s in _reachable(dfa, 8, random.Random(1)):
            _assert_brute_force(index, vocab, s, (pattern, compiled_rows))
        assert index._walker is not None


def test_states_that_loop_on_a_byte_set_are_narrow(smollm2_vocab, compiled):
    """Inside a URI's host or path the state loops on its characters: subtrees made
    of them are taken whole, so the narrow walk finishes there (it gave up before,
    and a batched walk took ~5 ms) and its row matches brute force."""
    vocab = smollm2_vocab
    index = TokenIndex(_lazy_dfa(PATTERNS[9]), vocab, eager=False, compiled=compiled)
    for text in (b'"https://example', b'"http://example.org/docs/'):
        state = index.dfa.step(0, text)
        assert index._narrow_miss(state), text
        _assert_brute_force(index, vocab, state, text)


@pytest.mark.parametrize("length, written", [(260, 250), (120, 110), (120, 40), (120, 60)])
def test_room_near_the_end_of_a_long_counted_string(smollm2_vocab, compiled, length, written):
    """Near the end of a long string only tokens that fit the room left (or close
    it) are allowed, even after the room of the string's start was found (its
    chain is longer than the search follows, so rooms there are lower bounds). A
    room is never more than the true one, and never less than what the longest
    plain token needs unless the true room is smaller."""
    vocab = smollm2_vocab
    index = TokenIndex(_lazy_dfa(r'"[^"\\]{0,%d}"' % length), vocab, eager=False, compiled=compiled)
    inside = index.dfa.step(0, b'"')
    index.mask(inside)
    late = index.dfa.step(inside, b"a" * written)
    room, true_room = index._plain_run(late), length - written
    enough = index._plain_cap // 2  # one more than the longest plain token
    assert min(true_room, enough) <= room <= true_room
    if compiled:  # the compiled walk's own room (fsm.kernels.narrow), alike
        index.mask(late)
        room = index._walker.facts[late, 0]
        assert min(true_room, enough) <= room <= true_room
    _assert_brute_force(index, vocab, late, "late in the string")


def test_text_shortcut_needs_every_character(smollm2_vocab, compiled):
    """A string that excludes one non-ASCII character gets no text shortcut, and
    a token holding that character stays forbidden."""
    vocab = smollm2_vocab
    index = TokenIndex(_lazy_dfa(r'"[^"\\é]*"'), vocab, eager=False, compiled=compiled)
    inside = index.dfa.step(0, b'"')
    assert index._utf8_target(inside) == -1 and index._text_run(inside) == 0
    row = index.mask(inside)
    for t, b in enumerate(vocab.token_bytes):
        if b and "é".encode() in b and b'"' not in b:
            assert not (row[t >> 5] >> (t & 31)) & 1, b


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}}},
     "required": ["name"]},
    {"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string", "pattern": "^[a-zé ]+$"}},
     "additionalProperties": {"type": "number"}},
    # open values and extra keys: deferred fragments built in the middle of walks
    {"type": "object", "properties": {"e": {}, "n": {"type": "string", "maxLength": 30}},
     "additionalProperties": {"type": "array"}},
])
def test_narrow_rows_equal_batched_rows_json(smollm2_vocab, schema, compiled, monkeypatch):
    """The same over the lazy automata of JSON schemas (keys, open keys, counted and
    patterned strings)."""
    import guided

    vocab = smollm2_vocab
    dfa = guided.compile(guided.JsonSchema(schema, whitespace="compact"), vocab).dfa
    states = _reachable(dfa, 80, random.Random(2))
    narrow = TokenIndex(dfa, vocab, eager=False, compiled=compiled)
    narrow_rows = {s: narrow.mask(s).copy() for s in states}
    monkeypatch.setattr(TokenIndex, "_narrow_miss", lambda self, state: False)
    batched = TokenIndex(dfa, vocab, eager=False)
    for s in states:
        assert (batched.mask(s) == narrow_rows[s]).all(), s


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("pattern, written, by_length", [
    (r'"[^"\\]{32}"', 21, True), (r'"[^"\\]{32}"', 26, True), (r'"[^"\\]{32}"', 32, True),
    (r'"[^"\\]{0,40}"x', 33, True),
    # digits or letters past the room: walked as before
    (r'"[^"\\]{3}[0-9]{0,5}"', 0, False), (r'"[^"\\]{0,40}[a-z]"', 31, False),
])
def test_plain_tokens_that_fit_near_the_end_of_a_counted_string(smollm2_vocab, pattern, written, by_length):
    """With a few characters left in a counted string, the compiled walk takes the
    plain tokens that fit from one row by length (``RunTrie.plain_rows``) where no
    plain byte is taken past the room: a few checks, where walking them visits
    every prefix of the longer tokens (50k checks at 8 left). Rows match brute
    force, with the rule and where it must not apply."""
    vocab = smollm2_vocab
    index = TokenIndex(_lazy_dfa(pattern), vocab, eager=False, compiled=True)
    state = index.dfa.step(0, b'"' + b"0" * written)
    assert index._narrow_miss(state)
    _assert_brute_force(index, vocab, state, (pattern, written))
    if by_length:  # the walk fits a budget that walking the plain tokens would not
        assert index._walker.walk(index.dfa, state, budget=2_000) is not None
    if pattern == r'"[^"\\]{0,40}[a-z]"':
        assert index._walker.walk(index.dfa, state, budget=2_000) is None


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("pattern, written, fits", [
    (r'"[0-9A-Za-z]{12}"', '"', True), (r'"[0-9A-Za-z]{12}"', '"0000000', True),
    (r'"[0-9A-Za-z]{12}"', '"00000000000', True), (r'"[0-9A-Za-z]{12}"', '"000000000000', False),
    (r'"[a-f0-9]{40}"', '"000', True), (r'"x[0-9]{0,6}"', '"x0', True), (r'"[a-z]{2,30}"', '"', True),
    (r'"a{3}"', '"', True), (r'"[a-z]{0,60}"', '"ab', True),
    # longer than any token: deferred copies past the first chunk, the chain still followed
    (r'"[0-9a-zA-Z_-]{1,255}"', '"ex', True), (r'"[0-9a-zA-Z_-]{1,255}"', '"', True),
    # the set changes along the way, or its bytes lead apart: walked as before
    (r'"[0-9A-Za-z]{4}-[0-9A-Za-z]{4}"', '"', False), (r'"([a-z]{3}|ab[0-9])"', '"', False),
    (r'"apiVersion"', '"api', False), (r'"a{3}b"', '"', False), (r'"(abc|abd)"', '"ab', False),
])
def test_plain_tokens_of_one_byte_set_near_the_end_of_a_counted_run(smollm2_vocab, pattern, written, fits):
    """A state that takes the same few plain bytes, each into one next state, n
    times and then none (the end of ``[0-9A-Za-z]{12}``) allows exactly the plain
    tokens of those bytes of at most n bytes: one row of ``RunTrie.chain_rows``,
    made once the first walk met the set. Rows match brute force, with the rule and
    where it must not apply; where it applies (or the tokens are few), a second
    walk fits a budget that walking the alphanumeric tokens (28k checks at the
    start of ``{12}``) would not."""
    vocab = smollm2_vocab
    index = TokenIndex(_lazy_dfa(pattern), vocab, eager=False, compiled=True)
    state = index.dfa.step(0, written.encode())
    assert state >= 0 and index._narrow_miss(state)
    _assert_brute_force(index, vocab, state, (pattern, written))
    index._row_of_state[state] = -1  # walked again, now with the byte sets the first walk met
    assert index._narrow_miss(state)
    _assert_brute_force(index, vocab, state, (pattern, written))
    if pattern == r'"[0-9A-Za-z]{12}"' and fits:  # rows were made for the alphanumeric set
        assert index._walker.n_slots == 1
    if fits:
        again = index._walker.walk(index.dfa, state, budget=2_000)
        assert again is not None and not len(again[0]), (pattern, written)
        assert (again[2].view(np.int32) == index.mask(state) & ~index.eos_row).all()


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("pattern", [r'"[0-9a-zA-Z_-]{1,255}"', r'"[0-9A-Za-z]{12}"'])
def test_the_first_walk_that_meets_a_byte_set_waits_for_its_rows(smollm2_vocab, pattern):
    """A walk that meets a byte set it does not know sets the pair aside until
    Python has made the set's rows, and a chain that runs into copies not built yet
    asks for them: the first walk takes the row too, where walking the alphanumeric
    tokens takes ~29k checks."""
    vocab = smollm2_vocab
    index = TokenIndex(_lazy_dfa(pattern), vocab, eager=False, compiled=True)
    assert index._narrow_miss(0) and index._walker.n_slots == 0  # the walker made; no set met before the quote
    state = index.dfa.step(0, b'"ex')
    got = index._walker.walk(index.dfa, state, budget=2_000)
    assert got is not None and index._walker.n_slots == 1
    assert (got[2].view(np.int32) == index.mask(state) & ~index.eos_row).all()
    _assert_brute_force(index, vocab, state, pattern)


@pytest.mark.parametrize("chars", ["0123", "0123456789", "0123456789abcdefghijklmnopqrstuvwxyz-"])
def test_a_byte_sets_rows_are_made_only_for_enough_tokens(smollm2_vocab, chars):
    """``RunTrie.chain_rows`` counts the plain tokens of a byte set first, and makes
    no rows for fewer than ``min_count`` (the digits of a date: walking them costs
    less than the ~3 ms of rows). The count is the same either way, and the rows
    hold exactly the tokens of those bytes, by length."""
    vocab = smollm2_vocab
    runs = TokenIndex(_lazy_dfa('"x"'), vocab, eager=False)._split.byte_level
    allowed = bytes(1 if chr(b) in chars else 0 for b in range(256))
    words = (vocab.size + 31) // 32
    want = [t for t, b in enumerate(vocab.token_bytes) if b and set(b.decode("latin-1")) <= set(chars)]
    skipped, _, count = runs.chain_rows(allowed, words, min_count=1000)
    assert count == len(want) and (skipped is None) == (count < 1000)
    rows, longest, count = runs.chain_rows(allowed, words)  # no minimum now: made, though counted before
    assert count == len(want) and longest == max(len(vocab.token_bytes[t]) for t in want)
    ids = np.arange(vocab.size)
    assert np.nonzero((rows[-1][ids >> 5] >> (ids & 31)) & 1)[0].tolist() == want


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
def test_a_byte_sets_rows_compiled_equal_numpys(smollm2_vocab):
    """The compiled pass over the trie (``fsm.kernels.chains``) gives the numpy
    passes' count, longest token and rows, for sets from one byte to all of them,
    with and without a minimum count."""
    runs = TokenIndex(_lazy_dfa('"x"'), smollm2_vocab, eager=False)._split.byte_level
    words = (smollm2_vocab.size + 31) // 32
    rng = random.Random(7)
    sets = [b"-", b"0123456789", b"abcdefghijklmnopqrstuvwxyz0123456789.-", bytes(range(32, 127)), bytes(range(256))]
    sets += [bytes(rng.sample(range(256), k)) for k in (3, 20, 60, 120, 200)]
    for chars in sets:
        ok = np.zeros(257, dtype=bool)
        ok[list(chars)] = True
        for min_count in (0, 1000):
            want = runs._chain_rows_numpy(ok, words, min_count)
            got = runs._chain_rows_compiled(ok, words, min_count)
            assert got[1:] == want[1:], (chars, min_count)
            assert (got[0] is None) == (want[0] is None) and (want[0] is None or np.array_equal(got[0], want[0]))


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
def test_a_byte_sets_rows_are_made_once_per_vocabulary(smollm2_vocab, monkeypatch):
    """Two guides over one vocabulary that meet the same byte set share its rows:
    the second walker takes the first one's slot in the ``ChainBank`` (no rows made,
    none copied) and its masks are still exact."""
    from guided.fsm.trie import RunTrie

    pattern = r'"[0-9A-Za-z]{12}"'
    first = TokenIndex(_lazy_dfa(pattern), smollm2_vocab, eager=False, compiled=True)
    state = first.dfa.step(0, b'"')
    assert first._narrow_miss(state) and first._walker.n_slots == 1
    made = []
    real = RunTrie.chain_rows
    monkeypatch.setattr(RunTrie, "chain_rows", lambda self, *a: made.append(a) or real(self, *a))
    second = TokenIndex(_lazy_dfa(pattern), smollm2_vocab, eager=False, compiled=True)
    state = second.dfa.step(0, b'"')
    assert second._narrow_miss(state) and second._walker.n_slots == 1 and not made
    assert second._walker.runs.chain_bank(second._walker.words) is first._walker.runs.chain_bank(first.words)
    _assert_brute_force(second, smollm2_vocab, state, pattern)


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
def test_compiled_walk_grows_its_buffers(smollm2_vocab, monkeypatch):
    """With buffers of 8 rows a compiled walk fills them many times over (thousands
    of runs under ``[a-z]*``, hundreds of pairs on the stack): each time it grows
    them and goes on where it stopped, losing no run and no set-aside pair. Its
    facts table (4 rows) and the lazy DFA's (4 states) grow likewise."""
    from guided.fsm import compiled_walk, subset_arrays

    vocab = smollm2_vocab
    monkeypatch.setattr(CompiledWalk, "BUFFER", 8)
    monkeypatch.setattr(compiled_walk, "FACTS_ROWS", 4)
    monkeypatch.setattr(subset_arrays, "LAZY_STATES", 4)
    facts_grew = []
    for pattern in (r'[a-z]{0,3}', PATTERNS[8], PATTERNS[0]):
        index = TokenIndex(_lazy_dfa(pattern), vocab, eager=False, compiled=True)
        python = TokenIndex(_lazy_dfa(pattern), vocab, eager=False, compiled=False)
        states = _reachable(index.dfa, 6, random.Random(3))
        assert all(index._narrow_miss(s) for s in states), pattern
        for s in states:
            assert (index.mask(s) == python.mask(s)).all(), (pattern, s)
        assert len(index._walker._out) > 8
        assert len(index._walker.facts) >= index.dfa.num_states
        facts_grew.append(len(index._walker.facts) > 4)
    assert any(facts_grew)



def test_threads_share_one_index(smollm2_vocab, compiled):
    """A compiled guide is cached and may serve several threads: masks computed
    by four threads at once on one index (misses, lazy DFA growth, the compiled
    walk's buffers) equal those of an index used by one thread."""
    import threading

    from guided.grammars.json_schema.compiler import compile_json_schema

    vocab = smollm2_vocab
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 40}, "tags": {"type": "array", "items": {"type": "string"}},
        "id": {"type": "integer"}, "note": {"type": "string", "pattern": "^[a-zé ]+$"}}}
    texts = ['{"name":"Zoë Smith","tags":["a","bcdefg"],"id":-12,"note":"é a"}',
             '{"name":"' + "x" * 39 + '","id":7}', '{"tags":[],"note":"abc"}']
    prefixes = [t[:k].encode() for t in texts for k in range(len(t))]
    reference = TokenIndex(compile_json_schema(schema, "compact"), vocab, eager=False, compiled=False)
    want = {p: reference.mask(reference.dfa.step(0, p)).copy() for p in prefixes}
    shared = TokenIndex(compile_json_schema(schema, "compact"), vocab, eager=False, compiled=compiled)
    assert shared.dfa.lazy and shared.dfa is not reference.dfa
    wrong, errors = [], []

    def work(seed: int) -> None:
        order = prefixes[:]
        random.Random(seed).shuffle(order)
        try:
            for p in order:
                if not (shared.mask(shared.dfa.step(0, p)) == want[p]).all():
                    wrong.append(p)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong, (errors, wrong[:3])


def test_bank_ids_agree_with_made_rows_and_survive_a_cleared_memo(smollm2_vocab, monkeypatch):
    """``RunBank.ids`` (a walk's long runs, memoised by their bytes) names the rows
    ``RunBank.made`` does, holding exactly each run's tokens, also after the memo
    has been emptied at its limit."""
    import guided.fsm.trie as trie_module
    from guided.fsm.trie import LONG_RUN, split_vocabulary

    split = split_vocabulary(smollm2_vocab).byte_level
    words = (smollm2_vocab.size + 31) // 32
    n = len(split.order)
    lo = np.array([0, LONG_RUN, n - LONG_RUN - 7], dtype=np.int64)
    hi = lo + np.array([LONG_RUN, 3 * LONG_RUN, LONG_RUN], dtype=np.int64)
    monkeypatch.setattr(trie_module, "_BANK_ID_MEMO", 2)
    for rounds in range(3):  # the third lookup of the same runs meets a full memo
        ids, bank = split.bank.ids(lo, hi, words)
        assert ids.tolist() == split.bank.made(lo.tolist(), hi.tolist(), words)[0].tolist()
        for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
            bits = np.unpackbits(bank[ids[i]].view(np.uint8), bitorder="little")
            assert sorted(np.flatnonzero(bits).tolist()) == sorted(split.order[a:b].tolist())
        split.bank.ids(lo[:1], hi[:1], words)  # another key, so the memo fills


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
def test_walks_paste_open_values_themselves(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """Copies of open values that a compiled walk meets are pasted by the walk, in
    the round that meets them (``fsm.kernels.narrow.paste_wanted``), their NFA lists
    made later (``LazyDFA._replay_pastes``): every mask along nested extra values
    is the one a guide gets with each copy taken in through Python, and the DFA
    still accepts exactly the instance."""
    import guided
    import guided.compiler as gc
    from guided.fsm.subset_arrays import LazySubsets

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    data = {"a": 1, "x": {"y": [1, {"z": "w", "v": [[], {}]}], "q": None}, "r": [[2], {"s": True, "t": {"u": 3}}]}
    text = json.dumps(data, separators=(",", ":"))
    tokens = smollm2_tokenizer.encode(text, add_special_tokens=False)
    pastes = []
    pasted_by_walks = LazySubsets.pasted

    def counted(self):
        got = pasted_by_walks(self)
        pastes.extend(got)
        return got

    def masks():
        gc._cache.clear()
        guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
        matcher = guide.matcher()
        rows = []
        for token in tokens:
            rows.append(guide.row(matcher.state).copy())
            assert matcher.accept_token(token)
        dfa = guide.dfa
        got = rows, dfa.matches(text.encode()), dfa.matches(text[:-1].encode()), dfa.nfa_size
        dfa._fast.pasted()  # (counts the pastes the NFA has not followed yet)
        return got

    monkeypatch.setattr(LazySubsets, "pasted", counted)
    pasted = masks()
    assert len(pastes) > 5
    monkeypatch.setattr(LazySubsets, "allow_paste", lambda self, s, template, end: None)
    pastes.clear()
    taken_in = masks()
    assert len(pastes) == 0
    assert pasted[1:] == taken_in[1:] == (True, False, pasted[3])
    assert all((a == b).all() for a, b in zip(pasted[0], taken_in[0]))


def test_split_vocabulary_places_each_token_under_its_marker(smollm2_vocab):
    """Every token of the real vocabulary (plain, whole non-ASCII characters, the
    rest) ends at the node its marker and bytes spell, as a per-token check says."""
    from guided.fsm.trie import PLAIN_BYTES, PLAIN_MARK, REST_MARK, TEXT_MARK, is_text_token, split_vocabulary

    trie = split_vocabulary(smollm2_vocab).byte_level.trie
    marks = set()
    for token, data in enumerate(smollm2_vocab.token_bytes):
        if not data:
            continue
        node, path = int(trie.token_node[token]), []
        while node > 0:
            path.append(int(trie.symbol[node]))
            node = int(trie.parent[node])
        mark = PLAIN_MARK if set(data) <= set(PLAIN_BYTES) else TEXT_MARK if is_text_token(data) else REST_MARK
        assert path[::-1] == [mark, *data], (token, data)
        marks.add(mark)
    assert marks == {PLAIN_MARK, TEXT_MARK, REST_MARK}
