"""Services: `/gpu` alone opens the run form; its submission is checked, then run as `/gpu run` is.

The form offers the GPU types with their price and what is free now (read from the informers' caches, so
it opens within the trigger's 3 seconds), and the user's recent images first. A submission with a mistake
stays open with the mistake under its field; a good one closes and is carried out by the launcher, with the
modal's id as the request id, so a redelivered submission starts one run.
"""

from __future__ import annotations

import logging

from bot.core import errors, models, notices, ports, runform, status
from bot.services import launcher, recent

logger = logging.getLogger(__name__)


class RunForms:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: ports.Chat,
        settings: launcher.LaunchSettings,
        runs: launcher.Launcher,
        *,
        store: ports.Store | None = None,
    ) -> None:
        self._cluster = cluster
        self._chat = chat_port
        self._settings = settings
        self._runs = runs
        self._store = store

    def open(self, user: str, channel: str, trigger_id: str) -> None:
        """Open the form for `user`, whose run's thread goes to `channel`; if Slack will not open it, say
        how to run from the command line instead."""
        try:
            self._chat.open_form(trigger_id, self.form(user, channel))
        except errors.GpubotError as err:
            logger.warning("the run form could not be opened for %s: %s", user, err)
            text = (
                "The run form could not be opened (Slack said no in time). Type the run instead: "
                "`/gpu run IMAGE --gpus 1 -- command`; `/gpu help run` lists the options."
            )
            self._chat.ephemeral(channel, user, notices.Ephemeral(text))

    def form(self, user: str, channel: str) -> runform.RunForm:
        settings = self._settings
        everything = self._cluster.list_workloads()
        mine = sorted(
            (w for w in everything if w.owner_id == user),
            key=lambda w: w.created_at.timestamp() if w.created_at else 0.0,
            reverse=True,
        )
        free = status.free_gpus(self._cluster.list_nodes(), everything, settings.profiles.values())
        return runform.build_form(
            channel,
            settings.profiles,
            settings.default_profile,
            free=free,
            recent_images=[w.image for w in mine] + recent.images(self._store, user),
            policy=settings.policy,
        )

    def check(self, fields: runform.Submitted) -> models.RunRequest | dict[str, str]:
        """What the submission asks for, or each field's mistake; configuration only, no cluster call."""
        settings = self._settings
        return runform.check(
            fields,
            profiles=settings.profiles,
            default_profile=settings.default_profile,
            policy=settings.policy,
        )

    def submit(self, request: models.RunRequest, owner: models.Owner, channel: str, view_id: str) -> None:
        """The slow half of a good submission: exactly `/gpu run`, once per modal."""
        self._runs.handle(request, owner, channel, request_id=f"form-{view_id}")
