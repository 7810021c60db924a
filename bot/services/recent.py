"""Services: the images each user ran lately, newest first, for the run form to offer (Redis; an optimisation
only: lost, the form offers the images of the user's pods in the cluster)."""

from __future__ import annotations

import json

from bot.core import ports, runform

RECENT_TTL_SECONDS = 90 * 24 * 3600
"""How long a user's recent images are kept after their last run."""


def recent_key(user: str) -> str:
    return f"recent-images:{user}"


def images(store: ports.Store | None, user: str) -> list[str]:
    """The user's images, newest first; [] when none are kept (an optimisation only: Redis may lose it)."""
    raw = store.recall(recent_key(user)) if store is not None else None
    try:
        kept = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [str(image) for image in kept if isinstance(image, str)] if isinstance(kept, list) else []


def remember(store: ports.Store | None, user: str, image: str) -> None:
    if store is None or not image:
        return
    kept = [image, *(i for i in images(store, user) if i != image)][: runform.RECENT_IMAGES]
    store.remember(recent_key(user), json.dumps(kept), RECENT_TTL_SECONDS)
