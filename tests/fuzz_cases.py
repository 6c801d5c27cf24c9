"""Deterministic hostile input for the server: offer bodies, SDP mutations, control messages.

Shared by tests/test_fuzz.py (CI) and bench/reliability.py. Every generator takes a seeded
``random.Random`` so a failing case can be replayed from its seed and index.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
CHROMIUM_OFFER = DATA / "chromium_offer.sdp"  # a real Chromium 156 offer (audio, video, data)

_GARBAGE = string.printable + "\x00\x7f\u00e9\u4e2d\U0001f600\ufffd"

# lines that broke aiortc's SDP parser or its offer handling when fuzzed
NASTY_LINES = (
    "a=candidate:1", "a=candidate:1 1 udp", "a=candidate:x y z w v u t s",
    "a=fmtp:96 minptime=10", "a=rtcp-fb:96 nack", "a=rtpmap:96", "a=rtpmap:x opus/48000/2",
    "a=rtpmap:111 unknowncodec/48000/2", "m=audio", "m=audio x UDP/TLS/RTP/SAVPF 111",
    "m=video 9 UDP/TLS/RTP/SAVPF", "m=application 9 UDP/DTLS/SCTP", "a=ssrc:abc cname:x",
    "a=ssrc-group:FID 1", "a=group:BUNDLE 7 8 9", "a=mid:", "a=extmap:x urn:foo",
    "a=fingerprint:sha-256 ZZ", "a=fingerprint:md5", "a=setup:weird", "a=ice-ufrag:",
    "a=ice-pwd:", "c=IN IP4", "c=IN IP6 ::::", "o=- x y IN IP4", "a=sctp-port:abc",
    "a=max-message-size:-1", "a=rtcp:abc", "a=rtcp-mux-only", "a=simulcast:send 1;2",
    "a=rid:1 send pt=abc", "b=AS:abc", "t=0", "s=", "v=1", "a=msid:", "a=sendrecv extra",
)


def _random_text(rng: random.Random, max_len: int) -> str:
    return "".join(rng.choice(_GARBAGE) for _ in range(rng.randint(0, max_len)))


def _nested(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def json_bodies(rng: random.Random, count: int, sdp: str) -> Iterator[bytes]:
    """``POST /offer`` bodies: broken JSON, deep nesting, wrong types, odd fields."""
    makers = [
        lambda: _random_text(rng, 200).encode("utf-8", "surrogatepass"),
        lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))),
        lambda: _nested(rng.choice([10, 1000, 5000, 50_000]), rng.choice(["array", "obj"])
                        ).encode(),
        lambda: json.dumps({"sdp": sdp, "type": "offer"})[:rng.randint(0, 400)].encode(),
        lambda: json.dumps({"sdp": rng.choice([None, 1, [], {}, True, "", " ", "v=0"]),
                            "type": rng.choice(["offer", "answer", None, 1, [], "OFFER"])}
                           ).encode(),
        lambda: json.dumps({"sdp": sdp, "type": "offer",
                            rng.choice(["resume", "session", "video_fps"]): rng.choice(
                                [None, 0, -1, 1e308, "x" * rng.randint(0, 200), [], {},
                                 True, 0.05, 31, "nan"])}).encode(),
        lambda: (b'{"sdp": "' + sdp.encode().replace(b"\r\n", b"\\r\\n") + b'", "type": '
                 b'"offer", "resume": ' + _nested(3000, "array").encode() + b"}"),
        lambda: rng.choice([b"", b"null", b"[]", b"0", b'"offer"', b"{}", b"NaN",
                            b'{"type": "offer", "sdp": "v=0\\r\\n' + b"a=x\\r\\n" * 50 + b'"}',
                            b'{"sdp": "\\ud800", "type": "offer"}', b"\xff\xfe{\x00}\x00"]),
    ]
    for _ in range(count):
        yield rng.choice(makers)()


def _mutate(rng: random.Random, sdp: str) -> str:
    lines = sdp.strip().split("\r\n")
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        i = rng.randrange(len(lines)) if lines else 0
        if not lines:
            lines.append(rng.choice(NASTY_LINES))
        elif op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 2:
            lines[i] = lines[i][:rng.randint(0, len(lines[i]))]
        elif op == 3:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 4:
            lines.insert(i, rng.choice(NASTY_LINES))
        elif op == 5:
            key = lines[i].partition(":")[0]
            lines[i] = f"{key}:{_random_text(rng, 40)}"
        elif op == 6:
            lines[i] = lines[i].replace("opus", rng.choice(["opux", "OPUS", "", "speex"]))
        elif op == 7:
            lines = [line for line in lines if not line.startswith(
                rng.choice(["a=rtpmap", "a=ice-", "a=fingerprint", "a=mid", "m=", "a=setup",
                            "a=candidate", "c="]))]
        else:
            pos = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:pos] + rng.choice(_GARBAGE) + lines[i][pos:]
    return "\r\n".join(lines) + "\r\n"


def sdp_offers(rng: random.Random, count: int, base_sdps: list[str]) -> Iterator[bytes]:
    """Offers whose SDP is a real one with a few mutations (``POST /offer`` bodies)."""
    for _ in range(count):
        sdp = _mutate(rng, rng.choice(base_sdps))
        yield json.dumps({"sdp": sdp, "type": "offer"}).encode()


def control_messages(rng: random.Random, count: int) -> Iterator[str | bytes]:
    """Data-channel messages a hostile page could send."""
    makers = [
        lambda: _random_text(rng, 100),
        lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))),
        lambda: _nested(rng.choice([100, 1000, 2000, 20_000]), rng.choice(["array", "obj"])),
        lambda: json.dumps({"type": "x" * rng.choice([1, 1000, 60_000])}),
        lambda: json.dumps({"type": rng.choice(["ping", "interrupt", "stop", "PING", ""]),
                            "t": rng.choice([None, 1, "x" * 500, [[[]]], {"a": 1}, 1e308])}),
        lambda: json.dumps({"type": rng.choice([1, None, [], {}, True])}),
        lambda: json.dumps([{"type": "ping"}] * rng.randint(0, 50)),
        lambda: "{" + '"type":"ping",' * rng.randint(1, 300) + '"t":1}',
    ]
    for _ in range(count):
        yield rng.choice(makers)()
