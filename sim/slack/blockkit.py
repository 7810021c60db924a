"""Block Kit as Slack's API checks it: blocks, elements and views, with the documented limits.

Every limit is from Slack's reference (the page beside each spec, under https://docs.slack.dev/reference/);
how a breach is worded is `schema`'s. The blocks and elements gpubot sends (section, context, actions,
button, confirm) and the ones a modal or App Home needs next (header, divider, image, input, selects,
checkboxes, radio buttons, text and number inputs, date and time pickers) are modelled field by field:
an unknown property is refused as Slack refuses it. Other documented types are accepted with their
`type`, `block_id` and `action_id` checked only.
"""

from __future__ import annotations

from typing import Any

from sim.slack.schema import (
    ANY,
    UNION,
    Arr,
    Enum,
    Extra,
    Obj,
    Problem,
    Rule,
    Spec,
    Str,
    Text,
    Typed,
    pointer,
)

MESSAGE_BLOCKS_MAX = 50
VIEW_BLOCKS_MAX = 100
"""docs.slack.dev/reference/block-kit/blocks: "up to 50 blocks in each message, and 100 blocks in modals
or Home tabs"; Slack's answer past 50: "no more than 50 items allowed [json-pointer:/blocks]" (quoted in
symfony/slack-notifier's tests and several bots' logs)."""

BLOCK_ID = Str(255)
ACTION_ID = Str(255)
PLACEHOLDER = Text(150)
STYLE = Enum(("primary", "danger"))

# composition-objects/confirmation-dialog-object: title 100, text 300, confirm and deny 30.
CONFIRM = Obj(
    Spec(
        {
            "title": Text(100),
            "text": Text(300, mrkdwn=True),
            "confirm": Text(30),
            "deny": Text(30),
            "style": STYLE,
        },
        required=("title", "text", "confirm", "deny"),
    )
)


def option(*, mrkdwn: bool) -> Spec:
    """composition-objects/option-object: text 75, value 150, description 75, url 3000; checkboxes and
    radio buttons take mrkdwn, menus plain_text only."""
    return Spec(
        {
            "text": Text(75, mrkdwn=mrkdwn),
            "value": Str(150),
            "description": Text(75, mrkdwn=mrkdwn),
            "url": Str(3000),
        },
        required=("text", "value"),
    )


OPTION, MRKDWN_OPTION = option(mrkdwn=False), option(mrkdwn=True)
# composition-objects/option-group-object: label 75, up to 100 options.
OPTION_GROUP = Spec({"label": Text(75), "options": Arr(Obj(OPTION), max=100)}, required=("label", "options"))


def element(fields: dict[str, Any], *, required: tuple[str, ...] = (), extra: Extra | None = None) -> Spec:
    return Spec({"type": ANY, "action_id": ACTION_ID, **fields}, required=("type", *required), extra=extra)


def options_or_groups(value: dict[str, Any], at: str, out: list[Problem]) -> None:
    # select-menu-element: one of `options` or `option_groups` is required. Slack's wording for neither
    # was not found; this is its wording for a missing field.
    if "options" not in value and "option_groups" not in value:
        out.append(("missing required field: options", at))


SELECT_FIELDS: dict[str, Rule] = {
    "placeholder": PLACEHOLDER,
    "options": Arr(Obj(OPTION), max=100),
    "option_groups": Arr(Obj(OPTION_GROUP), max=100),
    "confirm": CONFIRM,
    "focus_on_load": ANY,
}
INPUT_FIELDS: dict[str, Rule] = {
    "placeholder": PLACEHOLDER,
    "dispatch_action_config": ANY,
    "focus_on_load": ANY,
}
PICKER_FIELDS: dict[str, Rule] = {"placeholder": PLACEHOLDER, "confirm": CONFIRM, "focus_on_load": ANY}

