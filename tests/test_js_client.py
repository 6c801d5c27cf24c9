"""The JavaScript client library's types and lists agree with the protocol's schema
(web/protocol.schema.json): one interface in web/client/omnicall.d.ts per message, with the
schema's fields, each optional exactly where the schema does not require it. (The library
itself runs in headless Chromium: tests/test_web_embed.py and the page's tests.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

WEB = Path(__file__).resolve().parent.parent / "web"
SCHEMA = json.loads((WEB / "protocol.schema.json").read_text())
DEFS = SCHEMA["$defs"]
TYPES = (WEB / "client" / "omnicall.d.ts").read_text()
LIBRARY = (WEB / "client" / "omnicall.js").read_text()
FIELD = re.compile(r"^\s*(\w+)(\?)?:\s", re.MULTILINE)


def interfaces() -> dict[str, dict[str, bool]]:
    """Each interface's fields: name -> optional."""
    out = {}
    for name, body in re.findall(r"export interface (\w+) \{(.*?)\}", TYPES, re.DOTALL):
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.DOTALL)
        out[name] = {field: bool(optional) for field, optional in FIELD.findall(body)}
    return out


def message_interface(kind: str) -> dict[str, bool]:
    """The interface whose ``type`` is ``kind``."""
    found = [fields for name, fields in interfaces().items()
             if re.search(rf'export interface {name} \{{[^}}]*type: "{kind}"', TYPES)]
    assert len(found) == 1, f"{kind}: {len(found)} interfaces"
    return found[0]


def server_kinds() -> list[str]:
    return [ref["$ref"].rsplit("/", 1)[1] for ref in DEFS["server_message"]["oneOf"]]


def test_every_server_message_has_its_interface_with_the_schemas_fields() -> None:
    for kind in server_kinds():
        schema = DEFS[kind]
        fields = message_interface(kind)
        assert set(fields) == set(schema["properties"]), kind
        required = {f for f, optional in fields.items() if not optional}
        assert required == set(schema["required"]), kind


def test_the_offer_answer_and_config_have_the_schemas_fields() -> None:
    found = interfaces()
    for kind, name in (("offer", "Offer"), ("answer", "Answer"), ("config", "ServerConfig")):
        schema = DEFS[kind]
        assert set(found[name]) == set(schema["properties"]), kind
        required = {f for f, optional in found[name].items() if not optional}
        assert required == set(schema["required"]), kind


def test_the_event_map_and_the_library_name_each_server_message() -> None:
    events = re.search(r"export interface ServerMessageEvents \{(.*?)\}", TYPES, re.DOTALL)
    assert events is not None
    assert FIELD.findall(events.group(1)) == [(k, "") for k in server_kinds()]
    listed = re.search(r"export const SERVER_MESSAGES = \[(.*?)\];", LIBRARY, re.DOTALL)
    assert listed is not None
    assert re.findall(r'"(\w+)"', listed.group(1)) == server_kinds()
    version = re.search(r'export const PROTOCOL_VERSION = "([\d.]+)"', LIBRARY)
    assert version is not None and version.group(1) == SCHEMA["version"]


def test_the_client_messages_are_typed() -> None:
    for entry in DEFS["client_message"]["oneOf"]:
        kind = entry["properties"]["type"]
        names = kind["enum"] if "enum" in kind else [kind["const"]]
        pattern = " | ".join(f'"{n}"' for n in names)
        match = re.search(rf"export interface \w+ \{{ type: {re.escape(pattern)}(.*?)\}}", TYPES)
        assert match is not None, names
        fields = {f: bool(o) for f, o in re.findall(r"(\w+)(\?)?:", match.group(1))}
        assert set(fields) == set(entry["properties"]) - {"type"}, names
        required = {f for f, optional in fields.items() if not optional}
        assert required == set(entry.get("required", [])), names


def test_the_package_is_ready_to_publish() -> None:
    package = json.loads((WEB / "client" / "package.json").read_text())
    assert package["type"] == "module" and package["types"] == "./omnicall.d.ts"
    assert package["exports"]["."]["import"] == "./omnicall.js"
    assert "dependencies" not in package
    for name in package["files"]:
        assert (WEB / "client" / name).is_file(), name
    pyproject = (WEB.parent / "pyproject.toml").read_text()
    assert f'version = "{package["version"]}"' in pyproject  # released with the server
    assert package["license"] in pyproject


def test_the_declarations_compile_in_strict_typescript() -> None:
    """tests/typescript/usage.ts uses the library's types as an app would, in strict mode;
    its @ts-expect-error lines (a wrong mode, an unknown event, a talk without held) must
    fail to compile, or tsc fails on the unused directive."""
    folder = Path(__file__).resolve().parent / "typescript"
    tsc = folder / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "TypeScript is not installed: `make test` installs it (npm ci)"
    result = subprocess.run([str(tsc), "-p", str(folder)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "@ts-expect-error" in (folder / "usage.ts").read_text()
