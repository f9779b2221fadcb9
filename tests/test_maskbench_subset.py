"""A fast MaskBench subset: every instance judged as ``jsonschema`` judges it.

Sixty schemas from all categories (chosen among those that compile in well under a
second), with all their valid and invalid instances, written compactly.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from guided.grammars.json_schema.compiler import compile_json_schema

pytestmark = pytest.mark.data

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "maskbench.jsonl.gz"

MASKBENCH_IDS = [
    'BFCL_java_34.json',
    'BFCL_java_49.json',
    'BFCL_java_5.json',
    'BFCL_java_62.json',
    'BFCL_javascript_10.json',
    'BFCL_javascript_18.json',
    'BFCL_javascript_36.json',
    'BFCL_multiple_122.json',
    'BFCL_multiple_152.json',
    'BFCL_multiple_26.json',
    'BFCL_multiple_52.json',
    'BFCL_multiple_63.json',
    'BFCL_multiple_89.json',
    'BFCL_parallel_133.json',
    'BFCL_parallel_150.json',
    'BFCL_parallel_159.json',
    'BFCL_parallel_171.json',
    'BFCL_parallel_34.json',
    'BFCL_parallel_76.json',
    'BFCL_parallel_multiple_112.json',
    'BFCL_parallel_multiple_143.json',
    'BFCL_parallel_multiple_145.json',
    'BFCL_parallel_multiple_162.json',
    'BFCL_parallel_multiple_163.json',
    'BFCL_parallel_multiple_164.json',
    'BFCL_parallel_multiple_28.json',
    'BFCL_parallel_multiple_30.json',
    'BFCL_parallel_multiple_76.json',
    'BFCL_parallel_multiple_85.json',
    'BFCL_parallel_multiple_92.json',
    'BFCL_parallel_multiple_93.json',
    'BFCL_simple_1.json',
    'BFCL_simple_124.json',
    'BFCL_simple_160.json',
    'BFCL_simple_29.json',
    'BFCL_simple_309.json',
    'BFCL_simple_342.json',
    'BFCL_simple_37.json',
    'BFCL_simple_383.json',
    'BFCL_simple_395.json',
    'BFCL_simple_65.json',
    'BFCL_simple_75.json',
    'BFCL_simple_84.json',
    'BFCL_simple_91.json',
    'BFCL_sql_83.json',
    'Github_easy---o88596.json',
    'Github_hard---o84878.json',
    'Github_medium---o21852.json',
    'Github_trivial---o74178.json',
    'Glaiveai2K---calculate_area_2b85f27f.json',
    'JME_12.json',
    'JME_35.json',
    'JME_54.json',
    'JME_77.json',
    'JsonSchemaStore---tsdrc.json',
    'Kubernetes---kb_199_Normalized.json',
    'MCPspec---CancelledNotification.json',
    'Snowplow---sp_368_Normalized.json',
    'Synthesized---draft2019_09_valid_type_id68_subschema1_not_2.json',
    'WashingtonPost---wp_86_Normalized.json',
]


@pytest.fixture(scope="module")
def rows():
    if not DATA.exists():
        pytest.skip(f"MaskBench data not found at {DATA}")
    wanted = set(MASKBENCH_IDS)
    out = {}
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["id"] in wanted:
                out[row["id"]] = row
    return out


@pytest.mark.parametrize("schema_id", MASKBENCH_IDS)
def test_instances_judged_like_jsonschema(rows, schema_id):
    row = rows[schema_id]
    dfa = compile_json_schema(row["schema"], "compact")
    for i, test in enumerate(row["tests"]):
        text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False).encode()
        assert dfa.matches(text) == test["valid"], f"instance {i} (valid={test['valid']}): {text[:200]!r}"
