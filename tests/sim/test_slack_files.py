"""File uploads against the real `WebClient.files_upload_v2` on loopback: the three-step external upload,
its message in the conversation or thread, files.info, url_private, and Slack's error codes.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sim.slack import render
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack

pytestmark = pytest.mark.usefixtures("slack_env")

LOG = "".join(f"2024-05-01T10:00:{i % 60:02d}Z step {i}: loss=0.{i:04d}\n" for i in range(400))


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False),
        channels=(("C_GPU", "gpu-users"), ("C_SECRET", "secret")),
        uninvited=frozenset({"C_SECRET"}),
        max_file_bytes=4096,
    )
    with BackgroundSlack(config) as running:
        yield running


@pytest.fixture
def client(slack: BackgroundSlack) -> WebClient:
    return WebClient(token=slack.bot_token, base_url=slack.api_url)


def api_error(call: Any) -> str:
    with pytest.raises(SlackApiError) as raised:
        call()
    return str(raised.value.response["error"])


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post(url: str, data: bytes, content_type: str = "application/octet-stream") -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# -- the happy paths through files_upload_v2 ------------------------------------------------------
def test_content_upload_to_a_dm_opened_with_conversations_open(
    slack: BackgroundSlack, client: WebClient
) -> None:
    dm = client.conversations_open(users="U_ALICE")["channel"]["id"]
    small = LOG[:3000]
    answer = client.files_upload_v2(
        channel=dm, content=small, filename="nb-0.log", title="Logs of nb-0", initial_comment="Your pod's log"
    )
    shared = answer["file"]
    assert shared["name"] == "nb-0.log" and shared["title"] == "Logs of nb-0"
    assert (shared["size"], shared["mimetype"], shared["filetype"]) == (3000, "text/plain", "text")
    assert shared["user"] == "U_GPUBOT" and shared["ims"] == [dm] and isinstance(shared["created"], int)
    assert slack.file_content(shared["id"]) == small.encode()
    [message] = slack.messages(dm)
    assert message["text"] == "Your pod's log" and message["user"] == "U_GPUBOT"
    assert message["files"] == [
        {"id": shared["id"], "name": "nb-0.log", "title": "Logs of nb-0", "size": 3000,
         "mimetype": "text/plain", "filetype": "text"},
    ]  # fmt: skip
    history = client.conversations_history(channel=dm)["messages"]
    assert history[0]["files"][0]["id"] == shared["id"] and history[0]["upload"] is True
    [upload_call] = slack.calls("files.getUploadURLExternal")
    assert upload_call.params["length"] == "3000"


def test_file_path_upload_into_a_thread(slack: BackgroundSlack, client: WebClient, tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_bytes(b"epoch 1\nepoch 2\n")
    parent = client.chat_postMessage(channel="C_GPU", text="Job 42 running")
    reply = client.chat_postMessage(channel="C_GPU", text="node ready", thread_ts=parent["ts"])
    answer = client.files_upload_v2(channel="C_GPU", file=str(path), thread_ts=reply["ts"])
    shared = answer["file"]
    assert shared["name"] == "train.log" and shared["title"] == "train.log", "slack_sdk defaults both"
    assert slack.file_content(shared["id"]) == b"epoch 1\nepoch 2\n"
    thread = client.conversations_replies(channel="C_GPU", ts=parent["ts"])["messages"]
    assert [m.get("files", [{}])[0].get("id") for m in thread] == [None, None, shared["id"]]
    assert thread[2]["thread_ts"] == parent["ts"], "a reply's ts names its parent's thread"
    assert thread[2]["text"] == ""
    assert [m["ts"] for m in client.conversations_history(channel="C_GPU")["messages"]] == [parent["ts"]]
    share = client.files_info(file=shared["id"])["file"]["shares"]["public"]["C_GPU"][0]
    assert (share["ts"], share["thread_ts"]) == (thread[2]["ts"], parent["ts"])


def test_upload_without_a_thread_posts_to_the_channel(slack: BackgroundSlack, client: WebClient) -> None:
    answer = client.files_upload_v2(channel="C_GPU", content=b"\x00\x01binary", filename="core.bin")
    history = client.conversations_history(channel="C_GPU")["messages"]
    assert [m["files"][0]["id"] for m in history] == [answer["file"]["id"]]
    assert "thread_ts" not in history[0]
    assert slack.file_content(answer["file"]["id"]) == b"\x00\x01binary"


def test_files_info_and_url_private(slack: BackgroundSlack, client: WebClient) -> None:
    shared = client.files_upload_v2(channels=["U_BOB"], content="hello\n", filename="Pod Log.txt")["file"]
    info = client.files_info(file=shared["id"])["file"]
    assert (info["id"], info["size"], info["title"], info["ims"]) == (
        shared["id"],
        6,
        "Pod Log.txt",
        ["D_BOB"],
    )
    assert info["url_private"].endswith("/pod_log.txt")
    assert get(info["url_private"], slack.bot_token) == (200, b"hello\n")
    assert get(info["url_private_download"], slack.bot_token) == (200, b"hello\n")
    assert get(info["url_private"])[0] == 403
    assert api_error(lambda: client.files_info(file="F999999999")) == "file_not_found"


def test_transcript_shows_a_file_card_not_its_content(slack: BackgroundSlack, client: WebClient) -> None:
    dm = client.conversations_open(users="U_ALICE")["channel"]["id"]
    client.files_upload_v2(
        channel=dm, content=LOG[:2048], filename="nb-0.log", title="nb-0 log", initial_comment="Here"
    )
    client.files_upload_v2(channel=dm, content="x" * 10, filename="bare.txt")
    text = slack.render_text()
    assert "Here\n      [file: nb-0.log (2.0 KB) — nb-0 log]" in text
    assert "gpubot:\n      [file: bare.txt (10 B)]" in text
    assert "loss=" not in text, "the file's lines are not dumped"
    assert render.human_size(3 * 1024 * 1024) == "3.0 MB"


# -- the three calls by hand ----------------------------------------------------------------------
def test_upload_url_accepts_multipart_and_answers_ok_with_the_length(
    slack: BackgroundSlack, client: WebClient
) -> None:
    ticket = client.files_getUploadURLExternal(filename="a.txt", length=5)
    assert ticket["upload_url"].startswith(slack.url + "/upload/v1/") and ticket["file_id"].startswith("F")
    boundary = "b0undary"
    form = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="filename"; filename="a.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
    ).encode()
    assert post(ticket["upload_url"], form, f"multipart/form-data; boundary={boundary}") == (200, "OK - 5")
    assert slack.file_content(ticket["file_id"]) == b"hello"
    assert post(slack.url + "/upload/v1/nope", b"x")[0] == 404


def test_a_length_mismatch_is_recorded_with_the_bytes_that_arrived(
    slack: BackgroundSlack, client: WebClient
) -> None:
    ticket = client.files_getUploadURLExternal(filename="a.txt", length=3)
    assert post(ticket["upload_url"], b"hello") == (200, "OK - 5")
    done = client.files_completeUploadExternal(files=[{"id": ticket["file_id"], "title": "a"}])
    assert done["files"][0]["size"] == 5
    [stored] = slack.transcript()["files"]
    assert (stored["declared_length"], stored["size"], stored["shares"]) == (3, 5, [])


def test_complete_without_a_channel_keeps_the_file_private(slack: BackgroundSlack, client: WebClient) -> None:
    ticket = client.files_getUploadURLExternal(filename="a.txt", length=2)
    post(ticket["upload_url"], b"hi")
    done = client.files_completeUploadExternal(files=[{"id": ticket["file_id"]}])
    assert done["files"][0]["title"] == "a.txt" and done["files"][0]["channels"] == []
    assert all(not c["messages"] for c in slack.transcript()["channels"])


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"length": 5}, "invalid_arguments"),
        ({"filename": "a.txt"}, "invalid_arguments"),
        ({"filename": "a.txt", "length": "many"}, "invalid_arguments"),
        ({"filename": "a.txt", "length": 0}, "missing_argument"),
        ({"filename": "a.txt", "length": 4097}, "file_upload_size_restricted"),
        ({"filename": "a.txt", "length": 5, "alt_txt": "x" * 1001}, "alt_txt_too_large"),
    ],
)
def test_get_upload_url_errors(client: WebClient, params: dict[str, Any], error: str) -> None:
    assert api_error(lambda: client.api_call("files.getUploadURLExternal", params=params)) == error


def test_snippet_over_one_megabyte_is_refused() -> None:
    with BackgroundSlack(SlackConfig(rate_limits=RateLimitConfig(enabled=False))) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
        params = {"filename": "a.py", "length": 1024 * 1024 + 1, "snippet_type": "python"}
        assert (
            api_error(lambda: client.api_call("files.getUploadURLExternal", params=params))
            == "snippet_too_large"
        )


def test_missing_argument_detail_is_in_response_metadata(client: WebClient) -> None:
    with pytest.raises(SlackApiError) as raised:
        client.api_call("files.getUploadURLExternal", params={"length": 5})
    assert raised.value.response["response_metadata"]["messages"] == [
        "[ERROR] missing required field: filename"
    ]


def test_files_upload_v2_surfaces_the_size_limit(client: WebClient) -> None:
    assert api_error(lambda: client.files_upload_v2(channel="C_GPU", content=LOG, filename="big.log")) == (
        "file_upload_size_restricted"
    )


def test_complete_refuses_unknown_and_not_yet_uploaded_files(
    slack: BackgroundSlack, client: WebClient
) -> None:
    complete = client.files_completeUploadExternal
    assert (
        api_error(lambda: complete(files=[{"id": "F404", "title": "x"}], channel_id="C_GPU"))
        == "file_not_found"
    )
    ticket = client.files_getUploadURLExternal(filename="a.txt", length=2)
    pending = [{"id": ticket["file_id"], "title": "x"}]
    assert api_error(lambda: complete(files=pending, channel_id="C_GPU")) == "file_not_found"
    post(ticket["upload_url"], b"hi")
    complete(files=pending, channel_id="C_GPU")
    assert api_error(lambda: complete(files=pending, channel_id="C_GPU")) == "file_not_found", "ticket used"
    assert post(ticket["upload_url"], b"hi")[0] == 400
    assert len(slack.messages("C_GPU")) == 1


@pytest.mark.parametrize(
    ("destination", "error"),
    [
        ({"channel_id": "C_NOPE"}, "invalid_channel"),
        ({"channel_id": "U_ALICE"}, "invalid_arguments"),
        ({"channel_id": "C_SECRET"}, "not_in_channel"),
        ({"channels": ["C_GPU", "C_NOPE"]}, "invalid_channel"),
    ],
)
def test_complete_refuses_where_the_bot_cannot_post(
    slack: BackgroundSlack, client: WebClient, destination: dict[str, Any], error: str
) -> None:
    ticket = client.files_getUploadURLExternal(filename="a.txt", length=2)
    post(ticket["upload_url"], b"hi")
    files = [{"id": ticket["file_id"], "title": "x"}]
    assert api_error(lambda: client.files_completeUploadExternal(files=files, **destination)) == error
    assert not slack.messages("C_GPU"), "nothing is shared when one destination is refused"
    client.files_completeUploadExternal(files=files, channel_id="C_GPU")  # the ticket is still usable


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"archived": True}, "is_archived"),
        ({"deleted": True}, "invalid_channel"),
        ({"bot_member": False, "private": True}, "invalid_channel"),
        ({"bot_member": False}, "not_in_channel"),
    ],
)
def test_complete_checks_the_channel_as_chat_post_message_does(
    slack: BackgroundSlack, client: WebClient, change: dict[str, bool], error: str
) -> None:
    ticket = client.files_getUploadURLExternal(filename="a.txt", length=2)
    post(ticket["upload_url"], b"hi")
    slack.change_channel("C_GPU", **change)
    files = [{"id": ticket["file_id"], "title": "x"}]
    assert api_error(lambda: client.files_completeUploadExternal(files=files, channel_id="C_GPU")) == error
    posted = error if error != "invalid_channel" else "channel_not_found"
    assert api_error(lambda: client.chat_postMessage(channel="C_GPU", text="hi")) == posted
    assert not slack.messages("C_GPU")


def test_files_upload_v2_into_an_uninvited_channel(client: WebClient) -> None:
    error = api_error(lambda: client.files_upload_v2(channel="C_SECRET", content="hi", filename="a.txt"))
    assert error == "not_in_channel"


def test_complete_rejects_a_malformed_files_list(client: WebClient) -> None:
    for files in ("not json", "[]", json.dumps([{"title": "no id"}])):
        error = api_error(
            lambda f=files: client.api_call("files.completeUploadExternal", params={"files": f})
        )
        assert error == "invalid_arguments"


def test_blocks_introduce_the_file_unless_there_is_an_initial_comment(
    slack: BackgroundSlack, client: WebClient
) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*nb-0* log"}}]
    for comment in (None, "plain"):
        ticket = client.files_getUploadURLExternal(filename="a.txt", length=2)
        post(ticket["upload_url"], b"hi")
        files = [{"id": ticket["file_id"], "title": "a"}]
        client.files_completeUploadExternal(
            files=files, channel_id="C_GPU", initial_comment=comment, blocks=json.dumps(blocks)
        )
    first, second = slack.messages("C_GPU")
    assert (first["text"], first["blocks"]) == ("", blocks)
    assert (second["text"], second["blocks"]) == ("plain", [])
