"""Grammar-constrained generation with the default offline model: a shipped grammar,
your own lark grammar, and a recursive pydantic model (which needs the grammar engine).

    python examples/grammar_generate.py

Every output is checked by an independent parser: lark itself, and pydantic.
"""

import time

import lark
import pydantic
import torch

import guided

torch.set_num_threads(1)
print("loading the default model ...", flush=True)
model, tokenizer = guided.models.load_default_model()


def show(title, result, seconds):
    print(f"--- {title} ({result.stats.new_tokens} tokens, {seconds:.1f} s, finish: {result.finish_reason})")
    print(result.text)


# 1. A shipped grammar: SQL SELECT statements (guided.Grammar.names() lists them all).
sql = guided.Grammar.from_name("sql")
t = time.perf_counter()
r = guided.generate(model, tokenizer, "Write a SQL query for the names of all users older than 30.", sql,
                    max_new_tokens=48)
show("sql", r, time.perf_counter() - t)
if r.finish_reason != "length":
    lark.Lark(sql.lark_text, parser="lalr").parse(r.text)  # lark agrees: it parses
    print("lark parses it: yes")

# 2. Your own lark grammar: terminals, rules, %import and %ignore as lark users write them.
dates = guided.Grammar(r"""
    start: date (" to " date)?
    date: YEAR "-" MONTH "-" DAY
    YEAR: /(19|20)[0-9][0-9]/
    MONTH: /0[1-9]|1[0-2]/
    DAY: /0[1-9]|[12][0-9]|3[01]/
""")
t = time.perf_counter()
r = guided.generate(model, tokenizer, "When did the second world war start and end?", dates, max_new_tokens=30)
show("dates", r, time.perf_counter() - t)
print("parse tree:", dates.parse(r.text))


# 3. A recursive pydantic model: its JSON Schema refers to itself, so it compiles
#    through the grammar engine (a regular automaton cannot count nesting).
class Topic(pydantic.BaseModel):
    title: str = pydantic.Field(max_length=40)
    subtopics: list["Topic"] = pydantic.Field(max_length=3)


t = time.perf_counter()
r = guided.generate(model, tokenizer, "Write this outline as JSON with title and subtopics:\n"
                    "Python\n- Basics\n  - Variables\n  - Loops\n- Functions",
                    guided.JsonSchema(Topic, whitespace="compact"), max_new_tokens=120)
show("recursive pydantic model", r, time.perf_counter() - t)
if r.value is not None:
    print("validated instance:", repr(r.value))
else:
    # The schema allows any depth, and a 135M model tends to keep nesting: every
    # prefix it wrote is still valid, it just did not finish in 120 tokens.
    print("(cut at max_new_tokens: the text so far is a valid prefix)")
