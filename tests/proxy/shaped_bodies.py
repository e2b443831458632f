"""Large bodies shaped like users' (a FHIR search Bundle, a DocumentReference with a big attachment, a long chat
history, a long completion, an MCP tool call and reply), each exactly N bytes, made a piece at a time so their maker
never holds one whole; and decompression bombs."""

from __future__ import annotations

import base64
import os
import zlib
from collections.abc import Iterator
from functools import cache

import brotli
import zstandard

_PIECE = 1 << 20


def _exact(head: bytes, items: Iterator[bytes], item_size: int, tail: bytes, total: int) -> Iterator[bytes]:
    """``head``, as many comma-separated items as fit, spaces, ``tail``: exactly ``total`` bytes, in ~1 MiB pieces."""
    room = total - len(head) - len(tail)
    count = max(0, (room + 1) // (item_size + 1))
    padding = room - (count * (item_size + 1) - 1 if count else 0)
    piece = bytearray(head)
    for index in range(count):
        if index:
            piece += b","
        piece += next(items)
        if len(piece) >= _PIECE:
            yield bytes(piece)
            piece.clear()
    piece += b" " * padding + tail
    yield bytes(piece)


def _patients() -> Iterator[bytes]:
    index = 0
    while True:
        index += 1
        yield (
            b'{"fullUrl":"http://fhir.test/Patient/p%09d","resource":{"resourceType":"Patient","id":"p%09d",'
            b'"meta":{"versionId":"%d","lastUpdated":"2024-01-01T00:00:00Z"},"active":true,'
            b'"name":[{"family":"Family%09d","given":["Given%09d","Middle"]}],"gender":"female",'
            b'"birthDate":"1970-01-01","identifier":[{"system":"urn:oid:1.2.3","value":"%09d"}]},'
            b'"search":{"mode":"match"}}' % (index, index, index % 10, index, index, index)
        )


def bundle_pieces(total: int) -> Iterator[bytes]:
    """A searchset Bundle of many small Patients: the shape that costs Python the most objects per byte."""
    size = len(next(_patients()))
    return _exact(b'{"resourceType":"Bundle","type":"searchset","total":0,"entry":[', _patients(), size, b"]}", total)


def bundle_entries(total: int) -> int:
    """How many entries ``bundle_pieces(total)`` holds."""
    size = len(next(_patients()))
    room = total - len(b'{"resourceType":"Bundle","type":"searchset","total":0,"entry":[') - 2
    return max(0, (room + 1) // (size + 1))


def document_reference(total: int) -> bytes:
    """A DocumentReference carrying a PDF-sized base64 attachment, ``total`` bytes long."""
    head = (
        b'{"resourceType":"DocumentReference","status":"current","content":[{"attachment":'
        b'{"contentType":"application/pdf","data":"'
    )
    tail = b'"}}]}'
    room = total - len(head) - len(tail)
    data = base64.b64encode(os.urandom(room * 3 // 4 + 3))[: room - room % 4]
    return head + data + tail + b" " * (room - len(data))


def _messages() -> Iterator[bytes]:
    index = 0
    while True:
        index += 1
        role = b"user" if index % 2 else b"assistant"
        text = b"Turn %09d: " % index + b"the patient asks a follow-up question about the last visit and " * 28
        yield b'{"role":"%s","content":"%s"}' % (role, text.ljust(1900 - len(role)))


def chat_request(total: int) -> bytes:
    """A chat completion request carrying a long history of messages, ``total`` bytes long."""
    size = len(next(_messages()))
    return b"".join(
        _exact(
            b'{"model":"gpt-test","tools":[{"type":"function","function":{"name":"search"}}],"messages":[',
            _messages(),
            size,
            b"]}",
            total,
        )
    )


def completion_pieces(total: int) -> Iterator[bytes]:
    """A chat completion whose answer is one long text, ``total`` bytes long."""
    word = b"The summary of the record continues with more detail."
    words = (word for _ in iter(int, 1))
    return _exact(
        b'{"id":"c1","model":"gpt-test","choices":[{"index":0,"finish_reason":"stop",'
        b'"message":{"role":"assistant","content":"',
        words,
        len(word),
        b'"}}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}',
        total,
    )


def tool_result_pieces(total: int) -> Iterator[bytes]:
    """An MCP ``tools/call`` reply (JSON-RPC) whose text content is one long note, ``total`` bytes long."""
    word = b"The note on the encounter goes on with its findings."
    words = (word for _ in iter(int, 1))
    return _exact(
        b'{"jsonrpc":"2.0","id":1,"result":{"isError":false,"content":[{"type":"text","text":"',
        words,
        len(word),
        b'"}]}}',
        total,
    )


def tool_call(total: int = 0) -> bytes:
    """An MCP ``tools/call`` request; ``total``: one that long, its note argument a long text (an upload)."""
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_note","arguments":{"id":"n1"'
    tail = b"}}}"
    if not total:
        return head + tail
    note = b',"note":"'
    room = total - len(head) - len(note) - 1 - len(tail)
    return head + note + (b"the note on the encounter goes on " * (room // 34 + 1))[:room] + b'"' + tail


@cache
def bomb(encoding: str) -> tuple[bytes, int]:
    """(encoded, decoded size): zeros that decode to 1 GiB from a few KiB (br, zstd); gzip and deflate top out
    near 1000:1, so theirs are smaller: 256 MiB from 256 KiB (a 1 MiB gzip member, repeated) and 128 MiB."""
    zeros = bytes(1 << 20)
    if encoding == "gzip":
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        return (packer.compress(zeros) + packer.flush()) * 256, 256 << 20
    if encoding == "deflate":
        packer = zlib.compressobj(9)
        return b"".join(packer.compress(zeros) for _ in range(128)) + packer.flush(), 128 << 20
    if encoding == "br":
        brotli_packer = brotli.Compressor(quality=5)
        return b"".join(brotli_packer.process(zeros) for _ in range(1024)) + brotli_packer.finish(), 1 << 30
    zstd_packer = zstandard.ZstdCompressor(level=3).compressobj()
    return b"".join(zstd_packer.compress(zeros) for _ in range(1024)) + zstd_packer.flush(), 1 << 30


def completion_stream(total: int) -> Iterator[bytes]:
    """A streamed chat completion (server-sent events) of about ``total`` bytes, at most that: a long answer in
    deltas of ~1000 characters, usage at the end."""
    head = b'data: {"id":"c1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"'
    tail = b'"}}]}\n\n'
    delta = b"The summary of the record continues with more detail. " * 18
    event = head + delta + tail
    end = (
        b'data: {"id":"c1","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}\n\ndata: [DONE]\n\n'
    )
    count = max(0, (total - len(end)) // len(event))
    for start in range(0, count, 1000):
        yield event * min(1000, count - start)
    yield end
