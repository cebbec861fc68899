"""Experiments apart from the product: one-off probes and the recipe choosers, each a command
(``python -m experiments.NAME --help``) that writes one JSON record into ``experiments/records/``.

They import the product (:mod:`variants`); nothing in the product imports them (import-linter checks it).
"""