MODELLED_ELEMENTS = {
    # block-elements/button-element: text 75, value 2000, url 3000, accessibility_label 75.
    "button": element(
        {
            "text": Text(75),
            "value": Str(2000),
            "url": Str(3000),
            "style": STYLE,
            "confirm": CONFIRM,
            "accessibility_label": Str(75),
        },
        required=("text",),
    ),
    # block-elements/select-menu-element (static), multi-select-menu-element: up to 100 options or groups.
    "static_select": element({**SELECT_FIELDS, "initial_option": Obj(OPTION)}, extra=options_or_groups),
    "multi_static_select": element(
        {**SELECT_FIELDS, "initial_options": Arr(Obj(OPTION)), "max_selected_items": ANY},
        extra=options_or_groups,
    ),
    # block-elements/overflow-menu-element: 2 to 5 options.
    "overflow": element(
        {"options": Arr(Obj(OPTION), max=5, min=2), "confirm": CONFIRM}, required=("options",)
    ),
    # block-elements/checkboxes-element, radio-button-group-element: up to 10 options.
    "checkboxes": element(
        {
            "options": Arr(Obj(MRKDWN_OPTION), max=10, min=1),
            "initial_options": Arr(Obj(MRKDWN_OPTION)),
            "confirm": CONFIRM,
            "focus_on_load": ANY,
        },
        required=("options",),
    ),
    "radio_buttons": element(
        {
            "options": Arr(Obj(MRKDWN_OPTION), max=10, min=1),
            "initial_option": Obj(MRKDWN_OPTION),
            "confirm": CONFIRM,
            "focus_on_load": ANY,
        },
        required=("options",),
    ),
    # block-elements/plain-text-input-element, number-input-element.
    "plain_text_input": element(
        {**INPUT_FIELDS, "initial_value": Str(), "multiline": ANY, "min_length": ANY, "max_length": ANY}
    ),
    "number_input": element(
        {
            **INPUT_FIELDS,
            "is_decimal_allowed": ANY,
            "initial_value": Str(),
            "min_value": Str(),
            "max_value": Str(),
        },
        required=("is_decimal_allowed",),
    ),
    # block-elements/date-picker-element, time-picker-element.
    "datepicker": element({**PICKER_FIELDS, "initial_date": Str()}),
    "timepicker": element({**PICKER_FIELDS, "initial_time": Str(), "timezone": Str()}),
}
# block-elements/image-element: alt_text, and image_url (3000) or slack_file.
IMAGE_ELEMENT = Spec(
    {"type": ANY, "alt_text": Str(), "image_url": Str(3000), "slack_file": ANY}, required=("type", "alt_text")
)
OTHER_SELECTS = ("users_select", "conversations_select", "channels_select", "external_select")
UNMODELLED_ELEMENTS = {
    name: Spec(
        {"type": ANY, "action_id": ACTION_ID, "placeholder": PLACEHOLDER, "confirm": CONFIRM}, open=True
    )
    for name in (
        *OTHER_SELECTS,
        *(f"multi_{select}" for select in OTHER_SELECTS),
        "datetimepicker",
        "email_text_input",
        "url_text_input",
        "rich_text_input",
        "file_input",
        "workflow_button",
    )
}
ELEMENTS = {**MODELLED_ELEMENTS, **UNMODELLED_ELEMENTS}
SELECTS = ("static_select", *OTHER_SELECTS, *(f"multi_{s}" for s in ("static_select", *OTHER_SELECTS)))


def elements(*names: str) -> Typed:
    chosen = {name: ELEMENTS[name] for name in names if name in ELEMENTS}
    return Typed({**chosen, "image": IMAGE_ELEMENT} if "image" in names else chosen)


# Which elements each block takes: the "works with" lists of each element's reference page.
CLICKABLE = (
    "button",
    "checkboxes",
    "datepicker",
    "overflow",
    "radio_buttons",
    "timepicker",
    "workflow_button",
)
ACTION_ELEMENTS = elements(*CLICKABLE, *SELECTS, "datetimepicker", "rich_text_input")
ACCESSORIES = elements(*CLICKABLE, *SELECTS, "image")
INPUT_ELEMENTS = elements(
    *SELECTS,
    "checkboxes",
    "datepicker",
    "datetimepicker",
    "email_text_input",
    "file_input",
    "number_input",
    "plain_text_input",
    "radio_buttons",
    "rich_text_input",
    "timepicker",
    "url_text_input",
)


class ContextElement:
    """blocks/context-block: images and text objects; a text object here is a union like any other."""

    TEXT = Text(3000, mrkdwn=True)
    """composition-objects/text-object: at most 3000 characters."""

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        kind = value.get("type") if isinstance(value, dict) else None
        if kind in ("plain_text", "mrkdwn"):
            self.TEXT.check(value, at, out)
        else:
            Typed({"image": IMAGE_ELEMENT}).check(value, at, out)


def text_or_fields(block: dict[str, Any], at: str, out: list[Problem]) -> None:
    # blocks/section-block: `text` is not required "if a valid array of fields objects is provided".
    # Wording and pointer as Slack's answer quoted in public SDK tests and slackapi/java-slack-sdk#1017.
    if "text" not in block and "fields" not in block:
        out.append(("must define either `text` or `fields`", pointer(at, "type")))


def unique_action_ids(block: dict[str, Any], at: str, out: list[Problem]) -> None:
    # Each element's page: action_id "should be unique among all other action_ids in the containing
    # block". Slack refuses a repeat with this line (quoted from live answers in two public bug reports).
    seen: set[str] = set()
    for index, item in enumerate(block.get("elements") or []):
        action_id = item.get("action_id") if isinstance(item, dict) else None
        if isinstance(action_id, str) and action_id in seen:
            out.append((f'`action_id` "{action_id}" already exists', f"{at}/elements/{index}/action_id"))
        elif isinstance(action_id, str):
            seen.add(action_id)


