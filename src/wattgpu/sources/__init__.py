"""Measurement sources: each adapter reads one raw dataset folder into the raw tidy schema (`schema.py`); the
registry of adapters is `adapters.ADAPTERS`."""
