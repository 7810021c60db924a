"""What came of handing one user action to the app: acked or not, with what response, after how many tries."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sim.slack.transcript import Json

SOCKET_MODE = "socket_mode"
HTTP = "http"


@dataclass(frozen=True)
class Delivery:
    type: str
    """`slash_commands`, `interactive` or `events_api`."""
    payload: Json
    transport: str
    acked: bool
    ack_payload: Json | None = None
    """Socket Mode: the ack's `payload`; HTTP: the response body (JSON, or `{"text": body}`)."""
    envelope_ids: tuple[str, ...] = ()
    attempts: int = 1
    status: int = 0
    """HTTP mode: the app's response status."""
    error: str = ""
    """`timeout`, `no_connection`, `http_<status>` or `connection_failed` when not acked."""
    seconds: float = 0.0
    """From the first delivery to the ack (or to giving up)."""
    ack_seconds: float = 0.0
    """Socket Mode: from sending the last envelope (the only one for commands and clicks) to reading the
    ack off the socket; what an app's ack latency is, without the wait for a connection."""
    shown: str = ""
    """What the user saw of the ack: `ephemeral`, `in_channel`, `nothing`, or Slack's own error notice."""

    def to_dict(self) -> Json:
        return asdict(self)
