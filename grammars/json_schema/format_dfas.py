"""The ``format`` body DFAs, shipped with the package (``fsm.dfa_archive``).

A format's string body (``scalars/formats.py``: the regex of the decoded value, with
every character as its JSON encodings) is a constant of the library, yet slow to
build from its regex: ``uri`` is 2.5k NFA states, 15 ms; ``hostname`` and ``ipv6``
~10 ms; ``regex`` 0.7 s. A process would pay that at the first schema naming the
format. So the minimal DFAs are built once, here, and shipped in
``format_dfas.npz`` (23 KB)::

    FORMATS[name] --full_match_body + determinize--> DFA --write()--> format_dfas.npz
    format_dfa(rx): the shipped DFA where the file holds one for ``rx``, else built

A format whose regex has changed since the file was written is built from its regex
until the file is written again::

    python -c "from guided.grammars.json_schema import format_dfas; print(format_dfas.write())"

``tests/test_json_formats.py`` checks that every shipped DFA is the one its regex
builds now.
"""

from __future__ import annotations

from pathlib import Path

from guided.fsm.dfa import DFA, determinize
from guided.fsm.dfa_archive import DfaArchive
from guided.fsm.nfa import NFA

from . import text as jt
from .scalars.formats import FORMATS

ARCHIVE = DfaArchive(Path(__file__).with_name("format_dfas.npz"))


def build_format_dfa(rx: str) -> DFA:
    """The minimal DFA of the encoded string body whose value fully matches ``rx``.

    Example::

        >>> build_format_dfa("[0-9]{2}").matches(b"42")
        True
    """
    nfa = NFA()
    s, e = jt.full_match_body(nfa, rx)
    return determinize(nfa, s, e)


def format_dfa(rx: str) -> DFA:
    """``build_format_dfa(rx)``, read from the shipped file where it holds ``rx``."""
    return ARCHIVE.get(rx) or build_format_dfa(rx)


def write() -> dict[str, int]:
    """Build every format's DFA and write the file. Returns each one's state count."""
    entries = {name: (rx, build_format_dfa(rx)) for name, rx in FORMATS.items()}
    ARCHIVE.write(entries)
    return {name: dfa.num_states for name, (_, dfa) in entries.items()}
