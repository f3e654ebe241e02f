"""Megatron-Core's custom pipeline layout (`--pipeline-model-parallel-layout`, megatron/core/transformer/
pipeline_parallel_layer_layout.py, PipelineParallelLayerLayout): one string naming what each of the
pp x virtual_stages model chunks holds, chunk after chunk in layer order (chunk k runs on pipeline stage k % pp
as its virtual stage k // pp, the interleaved schedule's order).

Letters: `E` the input embedding, `t` a transformer layer, `L` the output layer with its loss, `m` a
multi-token-prediction module (DeepSeek-V3's MTP, TrainingSpec.mtp_layers; after every `t`); `|` ends a chunk,
`(...)*n` and `x*n` repeat a group or one letter n times, commas are cosmetic. DeepSeek-V3 on pp 8 x 4 chunks:
"Et|(tt|)*30L", the embedding and one layer, thirty chunks of two layers, the loss alone. Megatron-Core
requires the embedding first and the loss last, each once, and as many `t` as the model has layers; a chunk
may be empty.
"""

from __future__ import annotations

import re

LAYOUT_LETTERS = {"E": "the input embedding", "t": "a transformer layer", "L": "the output layer and its loss",
                  "m": "a multi-token-prediction layer"}
_GROUP = re.compile(r"\(([^()]+)\)\*(\d+)")  # (ab|)*n
_LETTER = re.compile(r"([^()*|\d])\*(\d+)")  # t*n


def layout_chunks(layout: str) -> list[str]:
    """The letters of each chunk of `layout` (module docstring), repeats unrolled; ValueError saying what is
    wrong for a letter the grammar lacks, an unbalanced group or a misplaced embedding or loss."""
    text = layout.replace(",", "").replace(" ", "")
    text = _GROUP.sub(lambda m: m.group(1) * int(m.group(2)), text)
    text = _LETTER.sub(lambda m: m.group(1) * int(m.group(2)), text)
    stray = sorted(set(text) - set(LAYOUT_LETTERS) - {"|"})
    if stray:
        raise ValueError(f"{layout!r}: {', '.join(map(repr, stray))} not understood; a layout holds "
                         + ", ".join(f"{k} ({v})" for k, v in LAYOUT_LETTERS.items())
                         + ", | between chunks, (...)*n and x*n repeats (one level of parentheses)")
    chunks = text.split("|")
    if "m" in text and "t" in text[text.index("m"):]:
        raise ValueError(f"{layout!r}: the MTP modules m come after every transformer layer t")
    if text.count("E") != 1 or not chunks[0].startswith("E"):
        raise ValueError(f"{layout!r}: the embedding E must open the first chunk, once")
    if text.count("L") != 1 or not chunks[-1].endswith("L"):
        raise ValueError(f"{layout!r}: the loss L must close the last chunk, once")
    return chunks


def layout_counts(layout: str, letter: str = "t") -> list[int]:
    """How many of `letter` each chunk of `layout` holds (layout_chunks): transformer layers (t) or multi-token
    prediction modules (m)."""
    return [chunk.count(letter) for chunk in layout_chunks(layout)]


def uneven_layout(layers: int, pp: int, virtual_stages: int, first: int | None, last: int | None) -> str:
    """Megatron-Core's uneven split (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers;
    transformer_layer.py get_transformer_layer_offset) as the layout it makes: the first stage holds `first`
    layers, the last `last`, the other stages the rest evenly, each stage's layers split evenly over its
    virtual_stages chunks. ValueError where Megatron-Core's divisions do not come out whole."""
    counts = [first if s == 0 and first is not None else last if s == pp - 1 and last is not None else None
              for s in range(pp)]
    middle = [s for s, n in enumerate(counts) if n is None]
    rest = layers - sum(n for n in counts if n is not None)
    if rest < 0 or (middle and rest % len(middle)) or (not middle and rest):
        raise ValueError(f"first {first} and last {last} of {layers} layers leave {rest} for {len(middle)} "
                         f"middle stage(s) of pp {pp}, which do not divide evenly")
    stage_layers = [rest // len(middle) if n is None else n for n in counts]
    if any(n % virtual_stages for n in stage_layers):
        raise ValueError(f"stages of {stage_layers} layers do not divide over {virtual_stages} virtual stages")
    chunks = ["t" * (stage_layers[k % pp] // virtual_stages) for k in range(pp * virtual_stages)]
    chunks[0], chunks[-1] = "E" + chunks[0], chunks[-1] + "L"
    return "|".join(chunks)
