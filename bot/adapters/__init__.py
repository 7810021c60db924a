"""Adapters: each module talks to one external system and implements a port from `bot.core.ports`."""
