"""slurm-bridge representative jobs: the pods in ``AdminComment`` (``{"pods": ["ns/pod", …]}``)
as a list per row; free text and bad JSON give an empty list."""

from __future__ import annotations

import json

import polars as pl


def _pods_of(text: str) -> list[str]:
    try:
        obj = json.loads(text)
    except ValueError:
        return []
    value = obj.get("pods") if isinstance(obj, dict) else None
    return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []


#: ``{"pods": ["ns/pod", …]}`` and nothing else (JSON whitespace, no control characters, no
#: ``\\u`` escapes): Polars' JSON decoder reads it exactly as ``json.loads`` does; other texts go
#: through :func:`_pods_of`.
_JSON_WS = r"[ \t\n\r]*"


_JSON_STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"'


_PODS_ONLY_RE = (rf'^\{{{_JSON_WS}"pods"{_JSON_WS}:{_JSON_WS}\[{_JSON_WS}'
                 rf'(?:{_JSON_STR}{_JSON_WS}(?:,{_JSON_WS}{_JSON_STR}{_JSON_WS})*)?\]{_JSON_WS}\}}$')


_PODS_DTYPE = pl.Struct({"pods": pl.List(pl.String)})


def _pods_table(texts: pl.Series) -> pl.Series:
    """The pods of each of ``texts`` (distinct AdminComment texts mentioning "pods")."""
    simple = texts.str.contains(_PODS_ONLY_RE).fill_null(False)
    position = pl.arange(0, texts.len(), eager=True)
    parts = []
    if simple.any():
        decoded = texts.filter(simple).str.json_decode(_PODS_DTYPE).struct.field("pods")
        parts.append(pl.DataFrame({"_p": position.filter(simple), "bridge_pods": decoded}))
    if not simple.all():
        values = [_pods_of(t) for t in texts.filter(~simple).to_list()]
        parts.append(pl.DataFrame({"_p": position.filter(~simple), "bridge_pods": values},
                                  schema={"_p": position.dtype,
                                          "bridge_pods": pl.List(pl.String)}))
    return pl.concat(parts).sort("_p")["bridge_pods"]


def bridge_pods(admin: pl.Series) -> pl.Series:
    """``{"pods": ["ns/pod", …]}`` → the list; anything else (free text, bad JSON) → [].

    Only rows mentioning ``"pods"`` are decoded (once per distinct text); the others share one
    empty list through a gather.
    """
    mask = admin.str.contains('"pods"', literal=True).fill_null(False)
    n_pods = int(mask.sum())
    if n_pods == 0:
        return pl.repeat([], admin.len(), dtype=pl.List(pl.String), eager=True).alias("bridge_pods")
    texts = admin.filter(mask)
    uniq = texts.unique(maintain_order=True)
    table = pl.concat([pl.Series("bridge_pods", [[]], dtype=pl.List(pl.String)),
                       _pods_table(uniq)])
    ids = (
        pl.DataFrame({"_k": texts})
        .join(pl.DataFrame({"_k": uniq, "_id": pl.int_range(1, uniq.len() + 1, eager=True)}),
              on="_k", how="left", maintain_order="left")["_id"]
    )
    index = pl.zeros(admin.len(), dtype=pl.Int64, eager=True).scatter(
        pl.arange(0, admin.len(), eager=True).filter(mask), ids
    )
    return table.gather(index).alias("bridge_pods")
