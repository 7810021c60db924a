"""Image references: the distribution/reference grammar, and friendly refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core import images, models

SHA = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "domain", "path", "tag", "digest", "canonical"),
    [
        ("ubuntu", "", "ubuntu", "", "", "docker.io/library/ubuntu:latest"),
        ("ubuntu:22.04", "", "ubuntu", "22.04", "", "docker.io/library/ubuntu:22.04"),
        (
            "nvidia/cuda:12.4.1-base-ubuntu22.04",
            "",
            "nvidia/cuda",
            "12.4.1-base-ubuntu22.04",
            "",
            "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        ),
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch", "24.01-py3", "", None),
        ("localhost:5000/team/app", "localhost:5000", "team/app", "", "", "localhost:5000/team/app:latest"),
        ("localhost/app", "localhost", "app", "", "", None),
        ("registry:5000", "", "registry", "5000", "", None),
        ("[::1]:5000/app:v1", "[::1]:5000", "app", "v1", "", None),
        ("ghcr.io/a/b/c/d:TAG_upper", "ghcr.io", "a/b/c/d", "TAG_upper", "", None),
        ("a__b/c---d/e.f_g", "", "a__b/c---d/e.f_g", "", "", None),
        (f"ubuntu@{SHA}", "", "ubuntu", "", SHA, f"docker.io/library/ubuntu@{SHA}"),
        (f"ubuntu:22.04@{SHA}", "", "ubuntu", "22.04", SHA, None),
        ("my-registry.example.com:443/x", "my-registry.example.com:443", "x", "", "", None),
        ("NVCR.IO/nvidia/x", "NVCR.IO", "nvidia/x", "", "", None),
        ("0.0_0/x", "", "0.0_0/x", "", "", None),
    ],
)
def test_valid_references(
    text: str, domain: str, path: str, tag: str, digest: str, canonical: str | None
) -> None:
    parsed = images.parse_image(text)
    assert parsed == images.ImageRef(domain=domain, path=path, tag=tag, digest=digest)
    assert parsed.familiar == text
    if canonical is not None:
        assert parsed.canonical == canonical


@pytest.mark.parametrize(
    ("text", "problem", "suggestion"),
    [
        ("", "needs an image", images.EXAMPLE_IMAGE),
        ("nvidia/cuda 12", "spaces", images.EXAMPLE_IMAGE),
        ("NVIDIA/CUDA:12.4.1", "must be lowercase", "nvidia/cuda:12.4.1"),
        ("Ubuntu", "must be lowercase", "ubuntu"),
        ("https://nvcr.io/nvidia/pytorch:24.01-py3", "https://", "nvcr.io/nvidia/pytorch:24.01-py3"),
        ("ubuntu;rm -rf", "spaces", images.EXAMPLE_IMAGE),
        ("ubuntu;id", "`;`", images.EXAMPLE_IMAGE),
        ("ubuntu$(id)", "`$`", images.EXAMPLE_IMAGE),
        ("ubuntu|cat", "`|`", images.EXAMPLE_IMAGE),
        ("`id`", "`", images.EXAMPLE_IMAGE),
        ("ubuntu&&x", "`&`", images.EXAMPLE_IMAGE),
        ("ubuntu>out", "`>`", images.EXAMPLE_IMAGE),
        ("ubuntu:", "empty", "ubuntu"),
        ("ubuntu@", "empty", "ubuntu"),
        (":latest", "no image name", images.EXAMPLE_IMAGE),
        ("ubuntu:-bad", "not a valid tag", images.EXAMPLE_IMAGE),
        ("ubuntu:.bad", "not a valid tag", images.EXAMPLE_IMAGE),
        ("ubuntu:" + "t" * 129, "not a valid tag", images.EXAMPLE_IMAGE),
        ("ubuntu:tag:again", "not a valid part", images.EXAMPLE_IMAGE),
        ("-ubuntu", "not a valid part", images.EXAMPLE_IMAGE),
        ("ubuntu-", "not a valid part", images.EXAMPLE_IMAGE),
        ("a//b", "not a valid part", images.EXAMPLE_IMAGE),
        ("a/b/", "not a valid part", images.EXAMPLE_IMAGE),
        ("a._b", "not a valid part", images.EXAMPLE_IMAGE),
        ("a...b", "not a valid part", images.EXAMPLE_IMAGE),
        ("ubuntu@sha256:abc", "not a valid digest", images.EXAMPLE_IMAGE),
        ("ubuntu@sha256:" + "a" * 63, "64 lowercase hex", images.EXAMPLE_IMAGE),
        ("ubuntu@sha256:" + "A" * 64, "64 lowercase hex", images.EXAMPLE_IMAGE),
        ("ubuntu@md5:" + "a" * 32, "Unsupported digest", images.EXAMPLE_IMAGE),
        ("ubuntu@sha256", "not a valid digest", images.EXAMPLE_IMAGE),
        ("ubuntu@" + SHA + "@" + SHA, "not a valid digest", images.EXAMPLE_IMAGE),
        ("bad_host.io:x/app", "not a valid registry host", images.EXAMPLE_IMAGE),
        ("-bad.io/app", "not a valid registry host", images.EXAMPLE_IMAGE),
        ("a/" + "b" * 254, "at most 255", images.EXAMPLE_IMAGE),
        ("ubuntu\x00", "cannot appear", images.EXAMPLE_IMAGE),
        ("ubüntu", "not a valid part", images.EXAMPLE_IMAGE),
    ],
)
def test_invalid_references_explain_the_fix(text: str, problem: str, suggestion: str) -> None:
    refused = images.parse_image(text)
    assert isinstance(refused, models.UsageError), refused
    assert problem in refused.problem
    assert refused.suggestion == f"/gpu run {suggestion}"


def test_suggested_lowercase_fix_is_itself_valid() -> None:
    refused = images.parse_image("MyOrg/Trainer:V1")
    assert isinstance(refused, models.UsageError)
    fixed = refused.suggestion.removeprefix("/gpu run ")
    assert fixed == "myorg/trainer:V1"
    assert isinstance(images.parse_image(fixed), images.ImageRef)


def test_name_of_exactly_255_characters_is_accepted() -> None:
    assert isinstance(images.parse_image("a/" + "b" * 253), images.ImageRef)


def test_near_miss_paths_are_refused_quickly() -> None:
    # A backtracking regex on upstream's `[-]*` separator would take ages on this; ours is linear.
    assert isinstance(images.parse_image("a" * 60 + "!"), models.UsageError)
    assert isinstance(images.parse_image("a-" * 100 + "_"), models.UsageError)


_alnum = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=6)
_component = st.builds(
    lambda parts, seps: "".join(p + s for p, s in zip(parts, seps, strict=False)) + parts[-1],
    st.lists(_alnum, min_size=1, max_size=3),
    st.lists(st.sampled_from([".", "_", "__", "-", "--"]), max_size=2),
)
_tag = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}\Z")


@settings(max_examples=300, deadline=None)
@given(st.lists(_component, min_size=1, max_size=3), st.one_of(st.just(""), _tag))
def test_grammar_generated_references_parse_and_round_trip(components: list[str], tag: str) -> None:
    text = "/".join(components) + (f":{tag}" if tag else "")
    parsed = images.parse_image(text)
    assert isinstance(parsed, images.ImageRef), parsed
    assert parsed.familiar == text


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_parsed_or_refused_never_raised(text: str) -> None:
    parsed = images.parse_image(text)
    assert isinstance(parsed, images.ImageRef | models.UsageError)
