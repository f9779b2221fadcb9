"""JSON Schema ``format`` regexes (``guided.grammars.json_schema.scalars.formats``).

Soundness (never accept what the format checker rejects) is checked against
``jsonschema``'s draft 2020-12 format checker, with the checkers the ``test`` extra
installs: rfc3339-validator (``date-time``, ``time``), isoduration (``duration``) and
rfc3986-validator (``uri``, ``uri-reference``). ``hostname`` is checked against a copy
of fqdn's rule (jsonschema checks it only with fqdn installed). Where a checker is
missing, its format is checked only against the hand-picked lists (verified against
the real packages) and its sampled strings are skipped.
"""

from __future__ import annotations

import datetime
import ipaddress
import random
import re
import time

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import guided.fsm.regex
from guided.fsm import compile_regex
from guided.grammars.json_schema import format_dfas
from guided.grammars.json_schema.scalars.formats import FORMATS, format_regex

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
HYP = settings(derandomize=True, deadline=None, max_examples=60)

VALID = {  # all accepted by the full jsonschema checker (fqdn, rfc3987, isoduration installed)
    "date": ["2024-01-15", "1999-12-31", "2000-02-29", "2024-02-29", "0001-01-01", "9999-12-31", "2023-04-30", "1600-02-29"],
    "time": ["12:00:00Z", "23:59:59.999+05:30", "00:00:00-08:00", "08:30:00z", "10:15:30.123456Z"],
    "date-time": ["2024-01-15T10:30:00Z", "2022-01-01T12:00:00.000Z", "1980-01-23T00:00:00+09:00", "2016-10-12t09:31:58-03:00", "2011-02-24T09:25:23.112+00:00", "2020-12-31T23:59:59z"],
    "duration": ["P1D", "PT1M", "P3DT12H30M5S", "P1Y2M10DT2H30M", "P4W", "PT0.5S", "PT36H", "P1Y", "P0D"],
    "email": ["user@example.com", "john.doe@example.co.uk", "first.last+tag@sub.example.org", "a@b.io", "admin@localhost", "x_y-z@mail-server.example.net", "o'brien@example.ie"],
    "hostname": ["example.com", "localhost", "api.v2.example.co.uk", "my-host-01", "xn--bcher-kva.example", "example.com.", "a" * 63 + ".com", "256.256.256.256", "ns1.example.com"],
    "ipv4": ["0.0.0.0", "127.0.0.1", "192.168.1.100", "255.255.255.255", "10.0.0.1", "8.8.8.8"],
    "ipv6": ["::", "::1", "2001:db8::1", "2001:0db8:85a3:0000:0000:8a2e:0370:7334", "fe80::1ff:fe23:4567:890a", "::ffff:192.0.2.128", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "2001:DB8::A", "64:ff9b::192.0.2.33"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "550E8400-E29B-41D4-A716-446655440000", "00000000-0000-0000-0000-000000000000"],
    "uri": ["https://example.com", "https://example.com/path/to/page?query=1&x=y#frag", "http://localhost:8080/api/v1", "ftp://ftp.example.com/file.txt", "mailto:user@example.com", "urn:isbn:0451450523", "file:///etc/hosts", "http://[::1]:8080/", "https://user:pass@example.com/a%20b", "data:text/plain;base64,SGVsbG8=", "http://192.168.0.1/"],
    "uri-reference": ["https://example.com/x", "/relative/path", "./local-plugin", "../up", "#/definitions/Person", "#", "", "?q=1", "//cdn.example.com/lib.js", "README.md", "a%20b"],
    "regex": ["^[a-zA-Z0-9_]{3,16}$", "^[a-zA-Z0-9]+$", "\\d+", "^(foo|bar)\\.js$", "[a-z0-9_-]+", "a{,3}", "(?:ab)*?",
              "", "[^\\s]+@[^\\s]+", "^v[0-9]+(\\.[0-9]+){2}$", ".*\\.tsx?$", "café|naïve"],
}
REJECTED = {  # rejected here (some, e.g. odd emails, are accepted by the lax checker)
    "date": ["2023-02-29", "1900-02-29", "2024-04-31", "2024-13-01", "2024-00-10", "2024-01-00", "0000-01-01", "2024-1-5", "24-01-05", "2024/01/05", "2024-01-15T00:00:00Z", "2024-01-32", ""],
    "time": ["12:00:00", "24:00:00Z", "12:60:00Z", "12:00:60Z", "12:00Z", "12:00:00+24:00", "12:00:00 Z", "1:00:00Z", "12:00:00.Z"],
    "date-time": ["2024-01-15 10:30:00Z", "2024-01-15T10:30:00", "2024-02-30T00:00:00Z", "2024-01-15T25:00:00Z", "2024-01-15", "20240115T103000Z", "2024-01-15T10:30:00ZZ"],
    "duration": ["P", "PT", "1D", "P1DT", "abc", "P1H", "PT1D", "P1M1Y"],
    "email": ["", "plainaddress", "@example.com", "user@", "user name@example.com", "user@@example.com", "user@exa mple.com", "user.@example.com", "user@-example.com"],
    "hostname": ["", "-example.com", "example-.com", "exa_mple.com", "example..com", "a" * 64 + ".com", "localhost:8080", "ex ample.com", ".example.com"],
    "ipv4": ["256.1.1.1", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.04", "", "1.2.3.4 ", "a.b.c.d", "1..2.3"],
    "ipv6": ["", ":", ":::", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::", "12345::", "::g", "1:2:3:4:5:6:7", ":1::", "1::2:", "::ffff:256.0.0.1", "::ffff:01.2.3.4", "fe80::1%eth0", "1.2.3.4"],
    "uuid": ["", "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "123e4567-e89b-12d3-a456-4266141740000", "g23e4567-e89b-12d3-a456-426614174000", "{123e4567-e89b-12d3-a456-426614174000}"],
    "uri": ["", "example.com", "/relative/path", "http://exa mple.com", "ht(tps://x", "http://example.com/<>", "not a uri", "https://example.com/\"q\"", "://x", "1http://x"],
    "uri-reference": ["not a uri", "://", "http://exa mple.com", "a b", "%zz", "http://[::1/"],
    "regex": ["*", "(", ")", "[a-", "[^]", "[]", "a{3,1}", "[z-a]", "\\q", "\\1", "a**", "^*", "a{1,2}{3}", "\\b*", "[\\B]",
              "(?P<x>a)(?P<x>b)"],
}


def _fqdn_oracle(s: str) -> bool:
    """fqdn.FQDN(s, min_labels=1).is_valid, as fqdn 1.5 implements it."""
    if not s:
        return False
    n = len(s) - 1 if s.endswith(".") else len(s)
    if n > 253:
        return False
    return bool(
        re.match(r"^((?![-])[-A-Z\d]{1,63}(?<!-)[.])*(?!-)[-A-Z\d]{1,63}(?<!-)[.]?$", s.lower(), re.I)
    )


def _oracle(fmt: str):
    """A callable telling whether the reference checker accepts a value, or None."""
    if fmt in CHECKER.checkers:
        return lambda s: CHECKER.conforms(s, fmt)
    if fmt == "hostname":
        return _fqdn_oracle
    if fmt == "duration":
        try:
            import isoduration
        except ImportError:
            return None

        def accepts(s: str) -> bool:
            try:
                isoduration.parse_duration(s)
            except isoduration.DurationParsingException:
                return False
            return s.endswith(tuple("DMYWHMS"))

        return accepts
    if fmt in ("uri", "uri-reference"):
        try:
            from rfc3986_validator import validate_rfc3986
        except ImportError:
            return None
        rule = "URI" if fmt == "uri" else "URI_reference"
        return lambda s: bool(validate_rfc3986(s, rule=rule))
    return None


@pytest.fixture(scope="module")
def dfas():
    return {f: compile_regex(p) for f, p in FORMATS.items()}


def _sample(dfa, rng: random.Random, stop: float, maxlen: int = 100) -> str | None:
    """A random string of the DFA's language (random walk; None if it got lost)."""
    classes = dfa.byte_to_class.tolist()
    by_class: dict[int, list[int]] = {}
    for b in range(128):  # the format regexes are ASCII
        by_class.setdefault(classes[b], []).append(b)
    out = bytearray()
    state = 0
    while True:
        if dfa.accepting[state] and (rng.random() < stop or len(out) >= maxlen):
            return out.decode()
        if len(out) > 3 * maxlen:
            return None
        moves = [(c, t) for c, t in enumerate(dfa.next_states(state)) if t >= 0 and c in by_class]
        if not moves:
            return out.decode() if dfa.accepting[state] else None
        c, t = rng.choice(moves)
        out.append(rng.choice(by_class[c]))
        state = t


def test_api():
    assert set(FORMATS) == {
        "date", "time", "date-time", "duration", "email", "hostname",
        "ipv4", "ipv6", "uuid", "uri", "uri-reference", "regex",
    }
    assert format_regex("date") == FORMATS["date"]
    assert format_regex("no-such-format") is None


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_valid_examples_accepted(fmt, dfas):
    oracle = _oracle(fmt)
    for v in VALID[fmt]:
        assert dfas[fmt].matches(v.encode()), (fmt, v)
        assert re.fullmatch(FORMATS[fmt], v), (fmt, v)
        if oracle is not None:
            assert oracle(v), (fmt, v)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_rejected_examples(fmt, dfas):
    for v in REJECTED[fmt]:
        assert not dfas[fmt].matches(v.encode()), (fmt, v)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@HYP
@given(seed=st.integers(0, 2**32), stop=st.sampled_from([0.02, 0.1, 0.3, 0.7]))
def test_sampled_strings_are_valid(fmt, dfas, seed, stop):
    """Random strings of each regex's language pass the reference checker."""
    oracle = _oracle(fmt)
    if oracle is None:
        pytest.skip(f"no reference checker for {fmt} here")
    rng = random.Random(seed)
    for _ in range(20):
        s = _sample(dfas[fmt], rng, stop)
        if s is None:
            continue
        assert re.fullmatch(FORMATS[fmt], s)
        assert oracle(s), (fmt, s)


def test_date_is_exact():
    rx = re.compile(FORMATS["date"])
    years = [0, 1, 4, 100, 400, 1600, 1700, 1900, 1996, 1999, 2000, 2023, 2024, 2100, 2400, 9996, 9999]
    for y in years:
        for m in range(0, 14):
            for d in range(0, 33):
                s = f"{y:04d}-{m:02d}-{d:02d}"
                try:
                    ok = datetime.date.fromisoformat(s) is not None
                except ValueError:
                    ok = False
                assert bool(rx.fullmatch(s)) == ok, s


@HYP
@given(st.dates(), st.times(), st.sampled_from(["T", "t"]), st.sampled_from(["Z", "z", "+05:30", "-11:00", "+00:00"]))
def test_date_time_from_python_values(dfas, d, t, sep, off):
    s = f"{d.isoformat()}{sep}{t.isoformat()}{off}"
    assert dfas["date-time"].matches(s.encode()), s
    assert CHECKER.conforms(s, "date-time")
    assert dfas["time"].matches(f"{t.isoformat()}{off}".encode())
    assert dfas["date"].matches(d.isoformat().encode())


@HYP
@given(st.ip_addresses(v=4))
def test_ipv4_addresses(dfas, a):
    assert dfas["ipv4"].matches(str(a).encode())


@HYP
@given(st.ip_addresses(v=6), st.sampled_from(["compressed", "exploded", "upper"]))
def test_ipv6_addresses(dfas, a, form):
    s = {"compressed": a.compressed, "exploded": a.exploded, "upper": a.compressed.upper()}[form]
    assert dfas["ipv6"].matches(s.encode()), s
    if a.ipv4_mapped is not None:
        assert dfas["ipv6"].matches(f"::ffff:{a.ipv4_mapped}".encode())


def _python_accepts(cls, s: str) -> bool:
    try:
        cls(s)
    except ValueError:
        return False
    return "%" not in s


@HYP
@given(st.text(alphabet="0123456789.", max_size=16))
def test_ipv4_exact(dfas, s):
    assert dfas["ipv4"].matches(s.encode()) == _python_accepts(ipaddress.IPv4Address, s), s


@HYP
@given(st.text(alphabet="0af:.12", max_size=24))
def test_ipv6_exact(dfas, s):
    assert dfas["ipv6"].matches(s.encode()) == _python_accepts(ipaddress.IPv6Address, s), s


@HYP
@given(st.uuids())
def test_uuids(dfas, u):
    assert dfas["uuid"].matches(str(u).encode())
    assert dfas["uuid"].matches(str(u).upper().encode())


@HYP
@given(st.lists(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,22}[a-z0-9])?", fullmatch=True), min_size=1, max_size=10))
def test_hostnames(dfas, labels):
    s = ".".join(labels)
    assert dfas["hostname"].matches(s.encode()), s
    assert _fqdn_oracle(s)


def test_hostname_length_limit_kept(dfas):
    assert dfas["hostname"].matches(".".join(["a" * 63] * 3).encode())
    assert dfas["hostname"].matches(".".join(["b" * 24] * 10).encode())
    assert not dfas["hostname"].matches(".".join(["a" * 63] * 4).encode())  # 255 chars: too long


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_dfa_size_and_compile(fmt):
    guided.fsm.regex.compile_regex.cache_clear()
    t = time.perf_counter()
    dfa = compile_regex(FORMATS[fmt])
    elapsed = time.perf_counter() - t
    assert dfa.num_states < 1000, (fmt, dfa.num_states)
    assert elapsed < 5.0  # generous; typically < 50 ms
    if fmt == "regex":
        return  # patterns hold backslashes and any character: the compiler JSON-escapes them
    # ASCII only: no control characters, quotes, backslashes or non-ASCII bytes
    for b in list(range(0, 32)) + [ord('"'), ord("\\"), 127] + list(range(128, 256)):
        assert (dfa.transitions[:, dfa.byte_to_class[b]] < 0).all(), (fmt, b)


def test_regex_format_accepts_only_what_re_compiles():
    """Random strings of regex tokens: every one the ``regex`` format accepts compiles
    with ``re.compile`` (the checker), and most common shapes are among them."""
    rx = re.compile(FORMATS["regex"])
    tokens = ["a", "\u00e9", "0", "9", "(", ")", "(?:", "[", "]", "^", "$", ".", "*", "+", "?", "{", "}", ",", "|",
              "\\", "d", "-", "z", "Z", "b", "_", " ", "\\d", "\\.", "[^", "{2}", "{1,3}", "{,2}", "{3,}", "\\b",
              "\\1", "\\q", "[a-z]", "[z-a]", "-]", "[-"]
    rng = random.Random(11)
    accepted = 0
    for _ in range(60_000):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(0, 8)))
        if rx.fullmatch(text):
            accepted += 1
            re.compile(text)  # raises re.error if the format let an invalid pattern in
    assert accepted > 5_000


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_shipped_format_dfa_is_the_one_its_regex_builds(fmt):
    """The package ships each format's body DFA (``format_dfas.npz``): it must be the
    DFA the format's regex builds now, or a schema naming the format would be held to
    an old regex. On failure, write the file again (``format_dfas`` docstring)."""
    got = format_dfas.ARCHIVE.get(FORMATS[fmt])
    assert got is not None, f"format_dfas.npz has no entry for the current {fmt!r} regex: write it again"
    built = format_dfas.build_format_dfa(FORMATS[fmt])
    for field in ("transitions", "byte_to_class", "accepting"):
        assert np.array_equal(getattr(got, field), getattr(built, field)), (fmt, field)
    assert got.transitions.dtype == built.transitions.dtype


def test_a_format_regex_the_file_was_not_written_for_is_built():
    rx = FORMATS["date"] + "x"
    assert format_dfas.ARCHIVE.get(rx) is None
    assert format_dfas.format_dfa(rx).matches(b"2024-02-29x")
    assert not format_dfas.format_dfa(rx).matches(b"2024-02-29")
