"""Slack's external file upload, as `WebClient.files_upload_v2` drives it, and files.info.

The flow (docs.slack.dev/reference/methods/files.getUploadURLExternal, "Usage info"): the app asks for an
upload URL and a file id, POSTs the bytes (raw or multipart) to that URL, then calls
files.completeUploadExternal (docs.slack.dev/reference/methods/files.completeUploadExternal) with the ids and
titles and where to share them. Sharing posts one message per conversation carrying the files, with
`initial_comment` as its text. Error names come from those pages' error tables (as scraped in
slack-ruby/slack-api-ref `methods/files/*.json`) unless a comment says otherwise.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import re
import time
import uuid
from typing import Any

from sim.slack.transcript import Json, Message, Share, StoredFile, Workspace
from sim.slack.webapi import (
    Context,
    Method,
    Params,
    SlackError,
    blocks_param,
    text_param,
    thread_param,
    writable,
)

logger = logging.getLogger(__name__)

UPLOAD_PATH = "/upload/v1/"
PRIVATE_PATH = "/files-pri/"
MAX_ALT_TXT = 1000
"""alt_txt_too_large: "longer than the limit of 1000 character" (files.getUploadURLExternal errors)."""
MAX_SNIPPET_BYTES = 1024 * 1024
"""snippet_too_large: snippets "are limited to 1MB" (files.getUploadURLExternal errors)."""
CHANNEL_ID_PREFIXES = ("C", "G", "D", "Z")
"""channel_id must match `^[CGDZ][A-Z0-9]{8,}$`, else invalid_arguments (Slack's answer quoted in
slackapi/bolt-js#2115); the emulator's ids have underscores, so only the prefix is checked."""

FILETYPES: dict[str, tuple[str, str, str]] = {
    # extension → (filetype, pretty_type, mimetype), as Slack labels the common text and image types
    ".txt": ("text", "Plain Text", "text/plain"),
    ".log": ("text", "Plain Text", "text/plain"),
    ".json": ("json", "JSON", "application/json"),
    ".csv": ("csv", "CSV", "text/csv"),
    ".yaml": ("yaml", "YAML", "text/plain"),
    ".yml": ("yaml", "YAML", "text/plain"),
    ".py": ("python", "Python", "text/plain"),
    ".md": ("markdown", "Markdown (raw)", "text/plain"),
    ".png": ("png", "PNG", "image/png"),
    ".pdf": ("pdf", "PDF", "application/pdf"),
}


# -- the three calls ----------------------------------------------------------------------------
def get_upload_url(ctx: Context, params: Params) -> Json:
    """files.getUploadURLExternal: reserve a file id and an opaque upload URL."""
    ws = ctx.workspace
    filename = text_param(params, "filename")
    if not filename:
        raise _invalid("missing required field: filename")
    length = _length_param(params)
    alt_txt, snippet_type = text_param(params, "alt_txt"), text_param(params, "snippet_type")
    if len(alt_txt) > MAX_ALT_TXT:
        raise SlackError("alt_txt_too_large")
    if snippet_type and length > MAX_SNIPPET_BYTES:
        raise SlackError("snippet_too_large")
    if length > ctx.max_file_bytes:
        raise SlackError("file_upload_size_restricted")
    stored = StoredFile(
        id=f"F{len(ws.files) + 1:09d}",
        name=filename,
        declared_length=length,
        user=ws.identity.bot_user_id,
        created=int(time.time()),
        ticket=uuid.uuid4().hex,
        alt_txt=alt_txt,
        snippet_type=snippet_type,
    )
    ws.files[stored.id] = stored
    return {"upload_url": f"{ctx.base_url()}{UPLOAD_PATH}{stored.ticket}", "file_id": stored.id}


def accept_upload(ws: Workspace, ticket: str, data: bytes) -> tuple[int, str]:
    """The POST to an upload URL: (HTTP status, body). "Slack will return HTTP 200 if the upload is
    successful" (files.getUploadURLExternal, "Usage info"), and the status is all slack_sdk checks
    (`files_upload_v2` raises SlackRequestError on any other). The body, `OK - <bytes>`, is what Slack is
    reported to send; the docs do not show it and nothing reads it."""
    stored = next((f for f in ws.files.values() if f.ticket == ticket), None)
    if stored is None:
        return 404, "Not Found"  # emulator's choice: Slack does not document an unknown ticket
    if stored.completed:
        return 400, "upload already completed"  # emulator's choice, likewise undocumented
    if len(data) != stored.declared_length:
        # Slack does not document a length mismatch; the bytes are kept and `size` reports what arrived.
        logger.warning("upload %s: %d bytes, announced %d", stored.id, len(data), stored.declared_length)
    stored.content = data
    return 200, f"OK - {len(data)}"


def complete_upload(ctx: Context, params: Params) -> Json:
    """files.completeUploadExternal: title the uploaded files and share them where asked."""
    ws = ctx.workspace
    entries = _files_param(params)
    stored = [_uploaded(ws, str(entry["id"])) for entry in entries]
    destinations = _destinations(ctx, params)
    comment = text_param(params, "initial_comment")
    blocks = [] if comment else blocks_param(params)  # "If the initial_comment field is provided, the
    # blocks field is ignored" (files.completeUploadExternal, `blocks`)
    for entry, upload in zip(entries, stored, strict=True):
        upload.title = str(entry.get("title") or upload.title or upload.name)
        upload.completed = True
    shown = [file_to_api(ctx, upload) for upload in stored]
    ident = ws.identity
    for channel_id in destinations:
        thread_ts = thread_param(ws, channel_id, text_param(params, "thread_ts"))
        message = Message(
            channel=channel_id,
            ts=ws.clock.next(),
            text=comment,
            blocks=blocks,
            user=ident.bot_user_id,
            bot_id=ident.bot_id,
            thread_ts=thread_ts,
            files=shown,
        )
        for upload in stored:
            upload.shares.append(Share(channel_id, message.ts, thread_ts))
        ws.post(message)
    return {"files": [file_to_api(ctx, upload) for upload in stored]}


def files_info(ctx: Context, params: Params) -> Json:
    """files.info: a completed file; `file_not_found` ("Value passed for file was invalid") otherwise."""
    stored = ctx.workspace.files.get(text_param(params, "file"))
    if stored is None or not stored.completed:
        raise SlackError("file_not_found")
    return {"file": file_to_api(ctx, stored), "comments": [], "response_metadata": {"next_cursor": ""}}


METHODS: dict[str, Method] = {
    "files.getUploadURLExternal": get_upload_url,
    "files.completeUploadExternal": complete_upload,
    "files.info": files_info,
}


# -- reading back -------------------------------------------------------------------------------
def private_content(ws: Workspace, path_file: str) -> bytes | None:
    """The bytes behind a `url_private` path segment `<team>-<file id>`, once the upload is complete."""
    stored = ws.files.get(path_file.rpartition("-")[2])
    return stored.content if stored is not None and stored.completed else None


def file_to_api(ctx: Context, stored: StoredFile) -> Json:
    """The file object, with the fields slack_sdk users read (docs.slack.dev files.info example)."""
    ident = ctx.workspace.identity
    filetype, pretty_type, mimetype = _types(stored)
    slug = _slug(stored.name)
    private = f"{ctx.base_url()}{PRIVATE_PATH}{ident.team_id}-{stored.id}"
    channels = [s.channel for s in stored.shares]
    body: Json = {
        "id": stored.id,
        "created": stored.created,
        "timestamp": stored.created,
        "name": stored.name,
        "title": stored.title or stored.name,
        "mimetype": mimetype,
        "filetype": filetype,
        "pretty_type": pretty_type,
        "user": stored.user,
        "user_team": ident.team_id,
        "editable": bool(stored.snippet_type),
        "size": stored.size,
        "mode": "snippet" if stored.snippet_type else "hosted",
        "is_external": False,
        "external_type": "",
        "is_public": any(c.startswith("C") for c in channels),
        "public_url_shared": False,
        "display_as_bot": False,
        "username": "",
        "url_private": f"{private}/{slug}",
        "url_private_download": f"{private}/download/{slug}",
        "permalink": f"https://{ident.team_domain}.slack.com/files/{stored.user}/{stored.id}/{slug}",
        "channels": _unique(c for c in channels if c.startswith("C")),
        "groups": _unique(c for c in channels if c.startswith("G")),
        "ims": _unique(c for c in channels if c.startswith("D")),
        "shares": _shares(ctx.workspace, stored),
        "comments_count": 0,
        "file_access": "visible",
        "has_rich_preview": False,
        "media_display_type": "unknown",
    }
    if stored.alt_txt:
        body["alt_txt"] = stored.alt_txt
    return body


# -- parameters ---------------------------------------------------------------------------------
def _invalid(detail: str) -> SlackError:
    """invalid_arguments, with the detail in `response_metadata.messages` as Slack words it."""
    return SlackError("invalid_arguments", response_metadata={"messages": [f"[ERROR] {detail}"]})


def _length_param(params: Params) -> int:
    raw = params.get("length")
    if raw is None or raw == "":
        raise _invalid("missing required field: length")
    try:
        length = int(str(raw))
    except ValueError as exc:
        raise _invalid("length must be an integer") from exc
    if length == 0:
        raise SlackError("missing_argument")  # "Typically only occurs when the length provided is 0."
    if length < 0:
        raise _invalid("length must be positive")
    return length


def _files_param(params: Params) -> list[Json]:
    raw: Any = params.get("files")
    if raw is None or raw == "":
        raise _invalid("missing required field: files")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise _invalid("files must be a JSON array") from exc
    if not isinstance(raw, list) or not raw:
        raise _invalid("files must be a non-empty array")
    if not all(isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"] for e in raw):
        raise _invalid("each entry of files needs an id")
    return raw


def _uploaded(ws: Workspace, file_id: str) -> StoredFile:
    """file_not_found: "Could not find the file from the upload ticket" — an unknown id, bytes never
    POSTed, or a ticket already completed."""
    stored = ws.files.get(file_id)
    if stored is None or stored.content is None or stored.completed:
        raise SlackError("file_not_found")
    return stored


def _destinations(ctx: Context, params: Params) -> list[str]:
    """`channel_id` plus `channels` (channel ids, or user ids meaning their DMs), checked before anything
    is shared, by chat.postMessage's own check (`webapi.writable`): invalid_channel ("Channel could not be
    found or channel specified is invalid") for an unknown, deleted or invisible private channel, and
    not_in_channel where the bot has not joined (what completeUploadExternal answers then, e.g.
    getnao/nao#1372; the docs' table lists only the generic no_permission). An archived channel answers
    is_archived as chat.postMessage does: the emulator's choice, the files pages name no error for it."""
    ws = ctx.workspace
    refs: list[str] = []
    channel_id = text_param(params, "channel_id")
    if channel_id:
        if not channel_id.startswith(CHANNEL_ID_PREFIXES):
            raise _invalid("input must match regex pattern: ^[CGDZ][A-Z0-9]{8,}$ [json-pointer:/channel_id]")
        refs.append(channel_id)
    refs.extend(ref.strip() for ref in text_param(params, "channels").split(",") if ref.strip())
    found: list[str] = []
    for ref in refs:
        channel = ws.channels.get(ref)
        if channel is None and ref in ws.users and not ws.users[ref].is_bot:
            channel = ws.open_dm(ref)
        channel_id = writable(
            None if channel is None or channel.deleted else channel, unknown="invalid_channel"
        )
        if channel_id not in found:
            found.append(channel_id)
    return found


# -- presentation -------------------------------------------------------------------------------
def _types(stored: StoredFile) -> tuple[str, str, str]:
    dot = stored.name.rfind(".")
    ext = stored.name[dot:].lower() if dot > 0 else ""
    filetype, pretty_type, mimetype = FILETYPES.get(ext, ("", "", ""))
    if not filetype:
        guessed = mimetypes.guess_type(stored.name)[0] or "application/octet-stream"
        filetype, pretty_type, mimetype = (ext[1:] or "binary"), (ext[1:].upper() or "Binary"), guessed
    if stored.snippet_type:
        filetype = stored.snippet_type
    return filetype, pretty_type, mimetype


def _slug(name: str) -> str:
    """The file name as it appears in Slack's file URLs: lower case, other characters as `_`."""
    return re.sub(r"[^a-z0-9._-]+", "_", name.lower()) or "file"


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))


def _shares(ws: Workspace, stored: StoredFile) -> Json:
    shares: Json = {}
    for share in stored.shares:
        channel = ws.channels.get(share.channel)
        kind = "public" if share.channel.startswith("C") else "private"
        entry: Json = {
            "ts": share.ts,
            "channel_name": channel.name if channel else share.channel,
            "team_id": ws.identity.team_id,
            "share_user_id": stored.user,
        }
        if share.thread_ts:
            entry["thread_ts"] = share.thread_ts
        shares.setdefault(kind, {}).setdefault(share.channel, []).append(entry)
    return shares
