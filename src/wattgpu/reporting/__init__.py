"""Renderers: markdown, LaTeX, HTML, PNG and console views of numbers computed elsewhere (they compute none)."""
