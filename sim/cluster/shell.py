"""Shell scripts read as `sh -c` reads them, as far as the workload model needs: words and operators.

Quotes (single, double with `\\` escapes), backslashes, `#` comments, `;`, `&` and newlines as separators,
`&&`, `||`, `|`, and redirections (`>&2`, `2>/dev/null`, `> file`, `&> file`, `< file`). Nothing is expanded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Command:
    argv: list[str]
    redirects: list[str] = field(default_factory=list)
    """`FD>TARGET` with FD 0, 1, 2 or `&` (both), TARGET a path or `&N`; `0<PATH` for input."""


Pipeline = list[Command]
Statement = tuple[str, Pipeline]
"""The connector before it (`""`, `;`, `&&`, `||`) and the pipeline."""


def parse(script: str) -> list[Statement]:
    statements: list[Statement] = []
    connector, pipeline, command = "", [], Command([])
    for kind, text in tokenize(script):
        if kind == "word":
            command.argv.append(text)
        elif kind == "redirect":
            command.redirects.append(text)
        elif text == "|":
            pipeline.append(command)
            command = Command([])
        else:
            pipeline.append(command)
            statements.append((connector, pipeline))
            connector, pipeline, command = text, [], Command([])
    pipeline.append(command)
    statements.append((connector, pipeline))
    return [(c, p) for c, p in statements if any(cmd.argv or cmd.redirects for cmd in p)]


def tokenize(script: str) -> list[tuple[str, str]]:
    """Words (quotes removed), operators (`;` for `;`, `&` and newlines; `&&`, `||`, `|`) and redirects."""
    return _Lexer(script).tokens()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0
        self.out: list[tuple[str, str]] = []
        self.word: list[str] = []
        self.quoted = False

    def tokens(self) -> list[tuple[str, str]]:
        while self.i < len(self.text):
            self._step(self.text[self.i])
        self._flush()
        return self.out

    def _step(self, ch: str) -> None:
        if ch == "'":
            end = self.text.index("'", self.i + 1)
            self.word.append(self.text[self.i + 1 : end])
            self.quoted, self.i = True, end + 1
        elif ch == '"':
            self._double_quoted()
        elif ch == "\\":
            following = self.text[self.i + 1 : self.i + 2]
            self.word.append("" if following == "\n" else following)
            self.i += 2
        elif ch in " \t\r":
            self._flush()
            self.i += 1
        elif ch == "#" and not self.word and not self.quoted:
            end = self.text.find("\n", self.i)
            self.i = len(self.text) if end < 0 else end
        elif ch in "<>" or (ch == "&" and self.text.startswith("&>", self.i)):
            self._redirect()
        elif ch in ";\n&|":
            self._operator(ch)
        else:
            self.word.append(ch)
            self.i += 1

    def _double_quoted(self) -> None:
        self.quoted, self.i = True, self.i + 1
        while True:
            if self.i >= len(self.text):
                raise ValueError("unterminated double quote")
            ch = self.text[self.i]
            if ch == '"':
                self.i += 1
                return
            if ch == "\\" and self.text[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                following = self.text[self.i + 1]
                self.word.append("" if following == "\n" else following)
                self.i += 2
                continue
            self.word.append(ch)
            self.i += 1

    def _operator(self, ch: str) -> None:
        self._flush()
        pair = self.text[self.i : self.i + 2]
        if pair in ("&&", "||"):
            self.out.append(("op", pair))
            self.i += 2
            return
        self.out.append(("op", "|" if ch == "|" else ";"))
        self.i += 1

    def _redirect(self) -> None:
        fd = ""
        if self.word in (["0"], ["1"], ["2"]) and not self.quoted:
            fd = self.word[0]
            self.word = []
        self._flush()
        match = re.compile(r"&>>?|>>?&?|<").match(self.text, self.i)
        assert match is not None
        op = match.group()
        self.i = match.end()
        target = self._next_word()
        if op.startswith("&"):
            self.out.append(("redirect", f"&>{target}"))
        elif op == "<":
            self.out.append(("redirect", f"0<{target}"))
        else:
            self.out.append(("redirect", f"{fd or '1'}>{'&' if op.endswith('&') else ''}{target}"))

    def _next_word(self) -> str:
        while self.text[self.i : self.i + 1] in (" ", "\t"):
            self.i += 1
        start = len(self.out)
        while self.i < len(self.text) and self.text[self.i] not in " \t\r\n;&|<>":
            self._step(self.text[self.i])
        self._flush()
        words = [text for _, text in self.out[start:]]
        del self.out[start:]
        return "".join(words)

    def _flush(self) -> None:
        if self.word or self.quoted:
            self.out.append(("word", "".join(self.word)))
        self.word, self.quoted = [], False
