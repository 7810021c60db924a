"""The pure core: frozen dataclasses in, decisions out; no I/O, no clock, no vendor SDKs (import-linter)."""
