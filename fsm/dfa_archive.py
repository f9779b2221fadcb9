"""Minimal DFAs shipped with the package, read instead of built.

Some automata are constants of the library, built from text the library itself
holds: the body of each JSON Schema ``format`` (``grammars/json_schema/
format_dfas.py``), the terminals of lark's ``common.lark``
(``grammars/lark_frontend.py``). Building one from its regex costs 0.2 ms to 0.7 s;
reading it from an archive ~0.1 ms, once per process (its arrays are kept, each
read makes a new ``DFA`` of them)::

    name -> (key text, DFA) --write()--> archive.npz: {name}.key (SHA-256 of the
                                         key text), {name}.transitions / .byte_to_class /
                                         .accepting (smallest integer types)
    get(key text) -> DFA, or None: no file, or no entry for that text

An entry is found by the SHA-256 of the text it was built from, so an entry written
for other text (a regex changed since) is never used: the caller builds the
automaton, and a test that compares the archive with fresh builds fails until the
archive is written again.

Example::

    >>> archive = DfaArchive(Path("formats.npz"))
    >>> archive.write({"digits": ("[0-9]+", compile_regex("[0-9]+"))})
    >>> archive.get("[0-9]+").matches(b"42")
    True
"""

from __future__ import annotations

import hashlib
import io
import threading
from pathlib import Path

import numpy as np

from .dfa import DFA


class DfaArchive:
    """The DFAs of one ``.npz`` file, by the text each was built from.

    Args:
        path: the archive's file (it need not exist: ``get`` then finds nothing).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, tuple] | None = None  # key digest -> (transitions, classes, accepting)

    def get(self, key: str) -> DFA | None:
        """The DFA written for ``key`` (a new ``DFA`` object), or None."""
        got = self._load().get(_digest(key))
        if got is None:
            return None
        transitions, classes, accepting = got
        # (the int16 / uint8 arrays are converted, so copied; the bool one is copied
        # here: no DFA shares an array with the archive or another DFA)
        return DFA(transitions, classes, accepting.copy())

    def write(self, entries: dict[str, tuple[str, DFA]]) -> None:
        """Write ``{name: (key text, DFA)}`` as the archive (replacing it)."""
        arrays = {}
        for name, (key, dfa) in entries.items():
            wide = dfa.num_states >= 2**15
            arrays[f"{name}.key"] = np.array(_digest(key))
            arrays[f"{name}.transitions"] = dfa.transitions.astype(np.int32 if wide else np.int16)
            arrays[f"{name}.byte_to_class"] = dfa.byte_to_class.astype(np.uint8)
            arrays[f"{name}.accepting"] = dfa.accepting
        np.savez_compressed(self.path, **arrays)
        with self._lock:
            self._entries = None

    def _load(self) -> dict:
        with self._lock:
            if self._entries is None:
                try:
                    z = np.load(io.BytesIO(self.path.read_bytes()))
                except OSError:  # not written: nothing is shipped
                    self._entries = {}
                else:
                    names = {f.rsplit(".", 1)[0] for f in z.files}
                    self._entries = {str(z[f"{n}.key"]): (z[f"{n}.transitions"], z[f"{n}.byte_to_class"],
                                                          z[f"{n}.accepting"]) for n in names}
            return self._entries


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # (a regex may name a lone surrogate)
