"""The errors of the memory store, under fae's one error tree.

FaeError
 └── MemoryStoreError       a memory store cannot be opened, read or written
      ├── FormatTooNew      the store was written by a newer fae
      └── EmbedderMismatch  the store's vectors came from another embedding backend
EmbeddingError (FaeError)   an embedding backend cannot be loaded or answered badly
"""

from __future__ import annotations

from fae.errors import FaeError


class MemoryStoreError(FaeError):
    """A memory store cannot be opened, read or written."""


class FormatTooNew(MemoryStoreError):
    """The store's format version is newer than this code understands."""


class EmbedderMismatch(MemoryStoreError):
    """Vectors from one backend cannot be searched with another's."""


class EmbeddingError(FaeError):
    """An embedding backend cannot be loaded, or its endpoint answered badly."""
