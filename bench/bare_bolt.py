"""The P1 baseline: a bare Bolt app whose `/gpu` listener only acks, set up as gpubot sets up its own.

Same Socket Mode handler and the same `process_before_response=True` (acks on the request's thread), so the
difference in ack latency is gpubot's own work. Run by `bench.ack_latency` as its own process, with the bot's
Slack environment (tokens, SLACK_API_URL).
"""

from __future__ import annotations

import os

from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler
from slack_sdk import WebClient


def ack_only(ack: Ack) -> None:
    ack()


def main() -> None:
    client = WebClient(token=os.environ["SLACK_BOT_TOKEN"], base_url=os.environ["SLACK_API_URL"])
    app = App(client=client, process_before_response=True)
    app.command("/gpu")(ack_only)
    SocketModeHandler(app, os.environ["SLACK_APP_TOKEN"]).start()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
