"""Adapters: the HTTP server under both of gpubot's listening ports (Slack's HTTP mode, the probes).

The stdlib's ThreadingMixIn gives every connection a thread of its own, and its sockets no timeout: 1,500
connections that never finished their headers held 1,510 threads and file handles (issue 21). Here a
fixed pool of workers serves connections from a bounded queue, and a connection that finds every worker
busy and the queue full is answered 503 and closed on the accepting thread, at once. Every read has a
deadline: the request line and headers within `header_timeout_seconds` of the accept (and at most
MAX_HEADER_BYTES of them), the body within `body_timeout_seconds` after them. A client that misses one
is disconnected, so a client holds a worker for the two timeouts at most, then for the handler, the
writing of its answer (each send bounded by the body timeout) and LINGER_SECONDS.
"""

from __future__ import annotations

import http.client
import http.server
import io
import logging
import queue
import socket
import socketserver
import sys
import threading
import time
from typing import TYPE_CHECKING, Any
from wsgiref import simple_server

from bot.settings import HttpLimits

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

logger = logging.getLogger(__name__)

MAX_HEADER_BYTES = 64 * 1024
"""Request line and headers together; Slack's are under 2 KB. The stdlib alone allows 100 lines of 64 KiB."""
LINGER_SECONDS = 2.0
"""How long a worker reads and discards what a client still sends after its answer (a body refused
unread, say) before closing: closing with bytes unread makes the kernel reset the connection, and the
client may lose the answer it was sent (nginx's lingering close does the same)."""
LISTEN_BACKLOG = 512
"""Connections the kernel has completed and the accepting thread has not taken yet; they cost gpubot no
thread or file handle. Past it the kernel drops new SYNs and clients retry a second later; socketserver's
default of 5 made even a short burst of genuine requests wait that second."""
SHED_REPORT_SECONDS = 10.0
"""Connections shed are logged as one count at most this often, so a flood does not flood the log too."""
SHED_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)
_QUIET_ERRORS = (TimeoutError, ConnectionError, http.client.HTTPException)
"""A client too slow, gone or too wordy: its connection is closed, and that is all there is to say."""


class HeadersTooLarge(http.client.HTTPException):
    """More than MAX_HEADER_BYTES before the end of the headers (answered 431 by the stdlib's parser)."""


class DeadlineReader(io.RawIOBase):
    """A socket's reading end where each read waits only until `due` (monotonic seconds), and reads at
    most `budget` bytes in all while it is not None. After each read the socket's timeout goes back to
    `write_timeout`, which bounds writing the answer."""

    def __init__(self, connection: socket.socket, *, due: float, budget: int | None, write_timeout: float):
        super().__init__()
        self.connection = connection
        self.due = due
        self.budget = budget
        self.write_timeout = write_timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self.due - time.monotonic()
        if left <= 0:
            raise TimeoutError("read deadline passed")
        view = memoryview(buffer).cast("B")
        if self.budget is not None:
            if self.budget <= 0:
                raise HeadersTooLarge(f"more than {MAX_HEADER_BYTES} bytes of request line and headers")
            view = view[: self.budget]
        self.connection.settimeout(left)
        try:
            count = self.connection.recv_into(view)
        finally:
            self.connection.settimeout(self.write_timeout)
        if self.budget is not None:
            self.budget -= count
        return count


