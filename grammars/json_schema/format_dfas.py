"""The ``format`` body DFAs, shipped with the package.

A format's string body (``scalars/formats.py``: the regex of the decoded value, with
every character as its JSON encodings) is a constant of the library, yet slow to
build from its regex: ``uri`` is 2.5k NFA states, 15 ms; ``hostname`` and ``ipv6``
~10 ms; ``regex`` 0.7 s. A process would pay that at the first schema naming the
format. So the minimal DFAs are built once, here, and shipped in
``format_dfas.npz`` (23 KB); a process loads one in ~0.1-0.3 ms (about 1 ms more the
first time: the archive's directory)::

    FORMATS[name] --full_match_body + determinize--> DFA --write()--> format_dfas.npz
    format_dfa(rx): the shipped DFA when its regex's SHA-256 matches, else built here

An entry whose regex has changed since it was written is never used (its hash no
longer matches): that format is built from its regex until the file is written
again::

    python -c "from guided.grammars.json_schema import format_dfas; print(format_dfas.write())"

``tests/test_json_formats.py`` checks that every shipped DFA is the one its regex
builds now.
"""

from __future__ import annotations

import hashlib
import io
import threading
from pathlib import Path

import numpy as np

from guided.fsm.dfa import DFA, determinize
from guided.fsm.nfa import NFA

from . import text as jt
from .scalars.formats import FORMATS

PATH = Path(__file__).with_name("format_dfas.npz")

_lock = threading.Lock()
_archive: dict | None = None  # regex sha256 -> (format name, NpzFile), loaded on first use


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
    """``build_format_dfa(rx)``, read from the shipped file where ``rx`` is a format's
    regex that the file holds as it is now; built otherwise."""
    return shipped(rx) or build_format_dfa(rx)


def shipped(rx: str) -> DFA | None:
    """The shipped DFA of format regex ``rx``, or None (not a format's regex, no file,
    or an entry written for another regex)."""
    got = _load().get(_digest(rx))
    if got is None:
        return None
    name, z = got
    return DFA(z[f"{name}.transitions"], z[f"{name}.byte_to_class"], z[f"{name}.accepting"])


def write(path: Path = PATH) -> dict[str, int]:
    """Build every format's DFA and write them to ``path``. Returns each format's
    state count."""
    arrays, sizes = {}, {}
    for name, rx in FORMATS.items():
        dfa = build_format_dfa(rx)
        sizes[name] = dfa.num_states
        # The smallest integer types that hold them: the file is in the package.
        arrays[f"{name}.transitions"] = dfa.transitions.astype(np.int16 if dfa.num_states < 2**15 else np.int32)
        arrays[f"{name}.byte_to_class"] = dfa.byte_to_class.astype(np.uint8)
        arrays[f"{name}.accepting"] = dfa.accepting
        arrays[f"{name}.sha256"] = np.array(_digest(rx))
    np.savez_compressed(path, **arrays)
    global _archive
    with _lock:
        _archive = None
    return sizes


def _digest(rx: str) -> str:
    return hashlib.sha256(rx.encode()).hexdigest()


def _load() -> dict:
    global _archive
    with _lock:
        if _archive is None:
            try:
                z = np.load(io.BytesIO(PATH.read_bytes()))
            except OSError:  # not written yet: every format is built
                _archive = {}
            else:
                names = {f.rsplit(".", 1)[0] for f in z.files}
                _archive = {str(z[f"{name}.sha256"]): (name, z) for name in names}
        return _archive
