"""Drop-in replacements for other libraries' decoding functions, with their names,
arguments and results, computed by nexttok:

- nexttok.compat.flashinfer: FlashInfer's sampling functions (flashinfer.sampling);
- nexttok.compat.xgrammar: XGrammar's apply_token_bitmask_inplace.

Each module needs torch and names the version of the library it follows.
"""
