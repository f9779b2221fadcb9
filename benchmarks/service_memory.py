"""Detection service memory under many distinct expensive schemas.

Starts ``guided serve`` (a real uvicorn server, in a subprocess) on loopback with a
temporary key, warms it up (one plain request, one small schema), then sends
``--schemas`` requests, each with a different schema that is costly to compile: the
``allOf`` of two ``pattern`` s whose automata have about 2**k states each, intersected,
made distinct by a prefix. ``--clients`` threads send them. Prints the server's
resident memory (RSS, from ``/proc``: Linux) before, after and at its peak, the status
codes, and the latency of the schema requests; progress goes to stderr.

The server runs with its defaults (compile time limit, schema job slots and queue)
except ``--rate-limit 0`` (one address sends everything) and ``--min-scored-tokens 0``
(the short texts would be refused after the compile: the status then tells compile
outcomes apart); ``--serve-arg`` adds flags. ``--max-rss-mb`` stops sending when the
server grows past it, to spare a shared machine.

Usage::

    python benchmarks/service_memory.py [--schemas 100] [--clients 2] [--k 13]
        [--serve-arg=--compile-timeout=5] [--max-rss-mb 8192]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
from watermark_http import free_port, wait_for_server, write_key_file  # (benchmarks/ is this script's folder)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def memory_mib(pid: int) -> tuple[float, float]:
    """(RSS, peak RSS) of a process in MiB, from /proc/PID/status."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def expensive_schema(i: int, k: int) -> dict:
    """Schema ``i``: two patterns of ~2**k automaton states each, intersected; the prefix
    makes each schema distinct (no compile cache holds it)."""
    prefix = f"s{i:04d}"
    a, b = "abcdefghijklmnopqrstuvwxyz"[i % 26], "abcdefghijklmnopqrstuvwxyz"[(i * 7 + 1) % 26]
    return {"type": "string", "allOf": [{"pattern": f"^{prefix}[a-z]*{a}[a-z]{{{k}}}$"},
                                        {"pattern": f"^{prefix}[a-z]*{b}[a-z]{{{k - 1}}}[a-z]*$"}]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="RSS is read from /proc: Linux only.")
    ap.add_argument("--schemas", type=int, default=100, help="distinct schemas to send (default 100)")
    ap.add_argument("--clients", type=int, default=2,
                    help="threads sending them (default 2: the server's schema job slots, so none waits)")
    ap.add_argument("--k", type=int, default=13, help="pattern size: ~2**k automaton states each (default 13)")
    ap.add_argument("--serve-arg", action="append", default=[], metavar="FLAG",
                    help="an extra flag for guided serve, e.g. --serve-arg=--compile-timeout=5 (repeatable)")
    ap.add_argument("--max-rss-mb", type=float, default=8192, help="stop sending past this server RSS (default 8192)")
    args = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        key = write_key_file(tmp)
        command = [sys.executable, "-m", "guided.cli", "serve", "--key-file", key, "--port", str(port),
                   "--rate-limit", "0", "--min-scored-tokens", "0", *args.serve_arg]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        try:
            if not wait_for_server(url, server):
                print("server did not start", file=sys.stderr)
                return 1
            idle, _ = memory_mib(server.pid)
            with httpx.Client(timeout=300) as http:  # warm up: the tokenizer, the compiler's imports
                http.post(url + "/v1/watermark/detect", json={"text": "The lighthouse keeper wrote a letter."})
                http.post(url + "/v1/watermark/detect", json={"text": '{"a": 1}', "schema": {"type": "object"}})
            before, _ = memory_mib(server.pid)
            print(f"[mem] server up: RSS {idle:.0f} MiB idle, {before:.0f} MiB warm; sending {args.schemas} "
                  f"schemas (k={args.k}) from {args.clients} clients", file=sys.stderr)

            codes: Counter = Counter()
            latencies: list[float] = []
            peak_seen = [before]
            stop = threading.Event()
            lock = threading.Lock()
            done = [0]

            def sample():
                while not stop.wait(0.2):
                    try:
                        peak_seen[0] = max(peak_seen[0], memory_mib(server.pid)[0])
                    except OSError:
                        return

            def send(i: int):
                if stop.is_set():
                    return
                body = {"text": '"' + "s%04d" % i + "the quick brown fox" + '"', "schema": expensive_schema(i, args.k)}
                t = time.perf_counter()
                try:
                    with httpx.Client(timeout=600) as http:
                        status = http.post(url + "/v1/watermark/detect", json=body).status_code
                except httpx.HTTPError as e:
                    status = type(e).__name__
                elapsed = time.perf_counter() - t
                rss, _ = memory_mib(server.pid)
                with lock:
                    codes[status] += 1
                    latencies.append(elapsed)
                    done[0] += 1
                    if done[0] % 10 == 0 or done[0] == args.schemas:
                        print(f"[mem] {done[0]}/{args.schemas}: RSS {rss:.0f} MiB; {dict(codes)}", file=sys.stderr)
                    if rss > args.max_rss_mb:
                        print(f"[mem] RSS {rss:.0f} MiB is past --max-rss-mb: stopping", file=sys.stderr)
                        stop.set()

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=args.clients) as pool:
                list(pool.map(send, range(args.schemas)))
            wall = time.perf_counter() - t0
            time.sleep(0.5)
            after, peak = memory_mib(server.pid)
            stop.set()
        finally:
            server.terminate()
            server.wait(timeout=30)

    lat = sorted(latencies)
    print(f"# Detection service memory ({done[0]} distinct expensive schemas, k={args.k}, "
          f"{args.clients} clients, loopback)\n")
    print("| RSS idle MiB | RSS warm MiB | RSS after MiB | RSS peak MiB | statuses | p50 s | max s | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(codes.items(), key=lambda kv: str(kv[0])))
    print(f"| {idle:.0f} | {before:.0f} | {after:.0f} | {max(peak, peak_seen[0]):.0f} | {statuses} | "
          f"{statistics.median(lat) if lat else 0:.2f} | {lat[-1] if lat else 0:.2f} | {wall:.0f} |")
    print(f"\nCommand: `python benchmarks/service_memory.py {' '.join(sys.argv[1:])}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