def image_source(block: dict[str, Any], at: str, out: list[Problem]) -> None:
    # blocks/image-block: "You must provide either an image_url or slack_file" (wording not found: this is
    # Slack's line for a missing field).
    if "image_url" not in block and "slack_file" not in block:
        out.append(("missing required field: image_url", at))


def block(fields: dict[str, Any], *, required: tuple[str, ...] = (), extra: Extra | None = None) -> Spec:
    return Spec({"type": ANY, "block_id": BLOCK_ID, **fields}, required=("type", *required), extra=extra)


BLOCKS = {
    # blocks/section-block: text 3000, up to 10 fields of 2000 each.
    "section": block(
        {
            "text": Text(3000, mrkdwn=True),
            "fields": Arr(Text(2000, mrkdwn=True), max=10),
            "accessory": ACCESSORIES,
            "expand": ANY,
        },
        extra=text_or_fields,
    ),
    # blocks/header-block: plain_text, 150.
    "header": block({"text": Text(150)}, required=("text",)),
    "divider": block({}),
    # blocks/image-block: alt_text 2000, image_url 3000, title 2000.
    "image": block(
        {"alt_text": Str(2000), "image_url": Str(3000), "slack_file": ANY, "title": Text(2000)},
        required=("alt_text",),
        extra=image_source,
    ),
    # blocks/context-block: up to 10 elements.
    "context": block({"elements": Arr(ContextElement(), max=10, min=1)}, required=("elements",)),
    # blocks/actions-block: up to 25 elements.
    "actions": block(
        {"elements": Arr(ACTION_ELEMENTS, max=25, min=1)}, required=("elements",), extra=unique_action_ids
    ),
    # blocks/input-block: label and hint plain_text, 2000 each.
    "input": block(
        {
            "label": Text(2000),
            "element": INPUT_ELEMENTS,
            "hint": Text(2000),
            "dispatch_action": ANY,
            "optional": ANY,
        },
        required=("label", "element"),
    ),
    # blocks/rich-text-block: its elements (sections, lists, quotes, preformatted) are not modelled.
    "rich_text": block({"elements": Arr(Obj(Spec({}, open=True)))}, required=("elements",)),
}
UNMODELLED_BLOCKS = {
    name: Spec({"type": ANY, "block_id": BLOCK_ID}, open=True)
    for name in ("file", "markdown", "table", "video")
}
VIEW_BLOCKS = Typed({**BLOCKS, "video": UNMODELLED_BLOCKS["video"]})
MESSAGE_BLOCKS = Typed({**BLOCKS, **UNMODELLED_BLOCKS})
"""blocks/file-block, markdown-block and table-block are for messages only."""


def check_message_blocks(blocks: list[Any]) -> list[Problem]:
    """What Slack finds wrong in a message's `blocks` (chat.postMessage and friends, response_url)."""
    found: list[Problem] = []
    Arr(MESSAGE_BLOCKS, max=MESSAGE_BLOCKS_MAX).check(blocks, "/blocks", found)
    return found


def submit_for_inputs(view: dict[str, Any], at: str, out: list[Problem]) -> None:
    # views/modal-views: "submit is required when an input block is within the blocks array". Wording and
    # pointer as Slack's views.open answer quoted in a public fix note.
    blocks = view.get("blocks")
    if "submit" in view or not isinstance(blocks, list):
        return
    first = next((i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("type") == "input"), None)
    if first is not None:
        out.append(("must define `submit` to use an `input` block in modals", f"{at}/blocks/{first}/input"))


VIEW_COMMON: dict[str, Rule] = {
    "type": ANY,
    "blocks": Arr(VIEW_BLOCKS, max=VIEW_BLOCKS_MAX),
    "private_metadata": Str(3000),
    "callback_id": Str(255),
    "external_id": Str(),
}
VIEWS = Typed(
    {
        # views/modal-views: title, submit and close plain_text of 24; private_metadata 3000; callback_id 255.
        "modal": Spec(
            {
                **VIEW_COMMON,
                "title": Text(24),
                "submit": Text(24),
                "close": Text(24),
                "clear_on_close": ANY,
                "notify_on_close": ANY,
                "submit_disabled": ANY,
            },
            required=("type", "title", "blocks"),
            extra=submit_for_inputs,
        ),
        # views/home-tab-views.
        "home": Spec(VIEW_COMMON, required=("type", "blocks")),
    }
)
SHARED_VIEW_FIELDS = ("/view/private_metadata", "/view/callback_id", "/view/external_id")


def check_view(view: Any) -> list[Problem]:
    """What Slack finds wrong in a `view` (views.open, .update, .push, .publish)."""
    found: list[Problem] = []
    VIEWS.check(view, "/view", found)
    # A real views.open answer for a long private_metadata opens with the union line for the view
    # (quoted in a public note); answers about titles and blocks do not, so only fields every view type
    # shares get it.
    if any(where in SHARED_VIEW_FIELDS for _, where in found):
        found.insert(0, (UNION, "/view"))
    return found
