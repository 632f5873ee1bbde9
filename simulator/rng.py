"""Deterministic randomness: every stream, name and id derives from the seed, never from hash().

``random.Random`` seeded with a ``str`` hashes it with SHA-512, so streams do not depend on
``PYTHONHASHSEED``.
"""

import hashlib
import random

_MASK32 = 0xFFFFFFFF


def stream(seed: int, name: str) -> random.Random:
    """An independent random stream per purpose, so adding draws to one leaves the others alone."""
    return random.Random(f"gpuledger/{seed}/{name}")  # noqa: S311 - simulation, not secrets


def digest_hex(seed: int, *parts: object) -> str:
    text = "/".join([str(seed), *(str(p) for p in parts)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def gpu_uuid(seed: int, node: str, index: int) -> str:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` as nvidia-smi prints it."""
    h = digest_hex(seed, "gpu", node, index)
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def k8s_uid(seed: int, *parts: object) -> str:
    """A UUIDv4-shaped Kubernetes object uid."""
    h = digest_hex(seed, "uid", *parts)
    variant = "89ab"[int(h[16], 16) % 4]
    return f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


_POD_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes' rand.String uses


def pod_suffix(seed: int, *parts: object, length: int = 5) -> str:
    h = int(digest_hex(seed, "suffix", *parts)[:16], 16)
    chars = []
    for _ in range(length):
        h, r = divmod(h, len(_POD_SUFFIX_ALPHABET))
        chars.append(_POD_SUFFIX_ALPHABET[r])
    return "".join(chars)


def short_hex(seed: int, *parts: object, length: int = 5) -> str:
    return digest_hex(seed, "hex", *parts)[:length]


def mix(a: int, b: int, c: int) -> int:
    """A cheap stateless 32-bit hash (for per-sample noise that must be the same on every read)."""
    x = (a * 0x9E3779B1 + b * 0x85EBCA77 + c * 0xC2B2AE3D) & _MASK32
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & _MASK32
    x ^= x >> 12
    x = (x * 0x297A2D39) & _MASK32
    x ^= x >> 15
    return x
