"""Unit tests of the pure core and settings: table-driven, no I/O."""
