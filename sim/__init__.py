"""Embedded defaults: a simulated GPU cluster and a Slack emulator, spoken to only over the wire."""