class BoundedServer(socketserver.TCPServer):
    """In place of socketserver.ThreadingMixIn: `limits.workers` threads, `limits.queue` connections
    waiting for them, the rest shed; a base before http.server's or wsgiref's server class."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[DeadlineHandlerMixIn],
        *,
        limits: HttpLimits,
        name: str,
    ) -> None:
        self.limits, self.name = limits, name
        self.request_queue_size = LISTEN_BACKLOG
        self._waiting: queue.SimpleQueue[tuple[socket.socket, Any, float] | None] = queue.SimpleQueue()
        self._places = threading.Semaphore(limits.workers + limits.queue)
        self._current = threading.local()
        self._shed_since_report = 0
        self._next_shed_report = 0.0
        super().__init__(address, handler)  # binds and listens, or closes and raises
        for number in range(limits.workers):
            threading.Thread(target=self._work, name=f"{name}-{number}", daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:  # a socket, for TCP
        """On the accepting thread: queue the connection for a worker, or shed it without waiting."""
        if not self._places.acquire(blocking=False):
            self._shed(request)
            return
        self._waiting.put((request, client_address, time.monotonic()))

    def headers_due(self) -> float:
        """When the connection the calling worker serves must have sent its headers by."""
        due: float = self._current.headers_due
        return due

    def server_close(self) -> None:
        super().server_close()
        while True:  # connections still waiting will not be served
            try:
                waiting = self._waiting.get_nowait()
            except queue.Empty:
                break
            if waiting is not None:
                waiting[0].close()
        for _ in range(self.limits.workers):
            self._waiting.put(None)  # workers still serving a request finish it, then stop

    def _work(self) -> None:
        while (waiting := self._waiting.get()) is not None:
            request, client_address, accepted = waiting
            self._current.headers_due = accepted + self.limits.header_timeout_seconds
            answered = False
            try:
                if time.monotonic() < self._current.headers_due:  # else its time ran out in the queue
                    self.finish_request(request, client_address)
                    answered = True
            except Exception:
                self.handle_error(request, client_address)
            finally:
                if answered:
                    close_lingering(request)
                else:
                    request.close()
                self._places.release()

    def _shed(self, request: socket.socket) -> None:
        try:
            request.setblocking(False)
            request.send(SHED_ANSWER)
        except OSError:
            pass  # its buffer is full or it is gone: closing is answer enough
        request.close()
        self._shed_since_report += 1
        now = time.monotonic()
        if now >= self._next_shed_report:
            logger.warning(
                "%s: all %d workers busy and %d connections waiting: shed %d connection(s) with 503",
                self.name,
                self.limits.workers,
                self.limits.queue,
                self._shed_since_report,
            )
            self._shed_since_report, self._next_shed_report = 0, now + SHED_REPORT_SECONDS

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, _QUIET_ERRORS):
            logger.debug("%s: closed the connection from %s: %r", self.name, client_address[0], error)
        else:
            logger.exception("%s: a request from %s failed", self.name, client_address[0])


def close_lingering(connection: socket.socket) -> None:
    """Half-close after the answer, discard for up to LINGER_SECONDS what the client still sends, close."""
    try:
        connection.shutdown(socket.SHUT_WR)
        connection.setblocking(False)
        try:
            unread = bool(connection.recv(1, socket.MSG_PEEK))
        except BlockingIOError:
            unread = False  # nothing unread: closing now sends no reset
        discard = bytearray(64 * 1024)
        give_up = time.monotonic() + LINGER_SECONDS
        while unread and (left := give_up - time.monotonic()) > 0:
            connection.settimeout(left)
            unread = connection.recv_into(discard) > 0
    except OSError:
        pass  # reset, timed out or already gone
    finally:
        connection.close()


class DeadlineHandlerMixIn(http.server.BaseHTTPRequestHandler):
    """Reads with its BoundedServer's deadlines; a base before http.server's or wsgiref's handler class."""

    server: BoundedServer

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the stdlib's reader, without deadlines; the socket stays open
        self._reader = DeadlineReader(
            self.connection,
            due=self.server.headers_due(),
            budget=MAX_HEADER_BYTES,
            write_timeout=self.server.limits.body_timeout_seconds,
        )
        self.rfile = io.BufferedReader(self._reader)

    def parse_request(self) -> bool:
        """Read the headers; from here the body's deadline holds, and its size is the application's call."""
        parsed = super().parse_request()
        self._reader.due = time.monotonic() + self.server.limits.body_timeout_seconds
        self._reader.budget = None
        return parsed


class BoundedWSGIServer(BoundedServer, simple_server.WSGIServer):
    """wsgiref's server with the pool, the queue and the deadlines; its handler reads with the deadlines."""


class BoundedHTTPServer(BoundedServer, http.server.HTTPServer):
    """http.server's server with the pool, the queue and the deadlines."""
