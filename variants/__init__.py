"""Optimized variants of an extractive question-answering transformer, side by side."""
