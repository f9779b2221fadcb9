"""Spec compilers above regex: JSON Schema and lark grammars (see the open issues).

Nothing is exported yet; the package exists so the distribution's layout is fixed.
"""
