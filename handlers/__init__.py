"""Thin Slack listeners: parse, authorise, call the core, render."""
