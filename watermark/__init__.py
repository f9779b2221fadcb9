"""Red-green watermarking and its detector (see the open issues).

Nothing is exported yet; the package exists so the distribution's layout is fixed.
"""
