"""Detection service latency: p50 / p99 for 1k-token texts at 50 concurrent clients.

Starts ``guided serve`` (a real uvicorn server, in a subprocess) on loopback with a
temporary key, then ``--clients`` threads each send ``--requests`` POSTs of
``/v1/watermark/detect`` with a different 1,000-token text (human text from the
license files and stdlib docstrings, as in ``watermark_eval.py``; ``--token-ids``
sends ids instead). Prints latency percentiles, throughput and the error count.

The server runs with its defaults but ``--rate-limit 0``: every client here shares one
address, and the per-client rate limit would answer most requests 429 (``--rate-limit``
sets one, to see it). ``--auth`` gives the server a bearer token file and the clients
the token.

Usage::

    python benchmarks/watermark_http.py [--clients 50] [--requests 20] [--tokens 1000] [--token-ids]
        [--auth] [--rate-limit N]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_key_file(folder: str) -> str:
    """A fresh random watermark key in ``folder`` (readable by its owner only); its path."""
    key = os.path.join(folder, "wm.key")
    with open(key, "wb") as f:
        f.write(os.urandom(32))
    os.chmod(key, 0o600)
    return key


def wait_for_server(url: str, server: subprocess.Popen, seconds: float = 120) -> bool:
    """Whether the service at ``url`` answers ``/healthz`` within ``seconds`` (False
    as soon as its process exits)."""
    deadline = time.time() + seconds
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if time.time() > deadline or server.poll() is not None:
            return False
        time.sleep(0.2)


def texts_of(tok, n: int, length: int) -> list[list[int]]:
    from watermark_eval import human_documents, token_chunks

    _, stream, _ = token_chunks(tok, human_documents(), length)
    out = []
    for i in range(n):
        start = (i * 997) % max(1, len(stream) - length)
        out.append(stream[start : start + length])
    return out


def percentile(sorted_values: list[float], p: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=20, help="requests per client")
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--token-ids", action="store_true", help="send token ids instead of text")
    ap.add_argument("--auth", action="store_true", help="serve with a bearer token; clients send it")
    ap.add_argument("--rate-limit", type=float, default=0.0,
                    help="the server's per-client rate limit, requests/s (default 0: off; the clients share an "
                         "address)")
    args = ap.parse_args()

    import guided

    tok = guided.models.load_tokenizer()
    payloads = texts_of(tok, args.clients * args.requests, args.tokens)
    bodies = [{"token_ids": ids} if args.token_ids else {"text": tok.decode(ids)} for ids in payloads]

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        key = write_key_file(tmp)
        command = [sys.executable, "-m", "guided.cli", "serve", "--key-file", key, "--port", str(port),
                   "--rate-limit", f"{args.rate_limit:g}"]
        headers = {}
        if args.auth:
            token = os.urandom(24).hex()
            tokens = os.path.join(tmp, "tokens.txt")
            with open(tokens, "w") as f:
                f.write(token + "\n")
            os.chmod(tokens, 0o600)
            command += ["--auth-token-file", tokens]
            headers = {"Authorization": f"Bearer {token}"}
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        try:
            url = f"http://127.0.0.1:{port}"
            if not wait_for_server(url, server):
                print("server did not start", file=sys.stderr)
                return 1
            print(f"[http] server up; {args.clients} clients x {args.requests} requests", file=sys.stderr)

            def client(c: int):
                lat, errors = [], 0
                with httpx.Client(timeout=120, headers=headers) as http:
                    for r in range(args.requests):
                        body = bodies[c * args.requests + r]
                        t = time.perf_counter()
                        resp = http.post(url + "/v1/watermark/detect", json=body)
                        lat.append(time.perf_counter() - t)
                        errors += resp.status_code != 200
                return lat, errors

            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=args.clients) as pool:
                results = list(pool.map(client, range(args.clients)))
            wall = time.perf_counter() - t0
        finally:
            server.terminate()
            server.wait(timeout=30)

    lat = sorted(x for r, _ in results for x in r)
    errors = sum(e for _, e in results)
    n = len(lat)
    kind = "token ids" if args.token_ids else "text"
    extras = "".join([", bearer auth" if args.auth else "",
                      f", rate limit {args.rate_limit:g}/s" if args.rate_limit else ""])
    print(f"# Detection service latency ({args.clients} concurrent clients, {n} requests of "
          f"{args.tokens}-token {kind}, loopback, one uvicorn worker{extras})\n")
    print("| p50 ms | p90 ms | p99 ms | max ms | mean ms | requests/s | tokens/s | errors |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {1e3 * percentile(lat, 50):.1f} | {1e3 * percentile(lat, 90):.1f} | {1e3 * percentile(lat, 99):.1f} | "
          f"{1e3 * lat[-1]:.1f} | {1e3 * statistics.mean(lat):.1f} | {n / wall:.0f} | "
          f"{n * args.tokens / wall:,.0f} | {errors} |")
    print(f"\nCommand: `python benchmarks/watermark_http.py {' '.join(sys.argv[1:])}`")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
