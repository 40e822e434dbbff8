"""Evaluation harness: replay transcripts against a simulated provider and prompt cache."""
