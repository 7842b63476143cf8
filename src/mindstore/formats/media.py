"""Images and other media between mindstore parts and provider blocks.

mindstore keeps an image either inline (`ImagePart.image`, base64 without a prefix, with
`mime_type`) or as a reference (`ImagePart.media`: a URL, a provider file id, or base64
data). Providers want a data URL (OpenAI), a base64 source with a media type (Anthropic),
or inline data with a MIME type (Gemini). These helpers convert between the two without
decoding anything.
"""

from __future__ import annotations

import re

from mindstore.model.parts import ImagePart, MediaRef

_DATA_URL = re.compile(r"data:(?P<mime>[^;,]*)(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)", re.S)

# The first base64 characters of the formats the specifications detect from magic bytes.
_BASE64_MAGIC = (
    ("/9j/", "image/jpeg"),
    ("iVBORw0KGg", "image/png"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
    ("JVBERi0", "application/pdf"),
)

DEFAULT_IMAGE_MIME = "image/png"


def sniff_mime(data: str, default: str = DEFAULT_IMAGE_MIME) -> str:
    """A MIME type guessed from base64 data's first characters (no decoding)."""
    for prefix, mime in _BASE64_MAGIC:
        if data.startswith(prefix):
            return mime
    return default


def parse_data_url(url: str) -> tuple[str, str] | None:
    """(mime type, base64 data) of a `data:<mime>;base64,<data>` URL, else None."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return None
    return match.group("mime") or "", match.group("data")


def data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def image_from_url(url: str) -> ImagePart:
    """An image given by URL: a data URL becomes inline base64, anything else a reference."""
    parsed = parse_data_url(url)
    if parsed is not None:
        mime, data = parsed
        return ImagePart(image=data, mime_type=mime or None)
    return ImagePart(media=MediaRef(kind="url", url=url))


def inline_image(part: ImagePart) -> tuple[str, str] | None:
    """(mime type, base64) when the image's bytes are at hand, else None."""
    if part.image:
        parsed = parse_data_url(part.image)
        if parsed is not None:
            return parsed[0] or sniff_mime(parsed[1]), parsed[1]
        return part.mime_type or sniff_mime(part.image), part.image
    media = part.media
    if media is not None and media.data_base64:
        return media.mime_type or part.mime_type or sniff_mime(media.data_base64), media.data_base64
    return None


def image_url(part: ImagePart) -> str | None:
    """The image as one URL (a data URL for inline bytes); None for a provider file id."""
    inline = inline_image(part)
    if inline is not None:
        return data_url(*inline)
    media = part.media
    if media is not None and media.url:
        return media.url
    return None


def image_file_id(part: ImagePart) -> str | None:
    media = part.media
    return media.file_id if media is not None and media.file_id else None
