"""docs/configuration.md is generated from the settings: it must say what the code says."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from omnicall.app import config_docs
from omnicall.app.config import ENV_PREFIX, ServerConfig
from omnicall.app.flags import flags_of
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import (
    ConversationSettings,
    FramePolicySettings,
    TurnSettings,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_page_is_what_the_code_generates() -> None:
    assert DOCS.is_file(), "docs/configuration.md is missing: run `make docs`"
    assert DOCS.read_text(encoding="utf-8") == config_docs.render(), \
        "docs/configuration.md differs from the settings: run `make docs`"


def test_every_setting_is_listed_with_its_flag_and_variable() -> None:
    """The server's own, the conversation's and each engine's, each with the help text of
    the field that declares it."""
    text = DOCS.read_text(encoding="utf-8")
    rows = {line.split(" | ")[1]: line for line in text.splitlines()
            if line.startswith("| `--")}
    declared = [f for settings in (ServerConfig, ConversationSettings, TurnSettings,
                                   FramePolicySettings, CascadeSettings)
                for f in dataclasses.fields(settings) if "help" in f.metadata]
    assert len(declared) > 80
    for f in declared:
        helps = [row for row in rows.values()
                 if config_docs.escape(str(f.metadata["help"])) in row]
        assert helps, f"{f.name}: its help text is not in docs/configuration.md"
    for flag in flags_of(ServerConfig):
        env = f"`{flag.env(ENV_PREFIX)}`"
        assert env in rows, f"{flag.name}: no row for {env} in docs/configuration.md"
        assert f"`{flag.flag}`" in rows[env].split(" | ")[0][2:], flag.name
    assert len(rows) == len(flags_of(ServerConfig))
    assert "`--camera-size`" in text and "`--llm-url`" in text and "`--speaker`" in text


def test_rows_follow_field_order_and_have_four_cells() -> None:
    rows = [line for line in config_docs.render().splitlines() if line.startswith("| `--")]
    names = [flag.name for flag in flags_of(ServerConfig)]
    flags = [re.match(r"\| `--([a-z0-9-]+)`", row) for row in rows]
    assert [m[1].replace("-", "_") if m else row for m, row in zip(flags, rows, strict=True)] \
        == names
    for row in rows:
        cells = re.split(r"(?<!\\)\|", row)[1:-1]  # a "|" in help text is escaped
        assert len(cells) == 4, row


def test_defaults_and_flags_are_spelled_as_typed() -> None:
    text = config_docs.render()
    assert "| `--host` | `OMNICALL_HOST` | `127.0.0.1` |" in text
    assert "| `--port` | `OMNICALL_PORT` | `8080` |" in text
    assert "| `--instructions` | `OMNICALL_INSTRUCTIONS` | `''` |" in text
    assert "`--low-latency-receive` / `--no-low-latency-receive`" in text
    assert "`--engine-url` (repeatable)" in text
    assert config_docs.escape("a | b *c*") == "a \\| b \\*c\\*"


def test_check_fails_on_a_stale_page(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "configuration.md"
    assert config_docs.main(["--output", str(page)]) == 0
    assert config_docs.main(["--check", "--output", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert config_docs.main(["--check", "--output", str(page)]) == 1
    assert "run `make docs`" in capsys.readouterr().err
    assert config_docs.main(["--check", "--output", str(tmp_path / "missing.md")]) == 1
