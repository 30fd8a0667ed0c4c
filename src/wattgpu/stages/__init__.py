"""Thin DVC stage entries: parse params, read declared deps, call pure functions, write declared outs."""
