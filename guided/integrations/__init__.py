"""guided inside serving engines: ``guided.integrations.vllm`` (needs vLLM installed).

``guided.integrations.requests`` reads a request's constraint from its per-request
arguments and does not import any engine.
"""
