"""Speculative decoding on the default model (SmolLM2-135M-Instruct), CPU, one thread:
forward passes saved, wall-clock speedup, acceptance, and greedy output identity.

All in one process, one thread (``torch.set_num_threads(1)``, OMP / MKL threads set
to 1 before torch is imported), greedy (``temperature=0``), chat template on.

**Task sets**

1. *Schema-constrained JSON* (``--schemas``, 24 by default, all listed below):
   realistic objects (person, address, product, order with items, event, book,
   weather report, recipe, job posting, movie, invoice, ...), each with
   ``"additionalProperties": false``, required keys, enums, integer bounds and short
   strings (``maxLength``); spec ``guided.JsonSchema(schema, whitespace="compact")``.
   Each prompt gives a short paragraph with the facts and asks for the JSON object
   (the schema's keys are *not* spelled out in the prompt). ``--max-tokens`` (120)
   new tokens at most.
2. *Free text grounded in the prompt* (10 prompts, ``--skip-free-text`` to leave
   out): extract fields of a paragraph into ``Name: ...; Date: ...`` text, quote or
   summarise a given passage. Unconstrained (spec ``None``), ``--free-max-tokens``
   (120) new tokens at most.

**Arms**: plain (``speculative=None``), ``[ForcedTokens(tok)]``, ``[PromptLookup()]``,
``"auto"`` (= ForcedTokens then PromptLookup), auto + ``EarlyExit(model)`` (the
target's first ``--early-exit-layers`` layers, default a quarter, as a third drafter),
``num_draft_tokens=8``; with
``--draft-model`` also ``[ForcedTokens(tok), DraftModel(model)]`` where the draft
model IS the target model (no smaller model with the same vocabulary is available
offline): every draft is accepted, so it shows the best-case pass count only; each
draft token costs a full forward pass of the same model, so it is useless in
practice. ForcedTokens proposes nothing without a grammar, so on free text that arm
is plain decoding through the speculative loop (the loop's own overhead).

**Protocol**: one untimed warm-up round (the first prompt of each set through every
arm), then for each prompt every arm runs once before the next prompt (interleaved),
with the arm order rotated by one per prompt so that cache warm-up in the shared
compiled guide (guides are cached per schema) and machine noise hit every arm alike.

**Reported per arm** (sums over the prompts of the set):

- tokens/s = sum(new_tokens) / sum(prefill_s + decode_s) (prefill included; the
  speculative loop times its prefill inside ``decode_s``; compile time excluded);
- speedup = plain's sum(prefill_s + decode_s) / the arm's, same prompts;
- passes / token = target forward passes / new tokens. Plain decoding's passes are
  counted from the result: 1 prefill + 1 per generated token when it stops at EOS
  (the EOS step), 1 prefill + new_tokens - 1 otherwise (``complete`` / ``length``:
  no pass after the last token). Speculative arms: ``stats["target_forward_passes"]``
  (prefill included). "fewer passes" = plain's passes / the arm's;
- acceptance = accepted_draft_tokens / draft_tokens, and drafted tokens per pass;
- identical = how many outputs have exactly plain's ``token_ids`` (greedy decoding
  must be unchanged: anything less is a bug; the mismatching prompt indices are
  listed).

Targets (combined drafters, schema-constrained JSON): >= 2x fewer target forward
passes and >= 1.5x wall-clock speedup.

Usage (from the repository root)::

    python benchmarks/speculative.py                 # full: ~10 min on one quiet core (more with --draft-model)
    python benchmarks/speculative.py --quick         # 4 schemas, 3 free-text prompts, 60 tokens
    python benchmarks/speculative.py [--schemas N] [--max-tokens N] [--skip-free-text] [--draft-model]

Progress goes to stderr, markdown tables to stdout (the command line at the top).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

torch.set_num_threads(1)

import guided  # noqa: E402
from guided.decoding.speculative import DraftModel, EarlyExit, ForcedTokens, PromptLookup  # noqa: E402


def _obj(props: dict, required=None) -> dict:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


def _s(n: int = 40) -> dict:
    return {"type": "string", "maxLength": n}


def _i(lo: int, hi: int) -> dict:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _e(*vals) -> dict:
    return {"type": "string", "enum": list(vals)}


# (name, schema, prompt). The prompts carry the facts; the keys come from the schema.
SCHEMAS = [
    ("person", _obj({"name": _s(), "age": _i(0, 120), "email": _s(60), "role": _e("admin", "editor", "viewer")}),
     "Maria Lopez is 34 years old. Her email is maria.lopez@example.com and she is an editor on the team. "
     "Give her record as JSON."),
    ("address", _obj({"street": _s(60), "city": _s(), "postal_code": _s(10), "country": _e("US", "UK", "DE", "FR", "ES")}),
     "Ship the parcel to 221B Baker Street, London, postal code NW1 6XE, United Kingdom. Return the address as JSON."),
    ("product", _obj({"sku": _s(16), "name": _s(), "price_cents": _i(0, 1000000), "in_stock": {"type": "boolean"},
                      "category": _e("electronics", "kitchen", "garden", "toys", "books")}),
     "The Acme Pro Blender (SKU AC-1042) costs $89.99, i.e. 8999 cents, is in stock, and belongs to the kitchen "
     "category. Describe this product as JSON."),
    ("order", _obj({"order_id": _s(16), "customer": _s(),
                    "items": {"type": "array", "minItems": 1, "maxItems": 4,
                              "items": _obj({"product": _s(30), "quantity": _i(1, 99)})},
                    "status": _e("pending", "shipped", "delivered", "cancelled")}),
     "Order ORD-5521 was placed by John Smith for 2 notebooks and 3 pens. It has been shipped. "
     "Write the order as JSON."),
    ("event", _obj({"title": _s(50), "date": {"type": "string", "pattern": r"\d{4}-\d{2}-\d{2}"}, "city": _s(),
                    "attendees": _i(0, 100000), "type": _e("conference", "concert", "meetup", "workshop")}),
     "PyCon Europe takes place in Dublin on 2025-07-14. About 1200 people are expected at the conference. "
     "Summarise the event as JSON."),
    ("book", _obj({"title": _s(60), "author": _s(), "year": _i(1400, 2030), "pages": _i(1, 5000),
                   "genre": _e("fiction", "history", "science", "biography", "poetry")}),
     "'The Old Man and the Sea' by Ernest Hemingway was published in 1952. The novel, a work of fiction, "
     "has 127 pages. Give the book as JSON."),
    ("weather", _obj({"city": _s(), "temperature_c": _i(-60, 60), "humidity": _i(0, 100),
                      "condition": _e("sunny", "cloudy", "rain", "snow", "storm"), "wind_kmh": _i(0, 300)}),
     "Weather in Oslo right now: 4 degrees Celsius, humidity 81 percent, light rain, wind at 22 km/h. "
     "Report it as JSON."),
    ("recipe", _obj({"name": _s(), "servings": _i(1, 20), "prep_minutes": _i(0, 600),
                     "ingredients": {"type": "array", "minItems": 1, "maxItems": 6, "items": _s(25)},
                     "difficulty": _e("easy", "medium", "hard")}),
     "Pancakes for 4 people take 20 minutes to prepare and are easy. You need flour, milk, eggs and butter. "
     "Give the recipe as JSON."),
    ("job", _obj({"title": _s(50), "company": _s(), "location": _s(), "salary_k": _i(0, 1000),
                  "remote": {"type": "boolean"}, "level": _e("junior", "mid", "senior", "lead")}),
     "Northwind Labs is hiring a senior backend engineer in Berlin. The salary is 95k and the role is fully remote. "
     "Write the job posting as JSON."),
    ("movie", _obj({"title": _s(60), "director": _s(), "year": _i(1880, 2030), "rating": _i(1, 10),
                    "genre": _e("drama", "comedy", "action", "horror", "sci-fi", "animation")}),
     "Alien, a sci-fi film directed by Ridley Scott, came out in 1979. I would rate it 9 out of 10. "
     "Give the movie as JSON."),
    ("invoice", _obj({"invoice_number": _s(20), "client": _s(), "amount_cents": _i(0, 100000000),
                      "currency": _e("USD", "EUR", "GBP"), "paid": {"type": "boolean"}}),
     "Invoice INV-2024-017 was sent to Blue Harbor Ltd for 1,250.00 EUR (125000 cents). It has not been paid yet. "
     "Return the invoice as JSON."),
    ("employee", _obj({"employee_id": _i(1, 999999), "name": _s(), "department": _e("sales", "engineering", "hr", "finance"),
                       "manager": _s(), "start_year": _i(1950, 2030)}),
     "Employee 4821, Priya Nair, joined the engineering department in 2019. Her manager is Tom Baker. "
     "Give the employee as JSON."),
    ("flight", _obj({"flight_number": _s(10), "origin": _s(3), "destination": _s(3),
                     "departure": {"type": "string", "pattern": r"\d{2}:\d{2}"}, "status": _e("on time", "delayed", "cancelled")}),
     "Flight LH 400 from FRA to JFK departs at 13:25 and is delayed. Give the flight status as JSON."),
    ("restaurant", _obj({"name": _s(), "cuisine": _e("italian", "japanese", "mexican", "indian", "french"),
                         "price_level": _i(1, 4), "rating": _i(1, 5), "city": _s()}),
     "Trattoria Da Enzo is an Italian restaurant in Rome. Prices are moderate (level 2 of 4) and guests rate it 5 stars. "
     "Describe the restaurant as JSON."),
    ("contact", _obj({"first_name": _s(20), "last_name": _s(20), "phone": _s(20), "company": _s(),
                      "preferred": _e("email", "phone", "sms")}),
     "Add a contact: Kenji Watanabe from Sakura Systems, phone +81 3 1234 5678, prefers to be reached by phone. "
     "Return the contact as JSON."),
    ("vehicle", _obj({"make": _s(20), "model": _s(20), "year": _i(1900, 2030), "mileage_km": _i(0, 2000000),
                      "fuel": _e("petrol", "diesel", "electric", "hybrid")}),
     "For sale: a 2018 Toyota Corolla, hybrid, with 64000 km on the clock. Give the vehicle as JSON."),
    ("course", _obj({"code": _s(10), "title": _s(50), "credits": _i(1, 10), "instructor": _s(),
                     "semester": _e("fall", "spring", "summer")}),
     "CS 101, Introduction to Programming, is taught by Dr. Alan Reyes in the fall. It is worth 4 credits. "
     "Give the course as JSON."),
    ("ticket", _obj({"ticket_id": _s(12), "title": _s(60), "priority": _e("low", "medium", "high", "critical"),
                     "assignee": _s(), "open": {"type": "boolean"}}),
     "Ticket BUG-311, 'Login page crashes on submit', is high priority, assigned to Sam Lee and still open. "
     "Return the ticket as JSON."),
    ("hotel", _obj({"hotel": _s(), "city": _s(), "nights": _i(1, 60), "guests": _i(1, 10),
                    "room": _e("single", "double", "suite")}),
     "Booking at Hotel Central in Vienna: 3 nights for 2 guests in a double room. Give the booking as JSON."),
    ("song", _obj({"title": _s(), "artist": _s(), "album": _s(), "year": _i(1900, 2030), "duration_s": _i(1, 3600)}),
     "'Bohemian Rhapsody' by Queen is on the album A Night at the Opera from 1975 and lasts 354 seconds. "
     "Give the song as JSON."),
    ("transaction", _obj({"account": _s(20), "amount_cents": _i(-10000000, 10000000), "type": _e("debit", "credit"),
                          "merchant": _s(), "date": {"type": "string", "pattern": r"\d{4}-\d{2}-\d{2}"}}),
     "On 2024-03-02 account CH-9981 was debited 4550 cents at Migros Zurich. Record the transaction as JSON."),
    ("patient", _obj({"patient_id": _s(12), "name": _s(), "age": _i(0, 120), "blood_type": _e("A", "B", "AB", "O"),
                      "allergies": {"type": "array", "maxItems": 4, "items": _s(20)}}),
     "Patient P-0042, Elena Rossi, aged 58, blood type O, is allergic to penicillin and peanuts. "
     "Give the patient record as JSON."),
    ("shipment", _obj({"tracking": _s(20), "carrier": _e("UPS", "FedEx", "DHL", "USPS"), "weight_g": _i(1, 100000),
                       "destination_city": _s(), "delivered": {"type": "boolean"}}),
     "DHL shipment 1Z999AA10123 weighing 2300 grams is on its way to Madrid and has not been delivered. "
     "Return the shipment as JSON."),
    ("company", _obj({"name": _s(), "founded": _i(1600, 2030), "employees": _i(1, 5000000), "headquarters": _s(),
                      "sector": _e("technology", "energy", "retail", "finance", "health")}),
     "Globex Corporation, a technology company founded in 1989, employs 12000 people and is headquartered in "
     "Springfield. Give the company as JSON."),
]

FREE_TEXT = [
    "Read the paragraph and write the fields as 'Name: ...; Date: ...; Place: ...' on one line.\n\n"
    "Paragraph: On 12 March 2021, Dr. Helen Carter opened the new research centre in Cambridge, "
    "after three years of construction.",
    "Extract 'Company: ...; Product: ...; Price: ...' from this text.\n\n"
    "Text: Acme Robotics announced the HomeBot 3 today, a cleaning robot priced at 499 dollars.",
    "Quote the first sentence of this passage exactly, word for word.\n\n"
    "Passage: The river rose slowly through the night and by morning the lower streets of the town were under water. "
    "Shops stayed closed and the school sent the children home.",
    "Copy the list of ingredients from the recipe below, one per line.\n\n"
    "Recipe: Mix 200 g flour, 2 eggs, 300 ml milk and a pinch of salt. Fry in butter.",
    "Summarise this passage in one sentence, reusing its words.\n\n"
    "Passage: The city council approved a plan to build a new public library on Elm Street. "
    "Construction will begin in May and the library should open in two years.",
    "Write 'Author: ...; Title: ...; Year: ...' for the book described here.\n\n"
    "Description: Pride and Prejudice is a novel by Jane Austen, first published in 1813.",
    "Repeat the following address exactly as given.\n\n"
    "Address: Flat 4, 17 Rosewood Avenue, Leeds LS6 2QT, United Kingdom",
    "Extract 'Sender: ...; Recipient: ...; Subject: ...' from this email header.\n\n"
    "From: Laura Chen\nTo: Mark Davies\nSubject: Quarterly budget review moved to Friday",
    "List the names of the people mentioned in this sentence, separated by commas.\n\n"
    "Sentence: At the meeting, Anna Schmidt, Pedro Alvarez and Yuki Tanaka presented the new design.",
    "Quote the sentence of this passage that mentions the price.\n\n"
    "Passage: The museum opens at nine. Tickets cost twelve euros for adults and are free for children. "
    "The cafe on the top floor closes at five.",
]


def arms(tok, model, draft_model: bool, early_exit_layers: int):
    """(label, factory) pairs; a factory returns the ``speculative`` argument (fresh
    drafter objects per call)."""
    out = [
        ("plain", lambda: None),
        ("ForcedTokens", lambda: [ForcedTokens(tok)]),
        ("PromptLookup", lambda: [PromptLookup()]),
        ("auto (Forced+Lookup)", lambda: "auto"),
        (f"auto+EarlyExit({early_exit_layers})",
         lambda: [ForcedTokens(tok), PromptLookup(), EarlyExit(model, early_exit_layers)]),
    ]
    if draft_model:
        out.append(("Forced+DraftModel(self)*", lambda: [ForcedTokens(tok), DraftModel(model)]))
    return out


def plain_passes(r) -> int:
    n = r.stats.new_tokens
    return 1 + n if r.finish_reason == "eos" else max(1, n)


def run_set(name, model, tok, items, arm_list, max_tokens, k, log):
    """items: [(label, prompt, spec)]. Returns per-arm aggregates and mismatches."""
    labels = [a for a, _ in arm_list]
    agg = {a: {"tokens": 0, "time": 0.0, "passes": 0, "draft": 0, "acc": 0, "same": 0, "n": 0,
               "mismatch": [], "finish": {}} for a in labels}

    def one(prompt, spec, factory):
        return guided.generate(model, tok, prompt, spec, max_new_tokens=max_tokens, temperature=0.0,
                               chat=True, speculative=factory(), num_draft_tokens=k)

    # Warm-up: the first prompt through every arm, untimed.
    _, p0, s0 = items[0]
    for a, f in arm_list:
        one(p0, s0, f)
    log(f"[{name}] warm-up done")
    for i, (label, prompt, spec) in enumerate(items):
        rot = i % len(arm_list)
        order = arm_list[rot:] + arm_list[:rot]
        res = {}
        for a, f in order:
            res[a] = one(prompt, spec, f)
        base = res["plain"].token_ids
        line = []
        for a in labels:
            r = res[a]
            g = agg[a]
            g["n"] += 1
            g["tokens"] += r.stats.new_tokens
            g["time"] += r.stats.prefill_s + r.stats.decode_s
            g["passes"] += plain_passes(r) if a == "plain" else r.stats["target_forward_passes"]
            g["draft"] += r.stats.draft_tokens
            g["acc"] += r.stats.accepted_draft_tokens
            g["finish"][r.finish_reason] = g["finish"].get(r.finish_reason, 0) + 1
            if r.token_ids == base:
                g["same"] += 1
            else:
                g["mismatch"].append(i)
            line.append(f"{a.split(' ')[0]}={r.stats.prefill_s + r.stats.decode_s:.2f}s")
        log(f"[{name}] {i + 1}/{len(items)} {label}: {res['plain'].stats.new_tokens} tok "
            f"({res['plain'].finish_reason}) " + " ".join(line)
            + ("" if all(res[a].token_ids == base for a in labels) else "  MISMATCH"))
        if i == 0:
            log(f"[{name}]   plain text: {res['plain'].text[:150]!r}")
    return agg


def table(title, agg, labels):
    p = agg["plain"]
    print(f"\n### {title}\n")
    print("| arm | outputs | new tokens | time s | tokens/s | speedup vs plain | target passes | passes / token "
          "| fewer passes vs plain | drafted | accepted | acceptance | drafted / pass | identical to plain |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for a in labels:
        g = agg[a]
        tps = g["tokens"] / g["time"] if g["time"] else 0.0
        speed = p["time"] / g["time"] if g["time"] else 0.0
        ppt = g["passes"] / g["tokens"] if g["tokens"] else 0.0
        fewer = p["passes"] / g["passes"] if g["passes"] else 0.0
        accr = f"{g['acc'] / g['draft']:.1%}" if g["draft"] else "-"
        dpp = g["draft"] / g["passes"] if g["passes"] else 0.0
        same = f"{g['same']}/{g['n']}" + (f" (differ: {g['mismatch']})" if g["mismatch"] else "")
        print(f"| {a} | {g['n']} | {g['tokens']} | {g['time']:.2f} | {tps:.1f} | {speed:.2f}x | {g['passes']} "
              f"| {ppt:.3f} | {fewer:.2f}x | {g['draft']} | {g['acc']} | {accr} | {dpp:.2f} | {same} |")
    fin = ", ".join(f"{k}: {v}" for k, v in sorted(p["finish"].items()))
    print(f"\nplain finish reasons: {fin}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 schemas, 3 free-text prompts, 60 tokens")
    ap.add_argument("--schemas", type=int, default=None, help=f"number of schemas (max {len(SCHEMAS)})")
    ap.add_argument("--max-tokens", type=int, default=None, help="max new tokens, JSON (120; quick 60)")
    ap.add_argument("--free-max-tokens", type=int, default=None, help="max new tokens, free text (120; quick 60)")
    ap.add_argument("--free-prompts", type=int, default=None, help=f"number of free-text prompts (max {len(FREE_TEXT)})")
    ap.add_argument("--num-draft-tokens", type=int, default=8)
    ap.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                    help="the JSON specs' whitespace (flexible: JsonSchema's default)")
    ap.add_argument("--arms", default=None, help="comma-separated arm labels' first words (default: all), "
                    "e.g. plain,auto; plain is always run")
    ap.add_argument("--early-exit-layers", type=int, default=None,
                    help="layers of the EarlyExit drafter (default: a quarter of the model's)")
    ap.add_argument("--skip-free-text", action="store_true")
    ap.add_argument("--draft-model", action="store_true",
                    help="also ForcedTokens + DraftModel(the target itself): an upper bound, useless in practice")
    args = ap.parse_args(argv)
    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up
    n_schemas = args.schemas or (4 if args.quick else len(SCHEMAS))
    n_free = args.free_prompts or (3 if args.quick else len(FREE_TEXT))
    max_tokens = args.max_tokens or (60 if args.quick else 120)
    free_tokens = args.free_max_tokens or (60 if args.quick else 120)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    print("```\n$ python " + " ".join(["benchmarks/speculative.py", *sys.argv[1:]]) + "\n```")
    t0 = time.perf_counter()
    model, tok = guided.models.load_default_model(verbose=False)
    print(f"\nSmolLM2-135M-Instruct float32, CPU, torch {torch.__version__}, {torch.get_num_threads()} thread; "
          f"{platform.processor() or platform.machine()}; load average at start {os.getloadavg()[0]:.2f}; "
          f"greedy; num_draft_tokens={args.num_draft_tokens}")
    layers = args.early_exit_layers or EarlyExit(model).num_layers
    arm_list = arms(tok, model, args.draft_model, layers)
    if args.arms:
        wanted = {w.strip() for w in args.arms.split(",")} | {"plain"}
        arm_list = [(a, f) for a, f in arm_list if a.split(" ")[0].split("(")[0] in wanted]
    labels = [a for a, _ in arm_list]

    items = [(n, p, guided.JsonSchema(s, whitespace=args.whitespace)) for n, s, p in SCHEMAS[:n_schemas]]
    agg = run_set("json", model, tok, items, arm_list, max_tokens, args.num_draft_tokens, log)
    table(f"Schema-constrained JSON: {len(items)} schemas, {args.whitespace} whitespace, max {max_tokens} new tokens",
          agg, labels)
    p = agg["plain"]
    for label in [a for a in labels if a.startswith("auto")]:
        a = agg[label]
        fewer = p["passes"] / a["passes"]
        speed = p["time"] / a["time"]
        print(f"\nIssue targets ({label}, JSON): fewer target passes {fewer:.2f}x (target >= 2x: "
              f"{'met' if fewer >= 2 else 'NOT met'}), wall-clock speedup {speed:.2f}x (target >= 1.5x: "
              f"{'met' if speed >= 1.5 else 'NOT met'})")

    if not args.skip_free_text:
        items = [(f"free{i}", pr, None) for i, pr in enumerate(FREE_TEXT[:n_free])]
        agg = run_set("free", model, tok, items, arm_list, free_tokens, args.num_draft_tokens, log)
        table(f"Free text grounded in the prompt: {len(items)} prompts, unconstrained, max {free_tokens} new tokens",
              agg, labels)
        print("\nForcedTokens has nothing to force without a grammar: that arm is plain decoding run through "
              "the speculative loop.")
    if args.draft_model:
        print("\n\\* DraftModel(self): the target model drafts for itself (no smaller same-vocabulary model "
              "offline). Each DraftModel token is the target's own greedy choice (drafts are lost only behind a rejected "
              "ForcedTokens draft before them), so its passes are a best case; each drafted token costs a full "
              "forward of the same model (not counted in target passes), so it cannot be faster than plain: "
              "useless in practice, shown only as an upper bound on pass savings.")
    print(f"\nWall time {time.perf_counter() - t0:.0f} s; load average at end {os.getloadavg()[0]:.2f}.")


if __name__ == "__main__":
    main()
