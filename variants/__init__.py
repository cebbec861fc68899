"""Optimized variants of an extractive question-answering transformer, side by side."""

from variants.core.config import openmp_spin

openmp_spin()  # before anything imports torch: the app, the CLI and the bench then time PyTorch alike
