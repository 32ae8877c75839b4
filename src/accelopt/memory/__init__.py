"""Optimization memory: lessons learned from slow→fast kernel pairs."""
